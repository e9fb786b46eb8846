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


def run_all(tasks: Sequence[Callable[[], T]], concurrency: int, deadline: Deadline) -> list[T]:
    """Results in task order; the first error a task raised is raised here.

    Raises PrometheusError when the deadline passes before every task is done.
    """
    if not tasks:
        return []
    outcomes: list[Outcome[T]] = [Outcome() for _ in tasks]
    pending: queue.SimpleQueue[int] = queue.SimpleQueue()
    for index in range(len(tasks)):
        pending.put(index)
    remaining = [len(tasks)]
    lock = threading.Lock()
    finished = threading.Event()

    def work() -> None:
        while True:
            try:
                index = pending.get_nowait()
            except queue.Empty:
                return
            try:
                outcomes[index].value = tasks[index]()
            except BaseException as error:  # handed to the caller below
                outcomes[index].error = error
            with lock:
                remaining[0] -= 1
                if remaining[0] == 0:
                    finished.set()

    for _ in range(max(1, min(concurrency, len(tasks)))):
        threading.Thread(target=work, name="gpulint-live", daemon=True).start()
    if not finished.wait(max(deadline.remaining(), 0.0)):
        raise PrometheusError(
            f"no complete answer within the {deadline.seconds:g} s timeout", TIMEOUT
        )
    for outcome in outcomes:
        if outcome.error is not None:
            raise outcome.error
    return [outcome.value for outcome in outcomes]  # type: ignore[misc]
