"""The synchronous client (grpc's blocking API)."""
from __future__ import annotations

import os
import queue
import threading
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import grpc
from google.protobuf import json_format

from reach import _types
from reach._health import health_pb2, health_pb2_grpc
from reach._types import GoalLike, ReachError, Registered, SkeletonLike, Solution
from reach.v1 import ik_service_pb2 as pb
from reach.v1 import ik_service_pb2_grpc
from reach.v1 import solve_pb2

_MAX_MESSAGE = 64 << 20


@dataclass
class TLS:
    """TLS settings: `ca` (PEM file of the CA that signed the server; the
    system's roots when None), `cert` and `key` (PEM files of a client
    certificate, for mTLS), `server_name` (the name the server's certificate
    holds, when it is not the host of the address)."""

    ca: Optional[str] = None
    cert: Optional[str] = None
    key: Optional[str] = None
    server_name: Optional[str] = None


def _read(path: Optional[str], what: str) -> Optional[bytes]:
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ReachError(grpc.StatusCode.NOT_FOUND, f"tls.{what}: cannot read {path!r}: {e.strerror}") from None
    if b"-----BEGIN " not in data:
        raise ReachError(grpc.StatusCode.INVALID_ARGUMENT, f"tls.{what}: {path!r} is not PEM")
    return data


def channel_setup(address: str, token: Optional[str], tls: Union[None, bool, TLS]
                  ) -> Tuple[Optional[grpc.ChannelCredentials], List[Tuple[str, Any]], Tuple]:
    """Credentials (None: plaintext), channel options and call metadata."""
    if not address:
        raise ReachError(grpc.StatusCode.INVALID_ARGUMENT, "address: empty")
    if token is None:
        token = os.environ.get("REACH_TOKEN") or None
    metadata: Tuple = ()
    if token is not None:
        if not token or any(ord(c) <= 0x20 or ord(c) >= 0x7F for c in token) or len(token) > 4096:
            raise ReachError(grpc.StatusCode.INVALID_ARGUMENT,
                             "token: expected 1 to 4096 visible ASCII characters, no spaces")
        metadata = (("authorization", f"Bearer {token}"),)
    options: List[Tuple[str, Any]] = [("grpc.max_receive_message_length", _MAX_MESSAGE),
                                      ("grpc.max_send_message_length", _MAX_MESSAGE)]
    if tls is None or tls is False:
        return None, options, metadata
    if tls is True:
        tls = TLS()
    if (tls.cert is None) != (tls.key is None):
        raise ReachError(grpc.StatusCode.INVALID_ARGUMENT,
                         "tls.cert and tls.key go together: give both for a client certificate, or neither")
    credentials = grpc.ssl_channel_credentials(
        root_certificates=_read(tls.ca, "ca"), private_key=_read(tls.key, "key"),
        certificate_chain=_read(tls.cert, "cert"))
    if tls.server_name:
        options.append(("grpc.ssl_target_name_override", tls.server_name))
    return credentials, options, metadata


class Client:
    """A client of a reach-server.

    Client("127.0.0.1:50051", token=None, tls=None, timeout=10.0)

    token: sent as `authorization: Bearer TOKEN` with every call (default:
    $REACH_TOKEN). tls: None/False for plaintext, True for TLS with the
    system's roots, or a TLS(ca=..., cert=..., key=..., server_name=...).
    timeout: the deadline of each unary call, seconds. Every failure raises
    ReachError (its code, message and the field the message names). Use as a
    context manager, or call close().
    """

    def __init__(self, address: str = "127.0.0.1:50051", token: Optional[str] = None,
                 tls: Union[None, bool, TLS] = None, timeout: float = 10.0):
        credentials, options, self._metadata = channel_setup(address, token, tls)
        self._channel = (grpc.secure_channel(address, credentials, options) if credentials
                         else grpc.insecure_channel(address, options))
        self._stub = ik_service_pb2_grpc.IkServiceStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)
        self.timeout = timeout

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, method, request):
        try:
            return method(request, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise _types.from_rpc_error(e) from None

    # --- the registry -----------------------------------------------------

    def register(self, skeleton: SkeletonLike) -> Registered:
        """Registers a skeleton: a path to a skeleton JSON file, a dict in
        its protobuf JSON form, or a reach.v1.Skeleton. Idempotent: the id is
        the content's hash."""
        request = pb.RegisterSkeletonRequest(skeleton=_types.skeleton_message(skeleton))
        r = self._call(self._stub.RegisterSkeleton, request)
        return Registered(r.skeleton_id, r.version, r.created)

    def import_file(self, path, format: Optional[str] = None, name: Optional[str] = None,
                    chains: Optional[Mapping[str, Tuple[str, str]]] = None,
                    return_motion: bool = False) -> "_types.Imported":
        """The server imports a skeleton file (BVH, URDF, glTF/GLB with
        embedded buffers, skeleton JSON; format from the extension unless
        given) and registers it. chains: {name: (root, tip)} to add or
        replace. return_motion: a BVH clip's frames come back as poses."""
        request = _types.import_request(path, format, name, chains, return_motion)
        return _types.imported(self._call(self._stub.ImportSkeleton, request))

    def get(self, skeleton_id: str) -> dict:
        """{"skeleton_id", "version", "skeleton": the skeleton as a dict}."""
        r = self._call(self._stub.GetSkeleton, pb.GetSkeletonRequest(skeleton_id=skeleton_id))
        return {"skeleton_id": r.skeleton_id, "version": r.version,
                "skeleton": json_format.MessageToDict(r.skeleton, preserving_proto_field_name=True)}

    def list(self, page_size: int = 0) -> List[dict]:
        """Every registered skeleton (all pages): dicts with skeleton_id,
        version, name, joint_count, chains."""
        out: List[dict] = []
        token = ""
        while True:
            r = self._call(self._stub.ListSkeletons,
                           pb.ListSkeletonsRequest(page_size=page_size, page_token=token))
            out.extend(_types.summary(s) for s in r.skeletons)
            token = r.next_page_token
            if not token:
                return out

    def delete(self, skeleton_id: str) -> None:
        self._call(self._stub.DeleteSkeleton, pb.DeleteSkeletonRequest(skeleton_id=skeleton_id))

    # --- solving ----------------------------------------------------------

    def solve(self, skeleton_id: str, goals: Union[GoalLike, Iterable[GoalLike]],
              start_pose: Any = None, return_globals: bool = False,
              full_body: Optional[Mapping[str, Any]] = None) -> Solution:
        """One solve. goals: dicts like {"chain": "l_leg", "target": (x, y, z),
        "pole": (x, y, z), "solver": "fabrik"} (see goal_message) or
        reach.v1.Goal messages. start_pose: local rotations (n, 4), a dict
        or a reach.v1.Pose; default the rest pose."""
        request = _types.solve_request(skeleton_id, goals, start_pose, return_globals, full_body)
        return _types.solution(self._call(self._stub.Solve, request))

    def solve_batch(self, items: Sequence[Any], skeleton_id: str = "") -> List[Solution]:
        """Many independent solves in one call (e.g. a crowd). Each item is a
        list of goals, or a dict {"goals": [...], "start_pose": ...,
        "skeleton_id": ...}; `skeleton_id` applies to items without one."""
        request = _types.batch_request(items, skeleton_id)
        r = self._call(self._stub.SolveBatch, request)
        return [_types.solution(item) for item in r.items]

    def stream(self, skeleton_id: str = "", window: int = 8,
               timeout: Optional[float] = None) -> "Stream":
        """A SolveStream: `with client.stream(id) as s: s.send(goals); for
        answer in s: ...`. At most `window` frames are unanswered: send()
        blocks until an answer frees a place (back-pressure). timeout: the
        whole stream's deadline in seconds (None: none)."""
        return Stream(self._stub, self._metadata, skeleton_id, window, timeout)

    def health(self, service: str = "") -> str:
        """The serving status of the server ("") or of reach.v1.IkService:
        "SERVING", "NOT_SERVING", ..."""
        r = self._call(self._health.Check, health_pb2.HealthCheckRequest(service=service))
        return health_pb2.HealthCheckResponse.ServingStatus.Name(r.status)


_END = object()


class Stream:
    """A SolveStream with back-pressure; answers come back in order.

    send() takes goals (as Client.solve) or a whole reach.v1.SolveRequest and
    returns the frame's sequence number; iterating yields one Solution per
    frame sent (a frame the server refused has `error` set and the stream
    goes on). close() (or leaving the `with` block) half-closes and waits
    for the remaining answers, which iteration still yields.
    """

    def __init__(self, stub, metadata, skeleton_id: str, window: int, timeout: Optional[float]):
        if window < 1:
            raise ReachError(grpc.StatusCode.INVALID_ARGUMENT, f"window: expected >= 1, got {window}")
        self._skeleton_id = skeleton_id
        self._requests: "queue.Queue[Any]" = queue.Queue()
        self._room = threading.Semaphore(window)
        self._sent = 0
        self._received = 0
        self._closed = False
        self._lock = threading.Lock()
        self._call = stub.SolveStream(self._request_iterator(), metadata=metadata, timeout=timeout)

    def _request_iterator(self) -> Iterator[solve_pb2.SolveRequest]:
        while True:
            item = self._requests.get()
            if item is _END:
                return
            yield item

    def send(self, goals: Union[GoalLike, Iterable[GoalLike], solve_pb2.SolveRequest],
             start_pose: Any = None, latest_wins: bool = False, **kwargs) -> int:
        if self._closed:
            raise ReachError(grpc.StatusCode.FAILED_PRECONDITION, "stream: send after close")
        request = _types.frame_request(self._skeleton_id, goals, start_pose, latest_wins, kwargs)
        with self._lock:
            self._sent += 1
            if not request.sequence:
                request.sequence = self._sent
        self._room.acquire()
        if self._call.done() and self._call.code() != grpc.StatusCode.OK:
            self._room.release()
            raise ReachError(self._call.code(), self._call.details() or "")
        self._requests.put(request)
        return request.sequence

    def in_flight(self) -> int:
        with self._lock:
            return self._sent - self._received

    def __iter__(self) -> Iterator[Solution]:
        return self

    def __next__(self) -> Solution:
        with self._lock:
            if self._received >= self._sent and not self._closed:
                raise StopIteration  # Nothing outstanding: do not block.
        try:
            response = next(self._call)
        except grpc.RpcError as e:
            raise _types.from_rpc_error(e) from None
        with self._lock:
            self._received += 1
        self._room.release()
        return _types.solution(response)

    def close(self) -> None:
        """Half-closes the stream (no more frames); answers still arrive."""
        if not self._closed:
            self._closed = True
            self._requests.put(_END)

    def cancel(self) -> None:
        self._closed = True
        self._call.cancel()

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is not None:
            self.cancel()
            return
        self.close()
        # Drain what is left so the call ends cleanly; surface its status.
        for _ in self:
            pass
        code = self._call.code()
        if code != grpc.StatusCode.OK:
            raise ReachError(code, self._call.details() or "")
