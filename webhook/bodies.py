"""Request bodies: read only as their bytes arrive, held in a pool of ``--max-buffered-bytes``
with a share that large bodies cannot take, and given a short time to start and a bounded
time to end.

A body takes room in the pool (``BodyPool``) as its bytes arrive, not as its Content-Length
announces them: a client that announces six bodies of 6 MiB and sends nothing holds no room
at all, and one that sends part of a body holds what it sent, which is what the pool bounds
(memory). The room is given back once the review is answered.

Bodies announced at most ``SMALL_BODY_BYTES`` long may use the whole pool; longer ones
(and bodies of unknown length, sent chunked) only the pool less its small-body reserve. An
AdmissionReview is rarely more than a few tens of KiB (an object and its old version with
their managedFields), so large bodies that stall, or a flood of them, leave reviews the
reserve.

A body must start within ``FIRST_BYTE_TIMEOUT`` of its headers (the API server writes a
review's body right behind them) and end within the review's ``--deadline`` (or
``--read-timeout``, whichever is shorter): past the deadline its review would only be allowed
unchecked, so reading on is of no use, and a trickle of bytes cannot hold its room for long.

While its body has not arrived whole, a request's connection may be closed to make room for
a new connection at ``--max-connections`` (``webhook.connections``), after every idle one:
such a connection is doing nothing the server is waiting on.

Used from the event loop only: with room, a reservation is a sum, with no lock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import cast

from aiohttp import StreamReader, web

# An announced body at most this long is a small one: reviews, and what gpulint answers.
SMALL_BODY_BYTES = 512 * 1024
# The share of the pool kept for small bodies: a quarter of it, as far as the largest body
# still fits in the rest.
SMALL_RESERVE_SHARE = 4
# Seconds a body may take to start after its headers.
FIRST_BYTE_TIMEOUT = 1.0
# Where a request keeps what to call once its body has arrived, or will not: its
# connection's guard (webhook.connections) stops counting it among those waiting on a body.
BODY_SETTLED = "gpulint.body_settled"


def small_reserve(capacity: int, max_body_bytes: int) -> int:
    """The pool's reserve for small bodies: a quarter of ``capacity``, less if the largest
    body would no longer fit beside it."""
    return max(0, min(capacity // SMALL_RESERVE_SHARE, capacity - max_body_bytes))


class BodyTimeout(Exception):
    """The body did not start (``part`` is ``first-byte``) or end (``body``) in time."""

    def __init__(self, part: str, seconds: float) -> None:
        super().__init__(part)
        self.part = part
        self.seconds = seconds


class BodyTooLarge(Exception):
    """The body, as decoded, is longer than the limit."""


class NoRoom(Exception):
    """No room came free in the pool for the body's next bytes in time."""


class BodyPool:
    """Bytes of request bodies held at once, at most ``capacity``, of which large bodies may
    hold ``capacity - reserve``. A waiting body that fits goes in, not only the first in
    line, so that small reviews are not held up behind a large one."""

    def __init__(self, capacity: int, reserve: int = 0) -> None:
        self.capacity = capacity
        self.large_capacity = capacity - reserve
        self.used = 0
        self.large_used = 0
        self._waiters: set[asyncio.Future[None]] = set()

    def room(self, small: bool) -> BodyRoom:
        """The room of one body (``async with``), given back when the block ends."""
        return BodyRoom(self, small)

    def _fits(self, size: int, small: bool) -> bool:
        if self.used + size > self.capacity:
            return False
        return small or self.large_used + size <= self.large_capacity

    def _take(self, held: BodyRoom, size: int) -> None:
        self.used += size
        if not held.small:
            self.large_used += size
        held.size += size

    def _give_back(self, held: BodyRoom) -> None:
        if not held.size:
            return
        self.used -= held.size
        if not held.small:
            self.large_used -= held.size
        held.size = 0
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _wait_for(self, held: BodyRoom, size: int, end: float) -> bool:
        loop = asyncio.get_running_loop()
        while not self._fits(size, held.small):
            waiter = loop.create_future()
            self._waiters.add(waiter)
            try:
                async with asyncio.timeout_at(end):
                    await waiter
            except TimeoutError:
                return False
            finally:
                self._waiters.discard(waiter)
        self._take(held, size)
        return True


class BodyRoom:
    """What one body holds of the pool."""

    __slots__ = ("pool", "size", "small")

    def __init__(self, pool: BodyPool, small: bool) -> None:
        self.pool = pool
        self.small = small
        self.size = 0

    async def __aenter__(self) -> BodyRoom:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.pool._give_back(self)

    def take_now(self, size: int) -> bool:
        """Hold ``size`` more bytes if there is room for them now."""
        if self.pool._fits(size, self.small):
            self.pool._take(self, size)
            return True
        return False

    async def take(self, size: int, end: float) -> bool:
        """Hold ``size`` more bytes; False when no room came for them by ``end`` (the event
        loop's time)."""
        pool = self.pool
        if pool._fits(size, self.small):
            pool._take(self, size)
            return True
        return await pool._wait_for(self, size, end)


async def read_body(request: web.Request, room: BodyRoom, *, limit: int, within: float) -> bytes:
    """The whole body of ``request``, each part of it held in ``room`` as it arrives.

    Raises ``BodyTimeout`` when it does not start within ``FIRST_BYTE_TIMEOUT`` (or
    ``within``, if shorter) or end within ``within`` seconds, ``BodyTooLarge`` past ``limit``
    bytes, ``NoRoom`` when the pool has no room for it by then; aiohttp's own errors for a
    body that does not decode or is cut short.
    """
    try:
        return await _read(request, room, limit, within)
    finally:
        settled = request.get(BODY_SETTLED)
        if settled is not None:
            cast(Callable[[], None], settled)()


async def _read(request: web.Request, room: BodyRoom, limit: int, within: float) -> bytes:
    loop = asyncio.get_running_loop()
    start = loop.time()
    end = start + within
    first_byte = min(FIRST_BYTE_TIMEOUT, within)
    content = request.content
    chunks: list[bytes] = []
    size = 0
    while True:
        if content.is_eof():
            # What is left of the body is all here (a review usually arrives whole with its
            # headers): taken without a timer.
            chunk = content.read_nowait()
        else:
            try:
                chunk = await _next_part(content, end if chunks else start + first_byte)
            except TimeoutError:
                if chunks:
                    raise BodyTimeout("body", within) from None
                raise BodyTimeout("first-byte", first_byte) from None
        if not chunk:
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        if not room.take_now(len(chunk)) and not await _wait_for_room(request, room, chunk, end):
            raise NoRoom
        chunks.append(chunk)


async def _wait_for_room(request: web.Request, room: BodyRoom, chunk: bytes, end: float) -> bool:
    """Wait for room for ``chunk`` with the connection's reading paused: aiohttp reads ahead
    again (up to its 128 KiB high-water mark) as soon as a part is taken from its buffer, so a
    body waiting here would otherwise hold that much more besides the part in hand."""
    if request.content.is_eof():  # the body is here whole: nothing more of it to read
        return await room.take(len(chunk), end)
    # Reading is not paused here: taking the part emptied aiohttp's buffer, which resumed it.
    protocol = request.protocol
    protocol.pause_reading()
    try:
        return await room.take(len(chunk), end)
    finally:
        if protocol.transport is not None:
            protocol.resume_reading()


async def _next_part(content: StreamReader, by: float) -> bytes:
    """The next bytes of the body, waited for until ``by`` (the event loop's time; then
    TimeoutError)."""
    async with asyncio.timeout_at(by):
        return await content.readany()
