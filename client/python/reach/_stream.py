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
    message or its bytes, with the sequence set) and `_decode(response)`."""

    def __init__(self, open_call: Callable[[Any], Any], window: int):
        if not isinstance(window, int) or window < 1:
            raise ReachError(grpc.StatusCode.INVALID_ARGUMENT, f"window: expected an integer >= 1, got {window!r}")
        self.window = window
        self._requests: "queue.Queue[Any]" = queue.Queue()
        self._answers: "collections.deque[Any]" = collections.deque()
        self._cond = threading.Condition()
        self._sent = 0
        self._received = 0
        self._closed = False
        self._finished = False
        self._error: Optional[ReachError] = None
        self._senders: "weakref.WeakSet[threading.Thread]" = weakref.WeakSet()
        self._call = open_call(iter(self._requests.get, _END))
        self._reader = threading.Thread(target=self._read, name="reach-stream-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            for response in self._call:
                with self._cond:
                    self._received += 1
                    self._answers.append(response)
                    self._cond.notify_all()
        except grpc.RpcError as e:
            with self._cond:
                self._error = _types.from_rpc_error(e)
        finally:
            with self._cond:
                self._finished = True
                self._cond.notify_all()
            self._requests.put(_END)  # Unblocks grpc's request thread.

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
            self._cond.notify_all()
        self._call.cancel()

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
