"""The blocking client (grpc's synchronous API)."""
from __future__ import annotations

from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import grpc

from reach import _core, _retarget, _types
from reach._core import TLS, Core, channel_setup  # noqa: F401 (TLS, channel_setup: public here)
from reach._stream import SyncStream, WarmSolve
from reach._types import GoalLike, ReachError, Registered, SkeletonLike, Solution


class Client(Core):
    """A client of a reach-server.

    Client(address=None, token=None, tls=None, timeout=10.0,
           resume_streams=False, resume_within=5.0)

    address: "host:port" (default: $REACH_ADDRESS, else 127.0.0.1:50051);
    several IP addresses comma-separated ("10.0.0.1:50051,10.0.0.2:50051")
    or "dns:///name:port": calls go round-robin over them.
    token: sent as `authorization: Bearer TOKEN` with every call (default:
    $REACH_TOKEN). tls: None/False for plaintext, True for TLS with the
    system's roots, or a TLS(ca=..., cert=..., key=..., server_name=...).
    timeout: the deadline of each unary call, seconds. resume_streams: a
    stream whose replica goes away (UNAVAILABLE: killed, drained, scaled
    down) is reopened (on another replica) within resume_within seconds and
    its unanswered frames sent again; a SolveStream goes on warm from the
    last answered pose, a RetargetStream's planting starts afresh. Every
    failure raises
    ReachError (its code, message and the field the message names). Use as a
    context manager, or call close().
    """

    def __init__(self, address: Optional[str] = None, token: Optional[str] = None,
                 tls: Union[None, bool, TLS] = None, timeout: float = 10.0,
                 resume_streams: bool = False, resume_within: float = 5.0):
        self._setup(grpc, address, token, tls, timeout)
        self.resume_streams = resume_streams
        self.resume_within = resume_within

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _run(self, flow):
        """Drives a flow: each RPC it yields is called, its answer (or
        ReachError) sent back in."""
        answer, error = None, None
        while True:
            try:
                name, request = flow.throw(error) if error is not None else flow.send(answer)
            except StopIteration as done:
                return done.value
            answer, error = None, None
            try:
                answer = self._unary[name](request, timeout=self.timeout, metadata=self._metadata)
            except grpc.RpcError as e:
                error = _types.from_rpc_error(e)

    # --- the registry -----------------------------------------------------

    def register(self, skeleton: SkeletonLike) -> Registered:
        """Registers a skeleton: a path to a skeleton JSON file, a dict in
        its protobuf JSON form, or a reach.v1.Skeleton. Idempotent: the id is
        the content's hash."""
        return self._run(self._register(skeleton))

    def import_file(self, path, format: Optional[str] = None, name: Optional[str] = None,
                    chains: Optional[Mapping[str, Tuple[str, str]]] = None,
                    return_motion: bool = False) -> "_types.Imported":
        """The server imports a skeleton file (BVH, URDF, glTF/GLB with
        embedded buffers, skeleton JSON; format from the extension unless
        given) and registers it. chains: {name: (root, tip)} to add or
        replace. return_motion: a BVH clip's frames come back as poses."""
        return self._run(self._import(path, format, name, chains, return_motion))

    def get(self, skeleton_id: str) -> dict:
        """{"skeleton_id", "version", "skeleton": the skeleton as a dict}."""
        return self._run(self._get(skeleton_id))

    def joint_names(self, skeleton_id: str) -> List[str]:
        """The skeleton's joint names, in its order (fetched once)."""
        return list(self._run(self._info(skeleton_id)).names)

    def list(self, page_size: int = 0) -> List[dict]:
        """Every registered skeleton (all pages): dicts with skeleton_id,
        version, name, joint_count, chains."""
        return self._run(self._list(page_size))

    def delete(self, skeleton_id: str) -> None:
        self._run(self._delete(skeleton_id))

    def health(self, service: str = "") -> str:
        """The serving status of the server ("") or of reach.v1.IkService:
        "SERVING", "NOT_SERVING", ..."""
        return self._run(self._health(service))

    # --- solving ----------------------------------------------------------

    def solve(self, skeleton_id: str, goals: Union[GoalLike, Iterable[GoalLike], "_core.Goals"],
              start_pose: Any = None, return_globals: bool = False,
              full_body: Optional[Mapping[str, Any]] = None, root_translation: Any = None) -> Solution:
        """One solve. goals: dicts like {"chain": "l_leg", "target": (x, y, z),
        "pole": (x, y, z), "solver": "fabrik"} (see goal_message),
        reach.v1.Goal messages, or reach.Goals (targets (G, 3)). start_pose:
        local rotations (n, 4), a dict or a reach.v1.Pose; default the rest
        pose."""
        return self._run(self._solve(skeleton_id, goals, start_pose, return_globals, full_body,
                                     root_translation))

    def solve_batch(self, items: Union[Sequence[Any], "_core.Goals"], skeleton_id: str = "",
                    start_poses: Any = None, root_translations: Any = None):
        """Many independent solves in one call (e.g. a crowd).

        items as reach.Goals (targets (n, G, 3)): packed as arrays, answered
        as a reach.BatchSolution of arrays (poses (n, joints, 4), reached
        (n, G), ...); start_poses (n, joints, 4) or (joints, 4), default the
        rest pose. Else a list: each item a list of goals, or a dict
        {"goals": [...], "start_pose": ..., "skeleton_id": ...}, answered
        as a list of Solution; `skeleton_id` applies to items without one."""
        return self._run(self._solve_batch(items, skeleton_id, start_poses, root_translations))

    def stream(self, skeleton_id: str = "", window: int = 8,
               timeout: Optional[float] = None) -> "Stream":
        """A SolveStream. send() waits only while `window` frames are
        unanswered; a background reader takes the answers as they come, so
        sending and reading may go in any order or in different threads.
        Iterating yields the answers in order (see Stream). timeout: the
        whole stream's deadline in seconds (None: none)."""
        info = self._run(self._maybe_info(skeleton_id)) if skeleton_id else None
        return Stream(self, skeleton_id, window, timeout, info)

    # --- retargeting ------------------------------------------------------

    def create_profile(self, source: Any, target: Any, *, source_reference: Any = None,
                       target_reference: Any = None, source_overrides: Optional[Mapping[str, str]] = None,
                       target_overrides: Optional[Mapping[str, str]] = None, no_ik: Sequence[str] = (),
                       **options: Any) -> "_retarget.RetargetProfile":
        """A retarget profile from `source` onto `target`, each a skeleton
        id, a skeleton file (.bvh, .gltf, .glb, .json, .urdf: imported by
        the server), a skeleton dict or a reach.v1.Skeleton (registered).

        source_reference / target_reference: the retarget pose, (J, 4)
        local rotations, or a frame number of a BVH file given as that side
        (for rigs whose rest is no stance). source_overrides /
        target_overrides: {role: joint}. no_ik: limbs left to the
        transferred pose ("left_arm", "right_arm", "left_leg", "right_leg").
        options: keep_target_pose, pelvis_scale, no_planting, source_floor,
        contact_height, contact_speed, ankle_height, release_seconds,
        max_iterations (retarget.proto's RetargetProfileSpec). Idempotent:
        the same spec gives the same profile (created False)."""
        options.update(source_overrides=source_overrides, target_overrides=target_overrides, no_ik=no_ik)
        return self._run(self._create_profile(source, target, source_reference, target_reference, options))

    def get_profile(self, profile_id: str) -> "_retarget.RetargetProfile":
        return self._run(self._get_profile(profile_id))

    def list_profiles(self, page_size: int = 0) -> List[dict]:
        """Every retarget profile (all pages), in creation order: dicts with
        profile_id, version, source/target skeleton ids and names."""
        return self._run(self._list_profiles(page_size))

    def delete_profile(self, profile: Any) -> None:
        self._run(self._delete_profile(_retarget.profile_id_of(profile)))

    def retarget(self, profile: Any, rotations: Any, root_translation: Any = None,
                 return_globals: bool = False) -> "_retarget.RetargetedFrame":
        """One source pose ((J, 4) local rotations in the source's joint
        order, and the root's translation) onto the target, on its own."""
        return self._run(self._retarget(profile, rotations, root_translation, return_globals))

    def retarget_batch(self, profile: Any, motion: Any, root_translations: Any = None,
                       frame_time_s: Optional[float] = None, report: bool = False,
                       return_globals: bool = False, batch_frames: int = 4000
                       ) -> "_retarget.RetargetedMotion":
        """A clip, (F, J, 4) local rotations of the source and (F, 3) root
        translations, retargeted in order with one state (feet planted
        across frames). frame_time_s: seconds per frame (default 1/30).
        report: also the quality figures. Long clips go in calls of at most
        batch_frames frames and 8 MiB (each starts a new state)."""
        return self._run(self._retarget_batch(profile, motion, root_translations, frame_time_s, report,
                                              return_globals, batch_frames))

    def retarget_stream(self, profile: Any, window: int = 8, frame_time_s: Optional[float] = None,
                        timeout: Optional[float] = None) -> "RetargetStream":
        """Live retargeting over RetargetStream: send(rotations,
        root_translation) per frame, answers (RetargetedFrame) in order by
        iterating; the same back-pressure and reader as stream()."""
        profile_id = _retarget.profile_id_of(profile)
        source, target = self._run(self._sides(profile_id))
        return RetargetStream(self, profile_id, window, timeout, source, target,
                              _retarget._frame_time(frame_time_s))


def _open(client: Client, name: str):
    def open_call(requests, timeout):
        return client._streams[name](requests, metadata=client._metadata, timeout=timeout)
    return open_call


class Stream(WarmSolve, SyncStream):
    """A SolveStream with back-pressure; answers come back in order.

    send(goals, start_pose=None, latest_wins=False, ...) takes goals as
    Client.solve does (dicts, reach.v1.Goal, reach.Goals) or a whole
    reach.v1.SolveRequest, waits while `window` frames are unanswered and
    returns the frame's sequence number. A reader thread takes the answers
    as they arrive, so send() never waits for the caller to read.

    Iterating yields one Solution per frame (a frame the server refused has
    `error` set and the stream goes on). It ends once the stream is closed
    (close(), or leaving the `with` block, which waits for every answer)
    and every answer is out; on a thread that has sent frames it also ends
    when every frame sent so far is answered. So: send everything, then
    iterate; or iterate in another thread (it runs until close()); or
    interleave.
    """

    def __init__(self, client: Client, skeleton_id: str, window: int, timeout: Optional[float], info):
        self._skeleton_id = skeleton_id
        self._info = info
        self._client = client
        self._warm_init()  # Resume: the last answered pose (WarmSolve).
        super().__init__(_open(client, "SolveStream"), window, timeout, client.resume_streams,
                         client.resume_within)

    def _reseed(self, request: Any) -> Any:
        message = self._to_seed(request)
        if message is None:
            return request
        rest = None
        if self._needs_rest():
            rest = self._client._run(self._client._info(self._warm_skeleton)).rest_rotations
        return self._seeded(message, rest)

    def send(self, goals: Any, start_pose: Any = None, latest_wins: bool = False, **kwargs) -> int:
        return self._send(_core.solve_frame(self._skeleton_id, goals, start_pose, latest_wins, kwargs))

    def _decode(self, response) -> Solution:
        solution = _types.solution(response)
        if self._info is not None:
            solution.joint_names = self._info.names
        return solution


class RetargetStream(SyncStream):
    """A RetargetStream (one state: feet stay planted from frame to frame).

    send(rotations, root_translation=None, frame_time_s=None,
    latest_wins=False) sends one source pose ((J, 4), source joint order);
    iterating yields RetargetedFrame answers in order, as Stream does."""

    def __init__(self, client: Client, profile_id: str, window: int, timeout: Optional[float],
                 source, target, frame_time_s: float):
        self._profile_id = profile_id
        self._source, self._target = source, target
        self._frame_time = frame_time_s
        super().__init__(_open(client, "RetargetStream"), window, timeout, client.resume_streams,
                         client.resume_within)

    def send(self, rotations: Any, root_translation: Any = None, frame_time_s: Optional[float] = None,
             latest_wins: bool = False) -> int:
        rot, root = _retarget.motion_arrays(rotations, root_translation, len(self._source), False,
                                            "rotations")
        frame_time = self._frame_time if frame_time_s is None else _retarget._frame_time(frame_time_s)
        return self._send(_retarget.retarget_bytes(self._profile_id, rot, root, frame_time, latest_wins))

    def _decode(self, response: bytes) -> "_retarget.RetargetedFrame":
        return _retarget.frame(response, self._target)
