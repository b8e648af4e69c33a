"""Bidirectional streams (SolveStream, RetargetStream) that cannot
deadlock: a reader (a thread, or an asyncio task) takes every answer off
the wire as it arrives, so send() waits only for the server's window
(at most `window` frames unanswered), never for the caller to read.

Iteration yields the answers in order. It ends once the stream is closed
(close(), or the end of the `with` block) and every answer is out; on the
thread (or asyncio task) that sends, it also ends when every frame sent so
far is answered, since that thread cannot send more while it waits.
"""
from __future__ import annotations

import asyncio
import collections
import queue
import threading
import time
import weakref
from typing import Any, Callable, Optional

import grpc

from reach import _types
from reach._types import ReachError

_END = object()


def _with_sequence(body: Any, sequence: int) -> Any:
    """The request with its sequence: bytes get the field prepended (the
    array path packs none); a message keeps one it already has."""
    if isinstance(body, bytes):
        return b"\x10" + _varint(sequence) + body
    if not body.sequence:
        body.sequence = sequence
    return body


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _closed_error() -> ReachError:
    return ReachError(grpc.StatusCode.FAILED_PRECONDITION, "stream: send after close")


class SyncStream:
    """The blocking stream. Subclasses give `_build(...)` (a request
    message or its bytes, with the sequence set) and `_decode(response)`;
    with resume, `_answered(request, response)` and `_reseed(request)`.

    resume: a stream broken by UNAVAILABLE (its replica killed, drained or
    scaled down), or CANCELLED (without this client cancelling it) or
    UNKNOWN (a proxy such as haproxy cuts the stream when its replica goes
    away), is reopened, on another replica when the client has
    several, and the frames not yet answered are sent again (the first
    reseeded); for up to `resume_within` seconds after the break."""

    def __init__(self, open_call: Callable[[Any, Optional[float]], Any], window: int,
                 timeout: Optional[float] = None, resume: bool = False, resume_within: float = 5.0):
        if not isinstance(window, int) or window < 1:
            raise ReachError(grpc.StatusCode.INVALID_ARGUMENT, f"window: expected an integer >= 1, got {window!r}")
        self.window = window
        self.resumes = 0
        self._open_call = open_call
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._resume = resume
        self._resume_within = resume_within
        self._pending: "collections.deque[Any]" = collections.deque()  # Sent, unanswered (resume).
        self._seed_next = False
        self._requests: "queue.Queue[Any]" = queue.Queue()
        self._answers: "collections.deque[Any]" = collections.deque()
        self._cond = threading.Condition()
        self._sent = 0
        self._received = 0
        self._closed = False
        self._cancelled = False
        self._finished = False
        self._error: Optional[ReachError] = None
        self._senders: "weakref.WeakSet[threading.Thread]" = weakref.WeakSet()
        self._call = open_call(iter(self._requests.get, _END), timeout)
        self._reader = threading.Thread(target=self._read, name="reach-stream-reader", daemon=True)
        self._reader.start()

    def _answered(self, request: Any, response: Any) -> None:
        """Resume: each answered frame with its request, in order."""

    def _reseed(self, request: Any) -> Any:
        """Resume: the first unanswered frame as it goes out again."""
        return request

    def _read(self) -> None:
        broken_since = None
        while True:
            try:
                for response in self._call:
                    broken_since = None
                    with self._cond:
                        self._received += 1
                        if self._resume:
                            self._answered(self._pending.popleft(), response)
                        self._answers.append(response)
                        self._cond.notify_all()
                break
            except grpc.RpcError as e:
                if broken_since is None:
                    broken_since = time.monotonic()
                outcome = self._reopen(e, broken_since)
                if outcome == "again":
                    continue
                if outcome != "done":
                    with self._cond:
                        self._error = _types.from_rpc_error(e)
                break
        with self._cond:
            self._finished = True
            self._cond.notify_all()
        self._requests.put(_END)  # Unblocks grpc's request thread.

    def _reopen(self, error: grpc.RpcError, broken_since: float) -> str:
        """After a break: "again" (reopened), "done" (nothing left to
        answer) or "failed"."""
        # Also CANCELLED (that this client did not ask for) and UNKNOWN: what
        # gRPC reports when a proxy between cuts the stream after the
        # answers began (haproxy, its replica gone: RST_STREAM CANCEL, or
        # the response ended without a status). reach-server itself ends a
        # stream with neither.
        if not self._resume or self._cancelled or error.code() not in (
                grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
                grpc.StatusCode.UNKNOWN):
            return "failed"
        attempt = 0
        while True:
            now = time.monotonic()
            give_up = broken_since + self._resume_within
            if self._deadline is not None:
                give_up = min(give_up, self._deadline)
            if now >= give_up:
                return "failed"
            if attempt > 0 or now - broken_since > 0.001:
                time.sleep(min(0.01 * (attempt + 1), 0.1))
            attempt += 1
            with self._cond:
                if self._cancelled:
                    return "failed"
                if self._closed and not self._pending:
                    return "done"
                frames = list(self._pending)
            if frames:
                try:
                    frames[0] = self._reseed(frames[0])
                except ReachError as e:
                    if e.code == grpc.StatusCode.UNAVAILABLE:
                        continue
                    return "failed"
            with self._cond:
                # Send holds the lock while it queues, so these are exactly
                # the frames the broken call had (and the new ones since).
                frames += list(self._pending)[len(frames):]
                old, self._requests = self._requests, queue.Queue()
                for frame in frames:
                    self._requests.put(frame)
                if self._closed:
                    self._requests.put(_END)
                if frames:
                    self._pending[0] = frames[0]
                # Nothing was outstanding: the next frame sent is reseeded.
                self._seed_next = not frames
                timeout = None if self._deadline is None else max(0.0, self._deadline - time.monotonic())
                self._call = self._open_call(iter(self._requests.get, _END), timeout)
                self.resumes += 1
            old.put(_END)
            return "again"

    def _send(self, body: Any) -> int:
        """Waits for room in the window, then queues the request (its
        sequence set); returns the sequence."""
        self._senders.add(threading.current_thread())
        with self._cond:
            while (self._sent - self._received >= self.window and not self._finished
                   and not self._closed):
                self._cond.wait()
            if self._closed:
                raise _closed_error()
            if self._finished:
                raise self._error or ReachError(grpc.StatusCode.CANCELLED, "stream: ended")
            self._sent += 1
            sequence = self._sent
            request = _with_sequence(body, sequence)
            if self._seed_next:
                # The first frame after a resume that had nothing to resend.
                self._seed_next = False
                try:
                    request = self._reseed(request)
                except ReachError:
                    pass  # It starts cold.
            if self._resume:
                self._pending.append(request)
            self._requests.put(request)
        return sequence if isinstance(request, bytes) else request.sequence

    def in_flight(self) -> int:
        """Frames sent that the server has not answered yet (<= window)."""
        with self._cond:
            return self._sent - self._received

    def __iter__(self):
        return self

    def __next__(self):
        with self._cond:
            while True:
                if self._answers:
                    response = self._answers.popleft()
                    break
                if self._finished:
                    if self._error is not None:
                        raise self._error
                    raise StopIteration
                if (self._sent == self._received and not self._closed
                        and threading.current_thread() in self._senders):
                    raise StopIteration  # Only this thread could send more.
                self._cond.wait()
        return self._decode(response)

    def close(self) -> None:
        """Half-closes: no more frames; the answers still come."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
            self._requests.put(_END)

    def cancel(self) -> None:
        with self._cond:
            self._closed = True
            self._cancelled = True
            self._cond.notify_all()
            call = self._call
        call.cancel()

    def wait(self, timeout: Optional[float] = None) -> None:
        """Closes, waits until every answer is in (still to be iterated)
        and raises the stream's error, if any."""
        self.close()
        self._reader.join(timeout)
        if self._reader.is_alive():
            raise ReachError(grpc.StatusCode.DEADLINE_EXCEEDED, "stream: answers still missing")
        if self._error is not None:
            raise self._error

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is not None:
            self.cancel()
            return
        self.wait()


class AsyncStream:
    """The asyncio stream (grpc.aio); create it inside a running loop."""

    def __init__(self, call, window: int):
        if not isinstance(window, int) or window < 1:
            raise ReachError(grpc.StatusCode.INVALID_ARGUMENT, f"window: expected an integer >= 1, got {window!r}")
        self.window = window
        self._call = call
        self._answers: "collections.deque[Any]" = collections.deque()
        self._cond = asyncio.Condition()
        self._write_lock = asyncio.Lock()
        self._sent = 0
        self._received = 0
        self._closed = False
        self._finished = False
        self._error: Optional[ReachError] = None
        self._senders: "weakref.WeakSet[asyncio.Task]" = weakref.WeakSet()
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        try:
            while True:
                response = await self._call.read()
                if response is grpc.aio.EOF:
                    code = await self._call.code()
                    if code != grpc.StatusCode.OK:
                        self._error = ReachError(code, await self._call.details() or "")
                    break
                async with self._cond:
                    self._received += 1
                    self._answers.append(response)
                    self._cond.notify_all()
        except grpc.RpcError as e:
            self._error = _types.from_rpc_error(e)
        except asyncio.CancelledError:
            self._error = self._error or ReachError(grpc.StatusCode.CANCELLED, "stream: cancelled")
        finally:
            self._finished = True
            async with self._cond:
                self._cond.notify_all()

    async def _send(self, body: Any) -> int:
        task = asyncio.current_task()
        if task is not None:
            self._senders.add(task)
        async with self._write_lock:
            async with self._cond:
                await self._cond.wait_for(lambda: self._sent - self._received < self.window
                                          or self._finished or self._closed)
                if self._closed:
                    raise _closed_error()
                if self._finished:
                    raise self._error or ReachError(grpc.StatusCode.CANCELLED, "stream: ended")
                self._sent += 1
                sequence = self._sent
                request = _with_sequence(body, sequence)
            try:
                await self._call.write(request)
            except (grpc.RpcError, asyncio.InvalidStateError):
                await asyncio.wait([self._reader])
                raise self._error or ReachError(grpc.StatusCode.CANCELLED, "stream: ended") from None
        return sequence if isinstance(request, bytes) else request.sequence

    def in_flight(self) -> int:
        return self._sent - self._received

    def __aiter__(self):
        return self

    async def __anext__(self):
        task = asyncio.current_task()
        async with self._cond:
            while True:
                if self._answers:
                    response = self._answers.popleft()
                    break
                if self._finished:
                    if self._error is not None:
                        raise self._error
                    raise StopAsyncIteration
                if self._sent == self._received and not self._closed and task in self._senders:
                    raise StopAsyncIteration  # Only this task could send more.
                await self._cond.wait()
        return self._decode(response)

    async def close(self) -> None:
        """Half-closes: no more frames; the answers still come."""
        async with self._write_lock:
            if self._closed:
                return
            self._closed = True
            async with self._cond:
                self._cond.notify_all()
            if not self._finished:
                try:
                    await self._call.done_writing()
                except (grpc.RpcError, asyncio.InvalidStateError):
                    pass

    def cancel(self) -> None:
        self._closed = True
        self._call.cancel()

    async def wait(self) -> None:
        """Closes, waits until every answer is in (still to be iterated)
        and raises the stream's error, if any."""
        await self.close()
        await asyncio.wait([self._reader])
        if self._error is not None:
            raise self._error

    async def __aenter__(self):
        return self

    async def __aexit__(self, exc_type, *exc) -> None:
        if exc_type is not None:
            self.cancel()
            await asyncio.wait([self._reader])
            return
        await self.wait()
