"""What the blocking and the asyncio clients share: the channel, the RPCs
(requests may be messages or bytes the array path packed), and every
method written once as a generator of RPCs that each client drives (the
blocking one calls them, the asyncio one awaits them)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, Generator, List, Mapping, Optional, Sequence, Tuple, Union

import grpc
from google.protobuf import json_format

from reach import _arrays, _retarget, _types
from reach._arrays import Goals, SkeletonInfo
from reach._health import health_pb2
from reach._types import ReachError, Registered, Solution, _invalid
from reach.v1 import ik_service_pb2 as pb
from reach.v1 import retarget_pb2 as rpb
from reach.v1 import solve_pb2

_MAX_MESSAGE = 64 << 20
DEFAULT_ADDRESS = "127.0.0.1:50051"


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


def _ip_host_port(part: str, ipv6: bool) -> bool:
    host, colon, port = part.rpartition(":")
    if not colon or not host or not port.isdigit() or len(port) > 5 or not 1 <= int(port) <= 65535:
        return False
    if ipv6:
        return (len(host) >= 3 and host[0] == "[" and host[-1] == "]"
                and all(c in "0123456789abcdefABCDEF:." for c in host[1:-1]))
    octets = host.split(".")
    return len(octets) == 4 and all(o.isdigit() and len(o) <= 3 and int(o) <= 255 for o in octets)


def channel_target(address: str) -> Tuple[str, bool, Optional[str]]:
    """(gRPC target, round-robin?, authority or None) for an address as the
    C++ client reads it: "host:port"; several IP addresses, comma-separated
    ("10.0.0.1:50051,10.0.0.2:50051"), called in turn; or a target with a
    scheme ("dns:///name:port": every address of the name, in turn)."""
    if not address:
        raise ReachError(grpc.StatusCode.INVALID_ARGUMENT, "address: empty")
    if address.startswith("dns:"):
        return address, True, None
    if address.startswith(("ipv4:", "ipv6:")) or ":/" in address:
        return address, "," in address, None
    if "," not in address:
        return address, False, None
    parts = address.split(",")
    ipv6 = parts[0].startswith("[")
    for i, part in enumerate(parts):
        if not _ip_host_port(part, ipv6):
            raise ReachError(grpc.StatusCode.INVALID_ARGUMENT,
                             f"address: part {i + 1} {part!r} of {address!r} is not "
                             f"{'[IPv6]:port' if ipv6 else 'IPv4:port'} (several addresses are IP "
                             "addresses of one family, comma-separated; for a name use dns:///name:port)")
    # gRPC's authority for an ipv4: target is the whole list; the first
    # address is what a TLS certificate can name (server_name overrides).
    return ("ipv6:" if ipv6 else "ipv4:") + address, True, parts[0]


def channel_setup(address: Optional[str], token: Optional[str], tls: Union[None, bool, TLS]
                  ) -> Tuple[str, Optional[grpc.ChannelCredentials], List[Tuple[str, Any]], Tuple]:
    """The gRPC target (see channel_target), credentials (None: plaintext),
    channel options and call metadata."""
    if address is None:
        address = os.environ.get("REACH_ADDRESS") or DEFAULT_ADDRESS
    target, round_robin, authority = channel_target(address)
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
    if round_robin:
        options.append(("grpc.lb_policy_name", "round_robin"))
    if authority:
        options.append(("grpc.default_authority", authority))
    if tls is None or tls is False:
        return target, None, options, metadata
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
    return target, credentials, options, metadata


def _serialize(request: Any) -> bytes:
    return request if isinstance(request, bytes) else request.SerializeToString()


_IK = "/reach.v1.IkService/"
_RT = "/reach.v1.RetargetService/"
# name -> (path, response class; None: the bytes, for the array path)
UNARY = {
    "RegisterSkeleton": (_IK + "RegisterSkeleton", pb.RegisterSkeletonResponse),
    "GetSkeleton": (_IK + "GetSkeleton", pb.GetSkeletonResponse),
    "ListSkeletons": (_IK + "ListSkeletons", pb.ListSkeletonsResponse),
    "DeleteSkeleton": (_IK + "DeleteSkeleton", pb.DeleteSkeletonResponse),
    "ImportSkeleton": (_IK + "ImportSkeleton", pb.ImportSkeletonResponse),
    "Solve": (_IK + "Solve", solve_pb2.SolveResponse),
    "SolveBatch": (_IK + "SolveBatch", None),
    "CreateRetargetProfile": (_RT + "CreateRetargetProfile", rpb.CreateRetargetProfileResponse),
    "GetRetargetProfile": (_RT + "GetRetargetProfile", rpb.GetRetargetProfileResponse),
    "ListRetargetProfiles": (_RT + "ListRetargetProfiles", rpb.ListRetargetProfilesResponse),
    "DeleteRetargetProfile": (_RT + "DeleteRetargetProfile", rpb.DeleteRetargetProfileResponse),
    "Retarget": (_RT + "Retarget", None),
    "RetargetBatch": (_RT + "RetargetBatch", None),
    "Check": ("/grpc.health.v1.Health/Check", health_pb2.HealthCheckResponse),
}
STREAMS = {
    "SolveStream": (_IK + "SolveStream", solve_pb2.SolveResponse),
    "RetargetStream": (_RT + "RetargetStream", None),
}

Flow = Generator[Tuple[str, Any], Any, Any]


class Core:
    """The channel and the methods as flows; `_run(flow)` is the client's."""

    def _setup(self, grpc_module, address, token, tls, timeout) -> None:
        if address is None:
            address = os.environ.get("REACH_ADDRESS") or DEFAULT_ADDRESS
        target, credentials, options, self._metadata = channel_setup(address, token, tls)
        self.address = address
        self._channel = (grpc_module.secure_channel(target, credentials, options) if credentials
                         else grpc_module.insecure_channel(target, options))
        self._unary = {name: self._channel.unary_unary(path, request_serializer=_serialize,
                                                       response_deserializer=cls and cls.FromString)
                       for name, (path, cls) in UNARY.items()}
        self._streams = {name: self._channel.stream_stream(path, request_serializer=_serialize,
                                                           response_deserializer=cls and cls.FromString)
                         for name, (path, cls) in STREAMS.items()}
        self.timeout = timeout
        self._infos: Dict[str, SkeletonInfo] = {}
        self._profile_sides: Dict[str, Tuple[SkeletonInfo, SkeletonInfo]] = {}

    # --- the registry -----------------------------------------------------

    def _info(self, skeleton_id: str) -> Flow:
        """The skeleton's joints (GetSkeleton once per id: ids are content
        hashes)."""
        info = self._infos.get(skeleton_id)
        if info is None:
            r = yield "GetSkeleton", pb.GetSkeletonRequest(skeleton_id=skeleton_id)
            info = SkeletonInfo(r.skeleton)
            if len(self._infos) > 1024:
                self._infos.clear()
            self._infos[skeleton_id] = info
        return info

    def _maybe_info(self, skeleton_id: str) -> Flow:
        if not skeleton_id:
            return None
        try:
            return (yield from self._info(skeleton_id))
        except ReachError:
            return None

    def _register(self, skeleton) -> Flow:
        r = yield "RegisterSkeleton", pb.RegisterSkeletonRequest(skeleton=_types.skeleton_message(skeleton))
        return Registered(r.skeleton_id, r.version, r.created)

    def _import(self, path, format, name, chains, return_motion) -> Flow:
        request = _types.import_request(path, format, name, chains, return_motion)
        r = yield "ImportSkeleton", request
        self._infos.setdefault(r.skeleton_id, SkeletonInfo(r.skeleton))
        return _types.imported(r)

    def _get(self, skeleton_id: str) -> Flow:
        r = yield "GetSkeleton", pb.GetSkeletonRequest(skeleton_id=skeleton_id)
        return {"skeleton_id": r.skeleton_id, "version": r.version,
                "skeleton": json_format.MessageToDict(r.skeleton, preserving_proto_field_name=True)}

    def _list(self, page_size: int) -> Flow:
        out: List[dict] = []
        token = ""
        while True:
            r = yield "ListSkeletons", pb.ListSkeletonsRequest(page_size=page_size, page_token=token)
            out.extend(_types.summary(s) for s in r.skeletons)
            token = r.next_page_token
            if not token:
                return out

    def _delete(self, skeleton_id: str) -> Flow:
        yield "DeleteSkeleton", pb.DeleteSkeletonRequest(skeleton_id=skeleton_id)

    def _health(self, service: str) -> Flow:
        r = yield "Check", health_pb2.HealthCheckRequest(service=service)
        return health_pb2.HealthCheckResponse.ServingStatus.Name(r.status)

    # --- solving ----------------------------------------------------------

    def _solve(self, skeleton_id, goals, start_pose, return_globals, full_body, root_translation) -> Flow:
        if isinstance(goals, Goals):
            request = _arrays.request_bytes(skeleton_id, goals, start_pose, root_translation,
                                            return_globals, full_body)
        else:
            if root_translation is not None:
                raise _invalid("root_translation: goes with goals as reach.Goals "
                               "(else put it in start_pose)")
            request = _types.solve_request(skeleton_id, goals, start_pose, return_globals, full_body)
        solution = _types.solution((yield "Solve", request))
        info = yield from self._maybe_info(skeleton_id)
        if info is not None:
            solution.joint_names = info.names
        return solution

    def _solve_batch(self, items, skeleton_id, start_poses, root_translations) -> Flow:
        if isinstance(items, Goals):
            if not skeleton_id:
                raise _invalid("skeleton_id: required with goals as reach.Goals")
            if not items.lead:
                raise _invalid(f"targets: a batch takes shape (n, {len(items.chains)}, 3), "
                               f"got {items.targets.shape}")
            info = yield from self._info(skeleton_id)
            data = _arrays.batch_bytes(skeleton_id, items, start_poses, root_translations)
            raw = yield "SolveBatch", data
            starts = None
            if start_poses is not None:
                starts = _arrays._pose_arrays(start_poses, len(info), (items.count,), "start_poses")[0]
            return _arrays.batch_solution(raw, info, len(items.chains), starts)
        if start_poses is not None or root_translations is not None:
            raise _invalid("start_poses: goes with goals as reach.Goals (else give each item's start_pose)")
        raw = yield "SolveBatch", _types.batch_request(items, skeleton_id)
        r = solve_pb2.SolveBatchResponse.FromString(raw)
        out = [_types.solution(item) for item in r.items]
        info = yield from self._maybe_info(skeleton_id)
        if info is not None:
            for solution, item in zip(out, items):
                if not (isinstance(item, Mapping) and item.get("skeleton_id")):
                    solution.joint_names = info.names
        return out

    # --- retargeting ------------------------------------------------------

    def _side(self, value, reference, what: str) -> Flow:
        """A profile side: a skeleton id, a file (imported; a BVH's frame
        may be the reference), a dict or Skeleton (registered). Returns
        (id, info, reference)."""
        if _retarget.is_skeleton_id(value):
            info = yield from self._info(value)
            return value, info, reference
        if _retarget.looks_like_file(value):
            want_frame = isinstance(reference, int) and not isinstance(reference, bool)
            try:
                r = yield "ImportSkeleton", _types.import_request(value, None, None, None, want_frame)
            except ReachError as e:
                raise ReachError(e.code, f"{what}: {e.message}") from None
            info = SkeletonInfo(r.skeleton)
            self._infos.setdefault(r.skeleton_id, info)
            if want_frame:
                if not 0 <= reference < len(r.motion):
                    raise _invalid(f"{what}_reference: frame {reference}: "
                                   + (f"the clip has {len(r.motion)} frames" if len(r.motion)
                                      else "the file has no frames (only a BVH clip has)"))
                reference = [(q.w, q.x, q.y, q.z) for q in r.motion[reference].rotations]
            return r.skeleton_id, info, reference
        if isinstance(value, (str, os.PathLike)) and not isinstance(value, str):
            raise _invalid(f"{what}: {os.fspath(value)!r} is no skeleton file (.bvh, .gltf, .glb, .json, .urdf)")
        if isinstance(value, str):
            raise _invalid(f"{what}: expected a skeleton id (64 hex digits) or a skeleton file "
                           f"(.bvh, .gltf, .glb, .json, .urdf), got {value!r}")
        registered = yield from self._register(value)
        info = yield from self._info(registered.skeleton_id)
        return registered.skeleton_id, info, reference

    def _create_profile(self, source, target, source_reference, target_reference, options) -> Flow:
        source_id, source_info, source_reference = yield from self._side(source, source_reference, "source")
        target_id, target_info, target_reference = yield from self._side(target, target_reference, "target")
        for name, ref in (("source", source_reference), ("target", target_reference)):
            if isinstance(ref, int) and not isinstance(ref, bool):
                raise _invalid(f"{name}_reference: a frame number needs a BVH file as the {name}")
        spec = _retarget.profile_spec(source_id, target_id, source_reference, target_reference, **options)
        r = yield "CreateRetargetProfile", rpb.CreateRetargetProfileRequest(spec=spec)
        self._profile_sides[r.profile.profile_id] = (source_info, target_info)
        return _retarget.profile(r.profile, r.created, source_info, target_info)

    def _sides(self, profile_id: str) -> Flow:
        sides = self._profile_sides.get(profile_id)
        if sides is None:
            r = yield "GetRetargetProfile", rpb.GetRetargetProfileRequest(profile_id=profile_id,
                                                                          include_skeletons=True)
            sides = (SkeletonInfo(r.source_skeleton), SkeletonInfo(r.target_skeleton))
            if len(self._profile_sides) > 1024:
                self._profile_sides.clear()
            self._profile_sides[profile_id] = sides
        return sides

    def _get_profile(self, profile_id: str) -> Flow:
        r = yield "GetRetargetProfile", rpb.GetRetargetProfileRequest(profile_id=profile_id,
                                                                      include_skeletons=True)
        sides = (SkeletonInfo(r.source_skeleton), SkeletonInfo(r.target_skeleton))
        self._profile_sides[profile_id] = sides
        return _retarget.profile(r.profile, False, *sides)

    def _list_profiles(self, page_size: int) -> Flow:
        out: List[dict] = []
        token = ""
        while True:
            r = yield "ListRetargetProfiles", rpb.ListRetargetProfilesRequest(page_size=page_size,
                                                                              page_token=token)
            out.extend(_retarget.summary(p) for p in r.profiles)
            token = r.next_page_token
            if not token:
                return out

    def _delete_profile(self, profile_id: str) -> Flow:
        yield "DeleteRetargetProfile", rpb.DeleteRetargetProfileRequest(profile_id=profile_id)
        self._profile_sides.pop(profile_id, None)

    def _retarget(self, profile, rotations, root_translation, return_globals) -> Flow:
        profile_id = _retarget.profile_id_of(profile)
        source, target = yield from self._sides(profile_id)
        rot, root = _retarget.motion_arrays(rotations, root_translation, len(source), False, "rotations")
        raw = yield "Retarget", _retarget.retarget_bytes(profile_id, rot, root, 0.0, False, return_globals)
        return _retarget.frame(raw, target)

    def _retarget_batch(self, profile, motion, root_translations, frame_time_s, report, return_globals,
                        batch_frames) -> Flow:
        profile_id = _retarget.profile_id_of(profile)
        frame_time = _retarget._frame_time(frame_time_s)
        if not isinstance(batch_frames, int) or batch_frames < 1:
            raise _invalid(f"batch_frames: expected an integer >= 1, got {batch_frames!r}")
        source, target = yield from self._sides(profile_id)
        rot, roots = _retarget.motion_arrays(motion, root_translations, len(source), True, "motion")
        parts = []
        for start, end in _retarget.chunks(len(rot), len(source), batch_frames):
            data = _retarget.batch_bytes(profile_id, rot[start:end], None if roots is None else roots[start:end],
                                         frame_time, report, return_globals)
            try:
                raw = yield "RetargetBatch", data
            except ReachError as e:
                raise ReachError(e.code, f"frames {start}..{end - 1}: {e.message}") from None
            part = _retarget.batch_motion(raw, target, frame_time)
            part.sequence = part.sequence + start
            parts.append(part)
        return _retarget.concatenate(parts)


def solve_frame(skeleton_id: str, goals, start_pose, latest_wins: bool, options: Mapping[str, Any]):
    """A stream frame: bytes for reach.Goals, else a SolveRequest."""
    if isinstance(goals, Goals):
        return _arrays.request_bytes(skeleton_id, goals, start_pose, options.get("root_translation"),
                                     options.get("return_globals", False), options.get("full_body"),
                                     latest_wins=latest_wins)
    return _types.frame_request(skeleton_id, goals, start_pose, latest_wins, options)
