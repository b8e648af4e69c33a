"""The asyncio client (grpc.aio): the same methods as reach.Client, as
coroutines, and an async stream.

    async with reach.aio.Client("127.0.0.1:50051") as client:
        solved = await client.solve(skeleton_id, [{"chain": "l_leg", "target": (0, 0.1, 0)}])
        async with client.stream(skeleton_id) as stream:
            await stream.send(goals)
            async for answer in stream:
                ...
"""
from __future__ import annotations

import asyncio
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import grpc
import grpc.aio
from google.protobuf import json_format

from reach import _types
from reach._health import health_pb2, health_pb2_grpc
from reach._types import GoalLike, ReachError, Registered, SkeletonLike, Solution
from reach.client import TLS, channel_setup
from reach.v1 import ik_service_pb2 as pb
from reach.v1 import ik_service_pb2_grpc
from reach.v1 import solve_pb2


class Client:
    """reach.Client over grpc.aio; create it inside a running event loop."""

    def __init__(self, address: str = "127.0.0.1:50051", token: Optional[str] = None,
                 tls: Union[None, bool, TLS] = None, timeout: float = 10.0):
        credentials, options, self._metadata = channel_setup(address, token, tls)
        self._channel = (grpc.aio.secure_channel(address, credentials, options) if credentials
                         else grpc.aio.insecure_channel(address, options))
        self._stub = ik_service_pb2_grpc.IkServiceStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)
        self.timeout = timeout

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def _call(self, method, request):
        try:
            return await method(request, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise _types.from_rpc_error(e) from None

    async def register(self, skeleton: SkeletonLike) -> Registered:
        request = pb.RegisterSkeletonRequest(skeleton=_types.skeleton_message(skeleton))
        r = await self._call(self._stub.RegisterSkeleton, request)
        return Registered(r.skeleton_id, r.version, r.created)

    async def import_file(self, path, format: Optional[str] = None, name: Optional[str] = None,
                    chains: Optional[Mapping[str, Tuple[str, str]]] = None,
                    return_motion: bool = False) -> "_types.Imported":
        """The server imports a skeleton file (BVH, URDF, glTF/GLB with
        embedded buffers, skeleton JSON; format from the extension unless
        given) and registers it. chains: {name: (root, tip)} to add or
        replace. return_motion: a BVH clip's frames come back as poses."""
        request = _types.import_request(path, format, name, chains, return_motion)
        return _types.imported(await self._call(self._stub.ImportSkeleton, request))

    async def get(self, skeleton_id: str) -> dict:
        r = await self._call(self._stub.GetSkeleton, pb.GetSkeletonRequest(skeleton_id=skeleton_id))
        return {"skeleton_id": r.skeleton_id, "version": r.version,
                "skeleton": json_format.MessageToDict(r.skeleton, preserving_proto_field_name=True)}

    async def list(self, page_size: int = 0) -> List[dict]:
        out: List[dict] = []
        token = ""
        while True:
            r = await self._call(self._stub.ListSkeletons,
                                 pb.ListSkeletonsRequest(page_size=page_size, page_token=token))
            out.extend(_types.summary(s) for s in r.skeletons)
            token = r.next_page_token
            if not token:
                return out

    async def delete(self, skeleton_id: str) -> None:
        await self._call(self._stub.DeleteSkeleton, pb.DeleteSkeletonRequest(skeleton_id=skeleton_id))

    async def solve(self, skeleton_id: str, goals: Union[GoalLike, Iterable[GoalLike]],
                    start_pose: Any = None, return_globals: bool = False,
                    full_body: Optional[Mapping[str, Any]] = None) -> Solution:
        request = _types.solve_request(skeleton_id, goals, start_pose, return_globals, full_body)
        return _types.solution(await self._call(self._stub.Solve, request))

    async def solve_batch(self, items: Sequence[Any], skeleton_id: str = "") -> List[Solution]:
        request = _types.batch_request(items, skeleton_id)
        r = await self._call(self._stub.SolveBatch, request)
        return [_types.solution(item) for item in r.items]

    def stream(self, skeleton_id: str = "", window: int = 8,
               timeout: Optional[float] = None) -> "Stream":
        return Stream(self._stub, self._metadata, skeleton_id, window, timeout)

    async def health(self, service: str = "") -> str:
        r = await self._call(self._health.Check, health_pb2.HealthCheckRequest(service=service))
        return health_pb2.HealthCheckResponse.ServingStatus.Name(r.status)


class Stream:
    """An async SolveStream with back-pressure (at most `window` frames
    unanswered: send() waits); answers in order through `async for`."""

    def __init__(self, stub, metadata, skeleton_id: str, window: int, timeout: Optional[float]):
        if window < 1:
            raise ReachError(grpc.StatusCode.INVALID_ARGUMENT, f"window: expected >= 1, got {window}")
        self._skeleton_id = skeleton_id
        self._room = asyncio.Semaphore(window)
        self._sent = 0
        self._received = 0
        self._closed = False
        self._call = stub.SolveStream(metadata=metadata, timeout=timeout)

    async def send(self, goals: Union[GoalLike, Iterable[GoalLike], solve_pb2.SolveRequest],
                   start_pose: Any = None, latest_wins: bool = False, **kwargs) -> int:
        if self._closed:
            raise ReachError(grpc.StatusCode.FAILED_PRECONDITION, "stream: send after close")
        request = _types.frame_request(self._skeleton_id, goals, start_pose, latest_wins, kwargs)
        self._sent += 1
        if not request.sequence:
            request.sequence = self._sent
        await self._room.acquire()
        try:
            await self._call.write(request)
        except (grpc.RpcError, asyncio.InvalidStateError):
            self._room.release()
            code = await self._call.code()
            raise ReachError(code, await self._call.details() or "") from None
        return request.sequence

    def in_flight(self) -> int:
        return self._sent - self._received

    def __aiter__(self) -> "Stream":
        return self

    async def __anext__(self) -> Solution:
        if self._received >= self._sent and not self._closed:
            raise StopAsyncIteration
        try:
            response = await self._call.read()
        except grpc.RpcError as e:
            raise _types.from_rpc_error(e) from None
        if response is grpc.aio.EOF:
            code = await self._call.code()
            if code != grpc.StatusCode.OK:
                raise ReachError(code, await self._call.details() or "")
            raise StopAsyncIteration
        self._received += 1
        self._room.release()
        return _types.solution(response)

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await self._call.done_writing()

    def cancel(self) -> None:
        self._closed = True
        self._call.cancel()

    async def __aenter__(self) -> "Stream":
        return self

    async def __aexit__(self, exc_type, *exc) -> None:
        if exc_type is not None:
            self.cancel()
            return
        await self.close()
        async for _ in self:
            pass
        code = await self._call.code()
        if code != grpc.StatusCode.OK:
            raise ReachError(code, await self._call.details() or "")
