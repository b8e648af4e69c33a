"""The NumPy path: goals as arrays (`Goals`), packed straight into the
wire format; batch answers unpacked into arrays (`BatchSolution`); joints
by name (`SkeletonInfo`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import grpc
from google.protobuf import json_format

from reach import _types
from reach._types import ReachError, _invalid
from reach.v1 import skeleton_pb2, solve_pb2

try:
    import numpy as np
    from reach import _wire
except ImportError:  # pragma: no cover - exercised where NumPy is absent
    np = None
    _wire = None


def require_numpy(what: str) -> None:
    if np is None:
        raise ReachError(grpc.StatusCode.FAILED_PRECONDITION,
                         f"{what}: needs NumPy (apt-get install python3-numpy)")


def as_array(value: Any, where: str, tail: Tuple[int, ...], lead: Optional[Tuple[int, ...]] = None
             ) -> "np.ndarray":
    """`value` as a float64 array ending in `tail` (and, when `lead` is
    given, broadcastable to lead + tail); errors name `where`."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise _invalid(f"{where}: expected numbers, got {type(value).__name__}") from None
    want = "(..., " + ", ".join(map(str, tail)) + ")"
    if array.ndim < len(tail) or array.shape[array.ndim - len(tail):] != tail:
        raise _invalid(f"{where}: expected shape {want}, got {array.shape}")
    if lead is not None:
        try:
            array = np.broadcast_to(array, lead + tail)
        except ValueError:
            raise _invalid(f"{where}: shape {array.shape} does not fit {lead + tail}") from None
    if not np.all(np.isfinite(array)):
        bad = np.argwhere(~np.isfinite(array))[0]
        raise _invalid(f"{where}: not finite at {tuple(int(i) for i in bad)}")
    return array


class SkeletonInfo:
    """A registered skeleton's joints: `names`, `parents`, rest local
    `rest_rotations` (J, 4) and `rest_translations` (J, 3), `chains`."""

    def __init__(self, skeleton: Union[Mapping[str, Any], skeleton_pb2.Skeleton]):
        if not isinstance(skeleton, skeleton_pb2.Skeleton):
            skeleton = json_format.ParseDict(dict(skeleton), skeleton_pb2.Skeleton())
        self.name = skeleton.name
        self.names: List[str] = [j.name for j in skeleton.joints]
        self.parents: List[int] = [j.parent for j in skeleton.joints]
        self.chains: Dict[str, Tuple[str, str]] = {c.name: (c.root, c.tip) for c in skeleton.chains}
        rotations, translations = [], []
        for j in skeleton.joints:
            r, t = j.rest.rotation, j.rest.translation
            rotations.append((r.w, r.x, r.y, r.z) if j.rest.HasField("rotation") else (1.0, 0.0, 0.0, 0.0))
            translations.append((t.x, t.y, t.z))
        self._index = {name: i for i, name in enumerate(self.names)}
        if np is not None:
            self.rest_rotations = np.array(rotations, dtype=float).reshape(-1, 4)
            self.rest_translations = np.array(translations, dtype=float).reshape(-1, 3)
        else:  # pragma: no cover
            self.rest_rotations, self.rest_translations = rotations, translations

    def __len__(self) -> int:
        return len(self.names)

    def index(self, joint: Union[str, int], where: str = "joint") -> int:
        if isinstance(joint, int):
            if not 0 <= joint < len(self.names):
                raise _invalid(f"{where}: joint index {joint} out of range (0..{len(self.names) - 1})")
            return joint
        try:
            return self._index[joint]
        except KeyError:
            raise ReachError(grpc.StatusCode.NOT_FOUND,
                             f"{where}: no joint named {joint!r} in {self.name or 'the skeleton'!r}") from None


# --- goals as arrays -------------------------------------------------------

class Goals:
    """Goals as arrays: one goal per chain in `chains`, for one request
    (targets (G, 3)) or N of them (targets (N, G, 3)).

        reach.Goals(["l_leg", "r_leg"], targets, poles=[(0.1, 0.5, 1), (-0.1, 0.5, 1)])

    orientations (.., G, 4) w, x, y, z; poles and aim_axes (.., G, 3);
    weights (.., G); each either per goal (broadcast to every request) or
    per request. solver: one name for all or one per goal; priorities and
    options (a dict of SolveOptions fields) likewise. Packed into the wire
    format directly: no per-item Python work.
    """

    def __init__(self, chains: Sequence[str], targets: Any, *, orientations: Any = None,
                 poles: Any = None, aim_axes: Any = None, weights: Any = None,
                 solver: Union[None, str, Sequence[str]] = None,
                 priorities: Union[None, int, Sequence[int]] = None,
                 options: Union[None, Mapping[str, Any], Sequence[Optional[Mapping[str, Any]]]] = None):
        require_numpy("Goals")
        if isinstance(chains, str):
            chains = [chains]
        self.chains = [str(c) for c in chains]
        if not self.chains:
            raise _invalid("chains: expected at least one chain name")
        g = len(self.chains)
        targets = as_array(targets, "targets", (3,))
        if targets.ndim < 2 or targets.shape[-2] != g:
            raise _invalid(f"targets: expected shape ({g}, 3) or (n, {g}, 3) for {g} chains, "
                           f"got {targets.shape}")
        if targets.ndim > 3:
            raise _invalid(f"targets: expected shape ({g}, 3) or (n, {g}, 3), got {targets.shape}")
        self.lead: Tuple[int, ...] = targets.shape[:-2]
        self.targets = targets
        lead = self.lead + (g,)
        self.orientations = None if orientations is None else as_array(orientations, "orientations", (4,), lead)
        self.poles = None if poles is None else as_array(poles, "poles", (3,), lead)
        self.aim_axes = None if aim_axes is None else as_array(aim_axes, "aim_axes", (3,), lead)
        if weights is None:
            self.weights = None
        else:
            self.weights = as_array(np.asarray(weights, float)[..., None], "weights", (1,), lead)[..., 0]
        self.solvers = self._per_goal(solver, "solver", _types.solver_value)
        self.priorities = self._per_goal(priorities, "priorities", int)
        opts = options if (options is None or isinstance(options, Mapping)) else list(options)
        if isinstance(opts, list) and len(opts) != g:
            raise _invalid(f"options: expected one per chain ({g}), got {len(opts)}")
        self.options: List[bytes] = []
        for i in range(g):
            one = opts[i] if isinstance(opts, list) else opts
            if one is None:
                self.options.append(b"")
                continue
            try:
                self.options.append(json_format.ParseDict(dict(one), solve_pb2.SolveOptions()).SerializeToString())
            except json_format.ParseError as e:
                raise _invalid(f"options: {e}") from None

    def _per_goal(self, value, where, convert) -> List[int]:
        g = len(self.chains)
        if value is None:
            return [0] * g
        if isinstance(value, (str, int)):
            return [convert(value)] * g
        values = list(value)
        if len(values) != g:
            raise _invalid(f"{where}: expected one per chain ({g}), got {len(values)}")
        return [convert(v) for v in values]

    @property
    def count(self) -> int:
        """Requests these goals make: N, or 1 for targets (G, 3)."""
        return self.lead[0] if self.lead else 1

    def _key(self):
        return (tuple(self.chains), tuple(self.solvers), tuple(self.priorities), tuple(self.options),
                self.orientations is not None, self.poles is not None, self.aim_axes is not None,
                self.weights is not None)

    def layouts(self) -> List["_wire.Layout"]:
        out = []
        for i, chain in enumerate(self.chains):
            layout = _wire.Layout().const(_wire.length_delimited(1, chain.encode()))
            if self.solvers[i]:
                layout.const(_wire.tag(4, _wire.VARINT) + _wire.varint(self.solvers[i]))
            layout.vec3(5, "t")
            if self.orientations is not None:
                layout.quat(6, "o")
            if self.poles is not None:
                layout.vec3(7, "p")
            if self.weights is not None:
                layout.double(8, "w")
            if self.options[i]:
                layout.const(_wire.length_delimited(9, self.options[i]))
            if self.aim_axes is not None:
                layout.vec3(10, "a")
            if self.priorities[i]:
                layout.const(_wire.tag(11, _wire.VARINT) + _wire.varint(self.priorities[i]))
            out.append(layout)
        return out

    def values(self, n: int) -> Dict[str, "np.ndarray"]:
        """Slot values for n requests."""
        shape = (n, len(self.chains))
        out = {}
        for name, array in (("t", self.targets), ("o", self.orientations), ("p", self.poles),
                            ("a", self.aim_axes)):
            if array is not None:
                array = np.broadcast_to(array, shape + array.shape[-1:])
                for g in range(len(self.chains)):
                    out[f"g{g}.{name}"] = array[:, g]
        if self.weights is not None:
            w = np.broadcast_to(self.weights, shape)
            for g in range(len(self.chains)):
                out[f"g{g}.w"] = w[:, g]
        return out


def _pose_arrays(pose: Any, joints: Optional[int], lead: Tuple[int, ...], where: str):
    """A start pose as (rotations (lead.., J, 4), root translation or None)."""
    root = None
    if isinstance(pose, solve_pb2.Pose) or isinstance(pose, Mapping):
        message = _types.pose_message(pose, where)
        rotations = [(q.w, q.x, q.y, q.z) for q in message.rotations]
        if message.HasField("root_translation"):
            t = message.root_translation
            root = np.array([t.x, t.y, t.z])
        pose = rotations
    rotations = as_array(pose, f"{where}.rotations", (4,))
    if joints is not None and rotations.shape[-2] != joints:
        raise _invalid(f"{where}.rotations: has {rotations.shape[-2]} rotations; the skeleton has "
                       f"{joints} joints")
    try:
        rotations = np.broadcast_to(rotations, lead + rotations.shape[-2:])
    except ValueError:
        raise _invalid(f"{where}: shape {rotations.shape} does not fit {lead} requests") from None
    return rotations, root


_LAYOUTS: Dict[Any, Any] = {}


def _request_layout(goals: Goals, joints: int, with_root: bool, return_globals: bool,
                    full_body: bytes) -> "_wire.Layout":
    key = (goals._key(), joints, with_root, return_globals, full_body)
    layout = _LAYOUTS.get(key)
    if layout is None:
        layout = _wire.Layout()
        if joints:
            pose = _wire.Layout().quats(1, joints, "r")
            if with_root:
                pose.vec3(2, "root")
            layout.sub(3, pose, "pose.")
        for g, goal in enumerate(goals.layouts()):
            layout.sub(4, goal, f"g{g}.")
        if return_globals:
            layout.const(_wire.tag(5, _wire.VARINT) + b"\x01")
        if full_body:
            layout.const(_wire.length_delimited(7, full_body))
        if len(_LAYOUTS) > 256:
            _LAYOUTS.clear()
        _LAYOUTS[key] = layout
    return layout


def _full_body_bytes(full_body: Optional[Mapping[str, Any]]) -> bytes:
    if not full_body:
        return b""
    message = solve_pb2.FullBodyOptions()
    try:
        json_format.ParseDict(dict(full_body), message)
    except json_format.ParseError as e:
        raise _invalid(f"full_body: {e}") from None
    return message.SerializeToString()


def _pack_items(goals: Goals, n: int, start_pose: Any, root_translation: Any,
                return_globals: bool, full_body: Optional[Mapping[str, Any]], where: str
                ) -> "np.ndarray":
    values = goals.values(n)
    joints = 0
    root = None
    if start_pose is not None:
        rotations, root = _pose_arrays(start_pose, None, (n,), where)
        joints = rotations.shape[-2]
        values["pose.r"] = rotations
    if root_translation is not None:
        root = root_translation
    if root is not None:
        if start_pose is None:
            raise _invalid(f"{where}.root_translation: needs the start pose's rotations too")
        values["pose.root"] = as_array(root, f"{where}.root_translation", (3,), (n,))
    layout = _request_layout(goals, joints, root is not None, return_globals, _full_body_bytes(full_body))
    return layout.pack(n, values)


def request_bytes(skeleton_id: str, goals: Goals, start_pose: Any = None, root_translation: Any = None,
                  return_globals: bool = False, full_body: Optional[Mapping[str, Any]] = None,
                  sequence: int = 0, latest_wins: bool = False) -> bytes:
    """One SolveRequest, serialized, from goals (targets (G, 3))."""
    if goals.lead:
        raise _invalid(f"targets: one request takes shape ({len(goals.chains)}, 3), got {goals.targets.shape}"
                       " (a batch: solve_batch)")
    raw = _pack_items(goals, 1, start_pose, root_translation, return_globals, full_body, "start_pose")
    head = b""
    if skeleton_id:
        head += _wire.length_delimited(1, skeleton_id.encode())
    if sequence:
        head += _wire.tag(2, _wire.VARINT) + _wire.varint(sequence)
    if latest_wins:
        head += _wire.tag(6, _wire.VARINT) + b"\x01"
    return head + raw.tobytes()


def batch_bytes(skeleton_id: str, goals: Goals, start_poses: Any = None, root_translations: Any = None,
                return_globals: bool = False, full_body: Optional[Mapping[str, Any]] = None) -> bytes:
    """A SolveBatchRequest, serialized: one item per row of goals."""
    n = goals.count
    raw = _pack_items(goals, n, start_poses, root_translations, return_globals, full_body, "start_poses")
    tail = _wire.length_delimited(2, skeleton_id.encode()) if skeleton_id else b""
    return _wire.frame_records(raw, 1) + tail


# --- batch answers as arrays -----------------------------------------------

_SOLVER_NAMES = None


def solver_names() -> "np.ndarray":
    global _SOLVER_NAMES
    if _SOLVER_NAMES is None:
        top = max(solve_pb2.Solver.values())
        names = ["unknown"] * (top + 1)
        for name, value in solve_pb2.Solver.items():
            names[value] = name[7:].lower()
        _SOLVER_NAMES = np.array(names)
    return _SOLVER_NAMES


@dataclass
class BatchSolution:
    """A batch's answers as arrays, N requests of G goals on a skeleton of
    J joints:

    poses (N, J, 4): every joint's local rotation (w, x, y, z) after the
    solve (the start pose where the solve left it); translations (N, J, 3)
    likewise; rotated (N, J): which joints the solve turned; hinge_angles_rad
    (N, J): the moved hinges' angles (NaN elsewhere); reached,
    position_error, orientation_error_rad, iterations, solver (N, G), goal
    by goal as given; errors {item: ReachError} for items the server
    refused (their rows hold the start pose, reached False, NaN errors);
    joint_names (J) and joint(name) -> index.
    """

    joint_names: List[str]
    poses: Any
    translations: Any
    rotated: Any
    hinge_angles_rad: Any
    reached: Any
    position_error: Any
    orientation_error_rad: Any
    iterations: Any
    solver: Any
    errors: Dict[int, ReachError]

    def __len__(self) -> int:
        return len(self.poses)

    def joint(self, name: str) -> int:
        """The index of joint `name` in poses' second axis."""
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise ReachError(grpc.StatusCode.NOT_FOUND, f"joint: no joint named {name!r}") from None


def _status(code: int) -> grpc.StatusCode:
    for c in grpc.StatusCode:
        if c.value[0] == code:
            return c
    return grpc.StatusCode.UNKNOWN


def batch_solution(data: bytes, info: SkeletonInfo, goals_per_item: int, start_poses: Any,
                   fast: bool = True) -> BatchSolution:
    """A SolveBatchResponse's bytes as a BatchSolution (start_poses: the
    items' start rotations, (N, J, 4) or None for the rest pose)."""
    if fast:
        try:
            return _batch_fast(data, info, goals_per_item, start_poses)
        except _wire.WireMismatch:
            pass
    return _batch_slow(solve_pb2.SolveBatchResponse.FromString(data), info, goals_per_item, start_poses)


def _empty_solution(info: SkeletonInfo, n: int, g: int, start_poses: Any) -> BatchSolution:
    j = len(info.names)
    poses = np.empty((n, j, 4))
    poses[...] = info.rest_rotations if start_poses is None else start_poses
    translations = np.empty((n, j, 3))
    translations[...] = info.rest_translations
    return BatchSolution(
        joint_names=list(info.names), poses=poses, translations=translations,
        rotated=np.zeros((n, j), bool), hinge_angles_rad=np.full((n, j), np.nan),
        reached=np.zeros((n, g), bool), position_error=np.full((n, g), np.nan),
        orientation_error_rad=np.full((n, g), np.nan), iterations=np.zeros((n, g), np.int64),
        solver=np.full((n, g), "", dtype=solver_names().dtype), errors={})


def _batch_fast(data: bytes, info: SkeletonInfo, g: int, start_poses: Any) -> BatchSolution:
    data, starts, ends = _wire.split(data, 1)
    n = len(starts)
    j = len(info.names)
    out = _empty_solution(info, n, g, start_poses)
    buf = _wire.padded(data)
    c = _wire.columns(buf, starts, ends, {3: "each", 5: "bytes", 7: "bytes", 8: "bytes", 9: "bytes",
                                           10: "bytes", 11: "bytes", 12: "bytes"})
    # Items the server refused carry their error and nothing else.
    error_start, error_length = c[5]
    for item in np.flatnonzero(error_length):
        at = error_start[item]
        e = solve_pb2.Error.FromString(bytes(buf[at:at + error_length[item]]))
        out.errors[int(item)] = ReachError(_status(e.code), e.message)

    def indexed(index_field, value_field, width, what):
        (i_start, i_length), (v_start, v_length) = c[index_field], c[value_field]
        joints, counts = _wire.packed_varints(buf, i_start, i_length)
        values = _wire.packed_doubles(buf, v_start, v_length)
        if np.any(counts * width * 8 != v_length) or np.any(joints >= j):
            raise _wire.WireMismatch(what)
        items = np.repeat(np.arange(n), counts)
        return items, joints.astype(np.int64), values.reshape(-1, width)

    items, joints, rotations = indexed(7, 8, 4, "rotations")
    out.poses[items, joints] = rotations
    out.rotated[items, joints] = True
    items, joints, translations = indexed(9, 10, 3, "translations")
    out.translations[items, joints] = translations
    items, joints, angles = indexed(11, 12, 1, "hinges")
    out.hinge_angles_rad[items, joints] = angles[:, 0]

    msg, r_start, r_length = c[3]
    per_item = np.bincount(msg, minlength=n)
    ok = per_item == g
    if np.any(per_item[~ok]) or np.any(ok & (error_length > 0)):
        raise _wire.WireMismatch("results per item")
    r = _wire.columns(buf, r_start, r_start + r_length, {1: "int", 2: "f8", 3: "f8", 4: "int", 5: "int"})
    rows = np.flatnonzero(ok)
    out.reached[rows] = r[1].reshape(-1, g) != 0
    out.position_error[rows] = r[2].reshape(-1, g)
    out.orientation_error_rad[rows] = r[3].reshape(-1, g)
    out.iterations[rows] = r[4].reshape(-1, g)
    names = solver_names()
    out.solver[rows] = names[np.clip(r[5], 0, len(names) - 1)].reshape(-1, g)
    return out


def _batch_slow(response: solve_pb2.SolveBatchResponse, info: SkeletonInfo, g: int,
                start_poses: Any) -> BatchSolution:
    """The same from the protobuf classes (when the fast path meets bytes
    it does not expect)."""
    n = len(response.items)
    out = _empty_solution(info, n, g, start_poses)
    for i, item in enumerate(response.items):
        if item.HasField("error"):
            out.errors[i] = ReachError(_status(item.error.code), item.error.message)
            continue
        rotated = list(item.rotated_joints)
        if rotated:
            out.poses[i, rotated] = np.asarray(item.rotations, float).reshape(-1, 4)
            out.rotated[i, rotated] = True
        moved = list(item.translated_joints)
        if moved:
            out.translations[i, moved] = np.asarray(item.translations, float).reshape(-1, 3)
        hinges = list(item.hinge_joints)
        if hinges:
            out.hinge_angles_rad[i, hinges] = list(item.hinge_angles_rad)
        if len(item.results) != g:
            raise ReachError(grpc.StatusCode.INTERNAL,
                             f"items[{i}].results: {len(item.results)} results for {g} goals")
        for k, result in enumerate(item.results):
            out.reached[i, k] = result.reached
            out.position_error[i, k] = result.position_error
            out.orientation_error_rad[i, k] = result.orientation_error_rad
            out.iterations[i, k] = result.iterations
            out.solver[i, k] = solve_pb2.Solver.Name(result.solver)[7:].lower()
    return out
