"""The asyncio client (grpc.aio): the methods of reach.Client as
coroutines, and async streams that cannot deadlock (a reader task takes
the answers; send() waits only for the server's window).

    import asyncio
    import reach
    import reach.aio

    async def main():
        async with reach.aio.Client() as client:   # $REACH_ADDRESS, else 127.0.0.1:50051
            skeleton_id = (await client.register("examples/humanoid.skeleton.json")).skeleton_id
            solved = await client.solve(skeleton_id, reach.Goals(["l_leg"], [(0.1, 0.2, 0.1)]))
            async with client.stream(skeleton_id, window=8) as stream:
                async def produce():
                    for i in range(1000):
                        await stream.send(reach.Goals(["l_leg"], [(0.1, 0.2, 0.1 + 0.0001 * i)]))
                    await stream.close()               # no more frames
                producer = asyncio.create_task(produce())
                answers = [answer async for answer in stream]   # until closed and all in
                await producer
            print(solved.rotation("l_knee"), len(answers))

    asyncio.run(main())
"""
from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

import grpc
import grpc.aio

from reach import _core, _retarget, _types
from reach._core import TLS, Core
from reach._stream import AsyncStream, WarmSolve
from reach._types import Registered, SkeletonLike, Solution


class Client(Core):
    """reach.Client over grpc.aio; create it inside a running event loop.

    resume_streams, resume_within: as reach.Client's (a stream whose
    replica goes away reopens on another and goes on, warm)."""

    def __init__(self, address: Optional[str] = None, token: Optional[str] = None,
                 tls: Union[None, bool, TLS] = None, timeout: float = 10.0,
                 resume_streams: bool = False, resume_within: float = 5.0):
        self._setup(grpc.aio, address, token, tls, timeout)
        self.resume_streams = resume_streams
        self.resume_within = resume_within

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def _run(self, flow):
        answer, error = None, None
        while True:
            try:
                name, request = flow.throw(error) if error is not None else flow.send(answer)
            except StopIteration as done:
                return done.value
            answer, error = None, None
            try:
                answer = await self._unary[name](request, timeout=self.timeout, metadata=self._metadata)
            except grpc.RpcError as e:
                error = _types.from_rpc_error(e)

    async def register(self, skeleton: SkeletonLike) -> Registered:
        return await self._run(self._register(skeleton))

    async def import_file(self, path, format: Optional[str] = None, name: Optional[str] = None,
                          chains: Optional[Mapping[str, Tuple[str, str]]] = None,
                          return_motion: bool = False) -> "_types.Imported":
        return await self._run(self._import(path, format, name, chains, return_motion))

    async def get(self, skeleton_id: str) -> dict:
        return await self._run(self._get(skeleton_id))

    async def joint_names(self, skeleton_id: str) -> List[str]:
        return list((await self._run(self._info(skeleton_id))).names)

    async def list(self, page_size: int = 0) -> List[dict]:
        return await self._run(self._list(page_size))

    async def delete(self, skeleton_id: str) -> None:
        await self._run(self._delete(skeleton_id))

    async def health(self, service: str = "") -> str:
        return await self._run(self._health(service))

    async def solve(self, skeleton_id: str, goals: Any, start_pose: Any = None, return_globals: bool = False,
                    full_body: Optional[Mapping[str, Any]] = None, root_translation: Any = None) -> Solution:
        return await self._run(self._solve(skeleton_id, goals, start_pose, return_globals, full_body,
                                           root_translation))

    async def solve_batch(self, items: Any, skeleton_id: str = "", start_poses: Any = None,
                          root_translations: Any = None):
        return await self._run(self._solve_batch(items, skeleton_id, start_poses, root_translations))

    def stream(self, skeleton_id: str = "", window: int = 8, timeout: Optional[float] = None) -> "Stream":
        """As reach.Client.stream: `async with client.stream(id) as s:`,
        `await s.send(goals)`, `async for answer in s`."""
        return Stream(self, skeleton_id, window, timeout)

    async def create_profile(self, source: Any, target: Any, *, source_reference: Any = None,
                             target_reference: Any = None, source_overrides: Optional[Mapping[str, str]] = None,
                             target_overrides: Optional[Mapping[str, str]] = None, no_ik: Sequence[str] = (),
                             **options: Any) -> "_retarget.RetargetProfile":
        options.update(source_overrides=source_overrides, target_overrides=target_overrides, no_ik=no_ik)
        return await self._run(self._create_profile(source, target, source_reference, target_reference,
                                                    options))

    async def get_profile(self, profile_id: str) -> "_retarget.RetargetProfile":
        return await self._run(self._get_profile(profile_id))

    async def list_profiles(self, page_size: int = 0) -> List[dict]:
        return await self._run(self._list_profiles(page_size))

    async def delete_profile(self, profile: Any) -> None:
        await self._run(self._delete_profile(_retarget.profile_id_of(profile)))

    async def retarget(self, profile: Any, rotations: Any, root_translation: Any = None,
                       return_globals: bool = False) -> "_retarget.RetargetedFrame":
        return await self._run(self._retarget(profile, rotations, root_translation, return_globals))

    async def retarget_batch(self, profile: Any, motion: Any, root_translations: Any = None,
                             frame_time_s: Optional[float] = None, report: bool = False,
                             return_globals: bool = False, batch_frames: int = 4000
                             ) -> "_retarget.RetargetedMotion":
        return await self._run(self._retarget_batch(profile, motion, root_translations, frame_time_s,
                                                    report, return_globals, batch_frames))

    def retarget_stream(self, profile: Any, window: int = 8, frame_time_s: Optional[float] = None,
                        timeout: Optional[float] = None) -> "RetargetStream":
        """As reach.Client.retarget_stream, with `async with` / `await
        send()` / `async for`."""
        return RetargetStream(self, _retarget.profile_id_of(profile), window, timeout,
                              _retarget._frame_time(frame_time_s))


class _Lazy(AsyncStream):
    """An async stream whose call opens on first use (`async with` or the
    first send), once what it needs has been fetched."""

    def __init__(self, client: Client, name: str, window: int, timeout: Optional[float]):
        if not isinstance(window, int) or window < 1:
            raise _types.ReachError(grpc.StatusCode.INVALID_ARGUMENT,
                                    f"window: expected an integer >= 1, got {window!r}")
        self._client, self._name, self._window, self._timeout = client, name, window, timeout
        self._opened = False

    async def _prepare(self) -> None:
        pass

    async def _open(self) -> None:
        if not self._opened:
            self._opened = True
            await self._prepare()
            client = self._client

            def open_call(timeout: Optional[float]):
                return client._streams[self._name](metadata=client._metadata, timeout=timeout)

            AsyncStream.__init__(self, open_call, self._window, self._timeout, client.resume_streams,
                                 client.resume_within)

    async def __aenter__(self):
        await self._open()
        return self

    def in_flight(self) -> int:
        return AsyncStream.in_flight(self) if self._opened else 0

    async def __anext__(self):
        await self._open()
        return await AsyncStream.__anext__(self)

    async def close(self) -> None:
        await self._open()
        await AsyncStream.close(self)

    async def wait(self) -> None:
        await self._open()
        await AsyncStream.wait(self)

    def cancel(self) -> None:
        if self._opened:
            AsyncStream.cancel(self)


class Stream(WarmSolve, _Lazy):
    """reach.client.Stream's asyncio twin: `await send(...)`, `async for`,
    `await close()`."""

    def __init__(self, client: Client, skeleton_id: str, window: int, timeout: Optional[float]):
        super().__init__(client, "SolveStream", window, timeout)
        self._skeleton_id = skeleton_id
        self._info = None
        self._warm_init()  # Resume: the last answered pose (WarmSolve).

    async def _reseed(self, request: Any) -> Any:
        message = self._to_seed(request)
        if message is None:
            return request
        rest = None
        if self._needs_rest():
            rest = (await self._client._run(self._client._info(self._warm_skeleton))).rest_rotations
        return self._seeded(message, rest)

    async def _prepare(self) -> None:
        if self._skeleton_id:
            self._info = await self._client._run(self._client._maybe_info(self._skeleton_id))

    async def send(self, goals: Any, start_pose: Any = None, latest_wins: bool = False, **kwargs) -> int:
        body = _core.solve_frame(self._skeleton_id, goals, start_pose, latest_wins, kwargs)
        await self._open()
        return await self._send(body)

    def _decode(self, response) -> Solution:
        solution = _types.solution(response)
        if self._info is not None:
            solution.joint_names = self._info.names
        return solution


class RetargetStream(_Lazy):
    """reach.client.RetargetStream's asyncio twin."""

    def __init__(self, client: Client, profile_id: str, window: int, timeout: Optional[float],
                 frame_time_s: float):
        super().__init__(client, "RetargetStream", window, timeout)
        self._profile_id = profile_id
        self._frame_time = frame_time_s

    async def _prepare(self) -> None:
        self._source, self._target = await self._client._run(self._client._sides(self._profile_id))

    async def send(self, rotations: Any, root_translation: Any = None, frame_time_s: Optional[float] = None,
                   latest_wins: bool = False) -> int:
        await self._open()
        rot, root = _retarget.motion_arrays(rotations, root_translation, len(self._source), False,
                                            "rotations")
        frame_time = self._frame_time if frame_time_s is None else _retarget._frame_time(frame_time_s)
        return await self._send(_retarget.retarget_bytes(self._profile_id, rot, root, frame_time, latest_wins))

    def _decode(self, response: bytes) -> "_retarget.RetargetedFrame":
        return _retarget.frame(response, self._target)
