"""Which connection makes room at the connection limit (webhook.connections
``ConnectionGuard._make_room``): a connection that has only just opened, or only just
answered, is most likely the API server's about to send a review, so connections whose
requests wait on bodies that never come are closed before it. The end-to-end attack is
tests/webhook/test_hostile_connections.py; this pins the order without its timing."""

from __future__ import annotations

import io
import time
from typing import Any

import pytest

from webhook.connections import _FRESH, ConnectionGuard
from webhook.logs import JsonLog
from webhook.metrics import WebhookMetrics


class _Transport:
    def __init__(self, name: str) -> None:
        self.name = name
        self.aborted = False

    def abort(self) -> None:
        self.aborted = True


class _Connection:
    """What the guard reads of an open connection."""

    def __init__(
        self, client: str, *, idle_since: float | None = None, body_since: float | None = None
    ) -> None:
        self.client = client
        self.busy = idle_since is None
        self.idle_since = idle_since if idle_since is not None else 0.0
        self.body_pending_since = body_since


def _guard(**connections: _Connection) -> tuple[ConnectionGuard, dict[str, _Transport]]:
    guard = ConnectionGuard(
        WebhookMetrics(), JsonLog(io.StringIO()), max_connections=len(connections), read_timeout=10
    )
    transports = {name: _Transport(name) for name in connections}
    open_: dict[Any, Any] = {transports[n]: c for n, c in connections.items()}
    guard._open = open_
    return guard, transports


def _closed(transports: dict[str, _Transport]) -> list[str]:
    return [name for name, transport in transports.items() if transport.aborted]


def test_a_review_connection_that_just_opened_outlives_connections_waiting_on_bodies() -> None:
    now = time.monotonic()
    guard, transports = _guard(
        review=_Connection("10.0.0.1", idle_since=now),
        attacker=_Connection("10.0.0.9", body_since=now - 0.5),
        attacker2=_Connection("10.0.0.9", body_since=now - 0.2),
    )
    assert guard._make_room(None)
    assert _closed(transports) == ["attacker"]


def test_a_connection_idle_past_the_grace_goes_first() -> None:
    now = time.monotonic()
    guard, transports = _guard(
        stale=_Connection("10.0.0.1", idle_since=now - _FRESH - 5),
        waiting=_Connection("10.0.0.9", body_since=now - 30),
    )
    assert guard._make_room(None)
    assert _closed(transports) == ["stale"]


@pytest.mark.parametrize("client", [None, "10.0.0.1"])
def test_with_nothing_else_to_close_the_freshest_idle_ones_go_oldest_first(
    client: str | None,
) -> None:
    now = time.monotonic()
    guard, transports = _guard(
        newer=_Connection("10.0.0.1", idle_since=now - 0.1),
        older=_Connection("10.0.0.1", idle_since=now - 0.4),
        answering=_Connection("10.0.0.1"),
    )
    assert guard._make_room(client)
    assert _closed(transports) == ["older"]


def test_when_every_connection_is_answering_no_room_is_made() -> None:
    guard, transports = _guard(a=_Connection("10.0.0.1"), b=_Connection("10.0.0.2"))
    assert not guard._make_room(None)
    assert _closed(transports) == []
