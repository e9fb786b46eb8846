"""Run independent checks a few at a time, all within one deadline.

Daemon threads, not a ThreadPoolExecutor: when a Prometheus hangs past the timeout, gpulint
reports and exits; a request still waiting on a socket must not keep the process alive
(executor threads are joined at interpreter exit).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from gpulint.live.client import Deadline, PrometheusError
from gpulint.live.snapshot import TIMEOUT

T = TypeVar("T")


@dataclass
class Outcome(Generic[T]):
    value: T | None = None
    error: BaseException | None = None
    done: bool = False


def run_all(tasks: Sequence[Callable[[], T]], concurrency: int, deadline: Deadline) -> list[T]:
    """Results in task order; the first error a task raised is raised here.

    Raises PrometheusError when the deadline passes before every task is done.
    """
    outcomes, finished, stop = _start(tasks, concurrency)
    if not finished.wait(max(deadline.remaining(), 0.0)):
        stop.set()
        raise PrometheusError(
            f"no complete answer within the {deadline.seconds:g} s timeout", TIMEOUT
        )
    for outcome in outcomes:
        if outcome.error is not None:
            raise outcome.error
    return [outcome.value for outcome in outcomes]  # type: ignore[misc]


def run_each(
    tasks: Sequence[Callable[[], T]], concurrency: int, deadline: Deadline
) -> list[Outcome[T]]:
    """Each task's outcome, in task order, whatever the others did: a task still running
    when the deadline passes gets a TIMEOUT error (what it does later is not looked at)."""
    outcomes, finished, stop = _start(tasks, concurrency)
    finished.wait(max(deadline.remaining(), 0.0))
    stop.set()
    late = PrometheusError(f"no complete answer within the {deadline.seconds:g} s timeout", TIMEOUT)
    with _results_lock:
        return [
            Outcome(o.value, o.error, True) if o.done else Outcome(None, late) for o in outcomes
        ]


_results_lock = threading.Lock()


def _start(
    tasks: Sequence[Callable[[], T]], concurrency: int
) -> tuple[list[Outcome[T]], threading.Event, threading.Event]:
    """Start the worker threads. The first event is set once every task has ended; setting
    the second stops the threads from starting the tasks still waiting."""
    finished, stop = threading.Event(), threading.Event()
    outcomes: list[Outcome[T]] = [Outcome() for _ in tasks]
    if not tasks:
        finished.set()
        return outcomes, finished, stop
    pending: queue.SimpleQueue[int] = queue.SimpleQueue()
    for index in range(len(tasks)):
        pending.put(index)
    remaining = [len(tasks)]
    lock = threading.Lock()

    def work() -> None:
        while not stop.is_set():
            try:
                index = pending.get_nowait()
            except queue.Empty:
                return
            value: T | None = None
            error: BaseException | None = None
            try:
                value = tasks[index]()
            except BaseException as raised:  # handed to the caller
                error = raised
            with _results_lock:
                outcome = outcomes[index]
                outcome.value, outcome.error, outcome.done = value, error, True
            with lock:
                remaining[0] -= 1
                if remaining[0] == 0:
                    finished.set()

    for _ in range(max(1, min(concurrency, len(tasks)))):
        threading.Thread(target=work, name="gpulint-live", daemon=True).start()
    return outcomes, finished, stop
