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
from reach.v1 import solve_pb2

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


# What a broken stream may be reopened after: UNAVAILABLE, and also
# CANCELLED (that the client did not ask for) and UNKNOWN: what gRPC
# reports when a proxy between cuts the stream after the answers began
# (haproxy, its replica gone: RST_STREAM CANCEL, or the response ended
# without a status). reach-server itself ends a stream with neither.
_RESUMABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
              grpc.StatusCode.UNKNOWN)


def _resume_wait(broken_since: float, attempt: int, within: float,
                 deadline: Optional[float]) -> Optional[float]:
    """Seconds to wait before reopening attempt `attempt` (0 first) of a
    stream broken at `broken_since`, or None when the budget (`within`,
    and the stream's deadline) is spent."""
    now = time.monotonic()
    give_up = broken_since + within
    if deadline is not None:
        give_up = min(give_up, deadline)
    if now >= give_up:
        return None
    if attempt > 0 or now - broken_since > 0.001:
        return min(0.01 * (attempt + 1), 0.1)
    return 0.0


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
        if not self._resume or self._cancelled or error.code() not in _RESUMABLE:
            return "failed"
        attempt = 0
        while True:
            wait = _resume_wait(broken_since, attempt, self._resume_within, self._deadline)
            if wait is None:
                return "failed"
            if wait > 0:
                time.sleep(wait)
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


class WarmSolve:
    """What a resumed SolveStream needs (sync and asyncio alike): the last
    answered pose, followed from the answers (`_answered`), and the first
    frame sent again seeded with it (`_seeded`)."""

    def _warm_init(self) -> None:
        self._warm_skeleton: Optional[str] = None
        self._warm_base = None  # The frame's start_pose (a Pose), else rest.
        self._warm_rotations: dict = {}
        self._warm_root = None

    @staticmethod
    def _message(request: Any) -> Any:
        return solve_pb2.SolveRequest.FromString(request) if isinstance(request, bytes) else request

    def _answered(self, request: Any, response: Any) -> None:
        # Each answer lists the joints that differ from its start (the
        # previous answer, the frame's start_pose, or the rest pose on a new
        # skeleton); a refused or skipped frame leaves the start as it was.
        if response.HasField("error") or response.skipped:
            return
        request = self._message(request)
        if request.skeleton_id != self._warm_skeleton or request.HasField("start_pose"):
            self._warm_skeleton = request.skeleton_id
            self._warm_base = request.start_pose if request.HasField("start_pose") else None
            self._warm_rotations = {}
            self._warm_root = None
        rotations = response.rotations
        for i, joint in enumerate(response.rotated_joints):
            self._warm_rotations[joint] = tuple(rotations[4 * i:4 * i + 4])
        for i, joint in enumerate(response.translated_joints):
            if joint == 0:  # A pose carries the root's translation only.
                self._warm_root = tuple(response.translations[3 * i:3 * i + 3])

    def _to_seed(self, request: Any) -> Any:
        """The request as a message when it is to be seeded (it continues
        the warm skeleton and brings no start_pose of its own), else None."""
        if self._warm_skeleton is None:
            return None
        message = self._message(request)
        if message.HasField("start_pose") or message.skeleton_id != self._warm_skeleton:
            return None
        return message

    def _needs_rest(self) -> bool:
        """Whether _seeded needs the skeleton's rest rotations."""
        return self._warm_base is None

    def _seeded(self, message: Any, rest_rotations: Any) -> Any:
        """`message` (a copy) starting from the last answered pose, as the
        broken stream's next frame would have (warm)."""
        pose = solve_pb2.Pose()
        if self._warm_base is not None:
            pose.CopyFrom(self._warm_base)
        else:
            for w, x, y, z in rest_rotations:
                pose.rotations.add(w=float(w), x=float(x), y=float(y), z=float(z))
        for joint, (w, x, y, z) in self._warm_rotations.items():
            q = pose.rotations[joint]
            q.w, q.x, q.y, q.z = w, x, y, z
        if self._warm_root is not None:
            pose.root_translation.x, pose.root_translation.y, pose.root_translation.z = self._warm_root
        message = solve_pb2.SolveRequest.FromString(message.SerializeToString())
        message.start_pose.CopyFrom(pose)
        return message


class AsyncStream:
    """The asyncio stream (grpc.aio); create it inside a running loop.

    open_call(timeout) opens the call. Subclasses give `_decode(response)`
    and, with resume, `_answered(request, response)` and the coroutine
    `_reseed(request)`. resume: as SyncStream's (a stream broken by
    UNAVAILABLE reopens, on another replica when the client has several,
    and the frames not yet answered go again in order, the first reseeded;
    for up to `resume_within` seconds after the break)."""

    def __init__(self, open_call: Callable[[Optional[float]], Any], window: int,
                 timeout: Optional[float] = None, resume: bool = False, resume_within: float = 5.0):
        if not isinstance(window, int) or window < 1:
            raise ReachError(grpc.StatusCode.INVALID_ARGUMENT, f"window: expected an integer >= 1, got {window!r}")
        self.window = window
        self.resumes = 0
        self._open_call = open_call
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._resume = resume
        self._resume_within = resume_within
        # Sent and unanswered, (sequence, request) (resume only).
        self._pending: "collections.deque[Any]" = collections.deque()
        self._seed_next = False
        self._resent = 0  # A resume sent every frame up to this sequence.
        self._answers: "collections.deque[Any]" = collections.deque()
        self._cond = asyncio.Condition()
        # Writes go out one at a time, in sequence order; a resume holds it
        # while it swaps the call and sends the unanswered frames again.
        self._write_lock = asyncio.Lock()
        self._sent = 0
        self._received = 0
        self._closed = False
        self._cancelled = False
        self._finished = False
        self._error: Optional[ReachError] = None
        self._senders: "weakref.WeakSet[asyncio.Task]" = weakref.WeakSet()
        self._call = open_call(timeout)
        self._reader = asyncio.ensure_future(self._read())

    def _answered(self, request: Any, response: Any) -> None:
        """Resume: each answered frame with its request, in order."""

    async def _reseed(self, request: Any) -> Any:
        """Resume: the first unanswered frame as it goes out again."""
        return request

    async def _read(self) -> None:
        broken_since = None
        try:
            while True:
                call = self._call
                try:
                    response = await call.read()
                    if response is not grpc.aio.EOF:
                        broken_since = None
                        async with self._cond:
                            self._received += 1
                            if self._resume:
                                self._answered(self._pending.popleft()[1], response)
                            self._answers.append(response)
                            self._cond.notify_all()
                        continue
                    code = await call.code()
                    if code == grpc.StatusCode.OK:
                        break
                    error = ReachError(code, await call.details() or "")
                except grpc.RpcError as e:
                    error = _types.from_rpc_error(e)
                if broken_since is None:
                    broken_since = time.monotonic()
                outcome = await self._reopen(error.code, broken_since)
                if outcome == "again":
                    continue
                if outcome != "done":
                    self._error = error
                break
        except asyncio.CancelledError:
            self._error = self._error or ReachError(grpc.StatusCode.CANCELLED, "stream: cancelled")
        finally:
            self._finished = True
            async with self._cond:
                self._cond.notify_all()

    async def _reopen(self, code: grpc.StatusCode, broken_since: float) -> str:
        """After a break: "again" (reopened), "done" (nothing left to
        answer) or "failed"."""
        if not self._resume or self._cancelled or code not in _RESUMABLE:
            return "failed"
        attempt = 0
        while True:
            wait = _resume_wait(broken_since, attempt, self._resume_within, self._deadline)
            if wait is None:
                return "failed"
            if wait > 0:
                await asyncio.sleep(wait)
            attempt += 1
            if self._cancelled:
                return "failed"
            async with self._write_lock:
                if self._closed and not self._pending:
                    return "done"
                if self._pending:
                    sequence, first = self._pending[0]
                    try:
                        first = await self._reseed(first)
                    except ReachError as e:
                        if e.code == grpc.StatusCode.UNAVAILABLE:
                            continue
                        return "failed"
                    self._pending[0] = (sequence, first)
                # Nothing was outstanding: the next frame sent is reseeded.
                self._seed_next = not self._pending
                timeout = None if self._deadline is None else max(0.0, self._deadline - time.monotonic())
                self._call = self._open_call(timeout)
                self.resumes += 1
                # Senders queue a frame before they write it: these are
                # exactly the frames the broken call had and those queued
                # since; a sender whose frame is among them does not write
                # it again (_resent).
                frames = list(self._pending)
                if frames:
                    self._resent = frames[-1][0]
                try:
                    for _, frame in frames:
                        await self._call.write(frame)
                    if self._closed:
                        await self._call.done_writing()
                except (grpc.RpcError, asyncio.InvalidStateError):
                    pass  # This call broke too: its read says so, and this runs again.
            return "again"

    async def _send(self, body: Any) -> int:
        task = asyncio.current_task()
        if task is not None:
            self._senders.add(task)
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
            seed, self._seed_next = self._seed_next, False
            if self._resume:
                self._pending.append((sequence, request))
        # In sequence order: nothing above waits once the sequence is taken,
        # and the lock is first come, first served.
        async with self._write_lock:
            if sequence > self._resent:
                if seed:
                    # The first frame after a resume that had nothing to resend.
                    try:
                        request = await self._reseed(request)
                    except ReachError:
                        pass  # It starts cold.
                    for i, (queued, _) in enumerate(self._pending):
                        if queued == sequence:
                            self._pending[i] = (sequence, request)
                try:
                    await self._call.write(request)
                except (grpc.RpcError, asyncio.InvalidStateError):
                    if not self._resume:
                        await asyncio.wait([self._reader])
                        raise self._error or ReachError(grpc.StatusCode.CANCELLED, "stream: ended") from None
                    # Resume: the reader reopens the stream and sends it again.
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
        self._cancelled = True
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
