"""Retargeting (reach.v1.RetargetService): profiles, and motion in and
out as NumPy arrays (frames x joints x 4 local rotations w, x, y, z, and
root translations), joints by name."""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import grpc
from google.protobuf import json_format

from reach import _arrays, _types
from reach._arrays import SkeletonInfo, as_array, np, require_numpy
from reach._types import ReachError, _invalid
from reach.v1 import retarget_pb2 as rpb
from reach.v1 import solve_pb2

try:
    from reach import _wire
except ImportError:  # pragma: no cover
    _wire = None

LIMBS = ("left_hand", "right_hand", "left_foot", "right_foot")
_NO_IK = ("left_arm", "right_arm", "left_leg", "right_leg")
_HEX_ID = re.compile(r"^[0-9a-f]{64}$")
_FILE_SUFFIXES = (".bvh", ".gltf", ".glb", ".json", ".urdf")

# The spec's plain options: name -> (proto field, check).
_OPTIONS = ("keep_target_pose", "pelvis_scale", "no_planting", "source_floor", "contact_height",
            "contact_speed", "ankle_height", "release_seconds", "max_iterations")


def is_skeleton_id(value: Any) -> bool:
    return isinstance(value, str) and bool(_HEX_ID.match(value))


def looks_like_file(value: Any) -> bool:
    return isinstance(value, (str, os.PathLike)) and os.fspath(value).lower().endswith(_FILE_SUFFIXES)


def profile_spec(source_id: str, target_id: str, source_reference: Any = None,
                 target_reference: Any = None, source_overrides: Optional[Mapping[str, str]] = None,
                 target_overrides: Optional[Mapping[str, str]] = None,
                 no_ik: Sequence[str] = (), **options: Any) -> rpb.RetargetProfileSpec:
    """A RetargetProfileSpec; errors name the argument."""
    spec = rpb.RetargetProfileSpec()
    for side, skeleton_id, reference, overrides, name in (
            (spec.source, source_id, source_reference, source_overrides, "source"),
            (spec.target, target_id, target_reference, target_overrides, "target")):
        side.skeleton_id = skeleton_id
        for role, joint in (overrides or {}).items():
            side.overrides.add(role=str(role), joint=str(joint))
        if reference is not None:
            side.reference.CopyFrom(_types.pose_message(
                [tuple(q) for q in as_array(reference, f"{name}_reference", (4,))], f"{name}_reference"))
    if isinstance(no_ik, str):
        no_ik = [no_ik]
    for limb in no_ik:
        if limb not in _NO_IK:
            raise _invalid(f"no_ik: {limb!r} is not one of {', '.join(_NO_IK)}")
        setattr(spec, f"no_{limb}_ik", True)
    for key, value in options.items():
        if key not in _OPTIONS:
            raise _invalid(f"{key}: not a profile option (one of {', '.join(_OPTIONS)})")
        if value is None:
            continue
        try:
            setattr(spec, key, value)
        except (TypeError, ValueError) as e:
            raise _invalid(f"{key}: {e}") from None
    return spec


@dataclass
class SideReport:
    """What the characterisation found on one side: roles {role: joint},
    how each was decided, unmapped joints, warnings, and the axes."""

    skeleton_id: str
    name: str
    roles: Dict[str, str]
    decided: Dict[str, str]
    unmapped: List[str]
    warnings: List[str]
    up: Tuple[float, float, float]
    forward: Tuple[float, float, float]
    left: Tuple[float, float, float]


def _side(report: rpb.RetargetSideReport) -> SideReport:
    vec = lambda v: (v.x, v.y, v.z)  # noqa: E731
    return SideReport(report.skeleton_id, report.skeleton_name,
                      {r.role: r.joint for r in report.roles}, {r.role: r.decided for r in report.roles},
                      list(report.unmapped), list(report.warnings), vec(report.up), vec(report.forward),
                      vec(report.left))


@dataclass
class RetargetProfile:
    """A retarget profile: its id, the characterisation of both sides, the
    pelvis scale, the target's retarget pose (J, 4), the spec (a dict),
    and both sides' joint names."""

    profile_id: str
    version: int
    created: bool
    source: SideReport
    target: SideReport
    pelvis_scale: float
    target_reference: Any
    spec: dict
    source_joints: List[str] = field(default_factory=list)
    target_joints: List[str] = field(default_factory=list)
    message: Optional[rpb.RetargetProfile] = field(default=None, repr=False)


def profile(message: rpb.RetargetProfile, created: bool, source: Optional[SkeletonInfo],
            target: Optional[SkeletonInfo]) -> RetargetProfile:
    reference = [(q.w, q.x, q.y, q.z) for q in message.target_reference.rotations]
    return RetargetProfile(
        message.profile_id, message.version, created, _side(message.source), _side(message.target),
        message.pelvis_scale, np.asarray(reference, float).reshape(-1, 4) if np is not None else reference,
        json_format.MessageToDict(message.spec, preserving_proto_field_name=True),
        list(source.names) if source else [], list(target.names) if target else [], message)


def summary(message: rpb.RetargetProfileSummary) -> dict:
    return {"profile_id": message.profile_id, "version": message.version,
            "source_skeleton_id": message.source_skeleton_id, "source_name": message.source_name,
            "target_skeleton_id": message.target_skeleton_id, "target_name": message.target_name}


def profile_id_of(profile: Union[str, RetargetProfile]) -> str:
    if isinstance(profile, RetargetProfile):
        return profile.profile_id
    if not isinstance(profile, str) or not profile:
        raise _invalid(f"profile: expected a RetargetProfile or its id, got {profile!r}")
    return profile


# --- requests --------------------------------------------------------------

_POSE_LAYOUTS: Dict[Tuple[int, bool], Any] = {}


def _pose_layout(joints: int, with_root: bool):
    key = (joints, with_root)
    layout = _POSE_LAYOUTS.get(key)
    if layout is None:
        layout = _wire.Layout().quats(1, joints, "r")
        if with_root:
            layout.vec3(2, "root")
        _POSE_LAYOUTS[key] = layout
    return layout


def motion_arrays(rotations: Any, root_translations: Any, joints: Optional[int], frames_axis: bool,
                  where: str):
    """Validated (F, J, 4) (or (J, 4)) rotations and root translations."""
    require_numpy("retargeting")
    rot = as_array(rotations, where, (4,))
    want = 3 if frames_axis else 2
    if rot.ndim != want:
        raise _invalid(f"{where}: expected shape ({'frames, ' if frames_axis else ''}joints, 4), got {rot.shape}")
    if joints is not None and rot.shape[-2] != joints:
        raise _invalid(f"{where}: has {rot.shape[-2]} joints; the source skeleton has {joints}")
    if frames_axis and rot.shape[0] == 0:
        raise _invalid(f"{where}: no frames")
    norms = np.linalg.norm(rot, axis=-1)
    if np.any(np.abs(norms - 1.0) > 1e-3):
        bad = tuple(int(i) for i in np.argwhere(np.abs(norms - 1.0) > 1e-3)[0])
        raise _invalid(f"{where}[{']['.join(map(str, bad))}]: not a unit quaternion (norm {norms[bad]:.6g})")
    root = None
    if root_translations is not None:
        lead = rot.shape[:1] if frames_axis else ()
        root = as_array(root_translations, "root_translations" if frames_axis else "root_translation",
                        (3,), lead)
    return rot, root


def _frame_time(frame_time_s: Optional[float], where: str = "frame_time_s") -> float:
    if frame_time_s is None:
        return 0.0
    value = float(frame_time_s)
    if not math.isfinite(value) or not 0.0 <= value <= 10.0:
        raise _invalid(f"{where}: expected seconds in [0, 10], got {frame_time_s!r}")
    return value


def retarget_bytes(profile_id: str, rotations, root, frame_time_s: float = 0.0,
                   latest_wins: bool = False, return_globals: bool = False) -> bytes:
    """A RetargetRequest, serialized (no sequence: the stream adds it)."""
    layout = _pose_layout(rotations.shape[0], root is not None)
    values = {"r": rotations[None]}
    if root is not None:
        values["root"] = root[None]
    pose = layout.pack(1, values).tobytes()
    out = _wire.length_delimited(1, profile_id.encode()) + _wire.length_delimited(3, pose)
    if frame_time_s:
        out += _wire.tag(4, _wire.FIXED64) + np.float64(frame_time_s).astype("<f8").tobytes()
    if latest_wins:
        out += b"\x28\x01"
    if return_globals:
        out += b"\x30\x01"
    return out


def batch_bytes(profile_id: str, rotations, roots, frame_time_s: float, report: bool,
                return_globals: bool) -> bytes:
    layout = _pose_layout(rotations.shape[1], roots is not None)
    values = {"r": rotations}
    if roots is not None:
        values["root"] = roots
    frames = _wire.frame_records(layout.pack(rotations.shape[0], values), 2)
    out = _wire.length_delimited(1, profile_id.encode()) + frames
    if frame_time_s:
        out += _wire.tag(3, _wire.FIXED64) + np.float64(frame_time_s).astype("<f8").tobytes()
    if return_globals:
        out += b"\x20\x01"
    if report:
        out += b"\x28\x01"
    return out


# --- answers ---------------------------------------------------------------

@dataclass
class Limbs:
    """One hand or foot over F frames: active (it had a goal), reached,
    position_error (target units), orientation_error_rad, planted (feet),
    adjusted (the goal was not the live one), goal (F, 3) in target model
    space."""

    active: Any
    reached: Any
    position_error: Any
    orientation_error_rad: Any
    planted: Any
    adjusted: Any
    goal: Any


@dataclass
class RetargetedMotion:
    """Retargeted frames: rotations (F, J, 4) local, in the target's joint
    order (joint_names); root_translations (F, 3), target units; limbs
    {"left_hand", "right_hand", "left_foot", "right_foot": Limbs};
    iterations (F,) of the full-body solve; sequence (F,); skipped (F,)
    (latest-wins frames not solved) and errors {frame: ReachError} (a
    stream's refused frames): their rows are NaN. quality: the batch's
    RetargetQuality as a dict (report=True), else None. globals_*: the
    model-space transforms (return_globals=True), else None."""

    joint_names: List[str]
    rotations: Any
    root_translations: Any
    limbs: Dict[str, Limbs]
    iterations: Any
    sequence: Any
    skipped: Any
    errors: Dict[int, ReachError]
    frame_time_s: float = 0.0
    quality: Optional[dict] = None
    global_positions: Any = None
    global_rotations: Any = None

    def __len__(self) -> int:
        return len(self.rotations)

    def joint(self, name: str) -> int:
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise ReachError(grpc.StatusCode.NOT_FOUND, f"joint: no joint named {name!r}") from None

    def frame(self, i: int) -> "RetargetedFrame":
        return RetargetedFrame(
            self.joint_names, self.rotations[i], self.root_translations[i],
            {k: LimbOutcome(*(getattr(v, f)[i] for f in LimbOutcome.__dataclass_fields__))
             for k, v in self.limbs.items()},
            int(self.iterations[i]), int(self.sequence[i]), bool(self.skipped[i]), self.errors.get(i),
            None if self.global_positions is None else self.global_positions[i],
            None if self.global_rotations is None else self.global_rotations[i])


@dataclass
class LimbOutcome:
    active: bool
    reached: bool
    position_error: float
    orientation_error_rad: float
    planted: bool
    adjusted: bool
    goal: Any


@dataclass
class RetargetedFrame:
    """One retargeted frame: rotations (J, 4) and root_translation (3,) of
    the target (joint_names), limbs {name: LimbOutcome}, iterations,
    sequence; error (a stream's refused frame) or skipped."""

    joint_names: List[str]
    rotations: Any
    root_translation: Any
    limbs: Dict[str, LimbOutcome]
    iterations: int
    sequence: int
    skipped: bool = False
    error: Optional[ReachError] = None
    global_positions: Any = None
    global_rotations: Any = None


def _vec3s(buf, starts, lengths) -> "np.ndarray":
    c = _wire.columns(buf, starts, starts + lengths, {1: "f8", 2: "f8", 3: "f8"})
    return np.stack([c[1], c[2], c[3]], axis=-1)


def _quats(buf, starts, lengths) -> "np.ndarray":
    c = _wire.columns(buf, starts, starts + lengths, {1: "f8", 2: "f8", 3: "f8", 4: "f8"})
    return np.stack([c[1], c[2], c[3], c[4]], axis=-1)


def motion(data: bytes, starts, ends, joints: SkeletonInfo, frame_time_s: float = 0.0) -> RetargetedMotion:
    """RetargetResponse messages at data[starts[i]:ends[i]] as arrays."""
    buf = _wire.padded(data)
    n = len(starts)
    j = len(joints.names)
    c = _wire.columns(buf, starts, ends, {1: "int", 2: "bytes", 3: "bytes", 4: "bytes", 5: "bytes",
                                          6: "bytes", 7: "int", 8: "each", 9: "bytes", 10: "int"})
    errors: Dict[int, ReachError] = {}
    e_start, e_length = c[9]
    for i in np.flatnonzero(e_length):
        e = solve_pb2.Error.FromString(bytes(buf[e_start[i]:e_start[i] + e_length[i]]))
        errors[int(i)] = ReachError(_arrays._status(e.code), e.message)
    skipped = c[10] != 0
    p_start, p_length = c[2]
    pose = _wire.columns(buf, p_start, p_start + p_length, {1: "each", 2: "bytes"})
    msg, q_start, q_length = pose[1]
    per_frame = np.bincount(msg, minlength=n)
    rotations = np.full((n, j, 4), np.nan)
    full = per_frame == j
    if np.any(per_frame[~full]):
        raise _wire.WireMismatch("target.rotations")
    if len(msg):
        rotations[full] = _quats(buf, q_start, q_length).reshape(-1, j, 4)
    r_start, r_length = pose[2]
    roots = _vec3s(buf, r_start, r_length)
    # A frame without a root translation has the rest one.
    no_root = r_length == 0
    roots[no_root] = joints.rest_translations[0]
    empty = ~full
    roots[empty] = np.nan
    limbs = {}
    for k, name in enumerate(LIMBS):
        l_start, l_length = c[3 + k]
        lc = _wire.columns(buf, l_start, l_start + l_length, {1: "int", 2: "int", 3: "f8", 4: "f8",
                                                              5: "int", 6: "int", 7: "bytes"})
        g_start, g_length = lc[7]
        limbs[name] = Limbs(lc[1] != 0, lc[2] != 0, lc[3], lc[4], lc[5] != 0, lc[6] != 0,
                            _vec3s(buf, g_start, g_length))
        for key in ("position_error", "orientation_error_rad", "goal"):
            getattr(limbs[name], key)[empty] = np.nan
    out = RetargetedMotion(list(joints.names), rotations, roots, limbs, c[7], c[1], skipped, errors,
                           frame_time_s)
    g_msg, g_start, g_length = c[8]
    if len(g_msg):
        per_frame = np.bincount(g_msg, minlength=n)
        if np.any((per_frame != j) & (per_frame != 0)):
            raise _wire.WireMismatch("globals")
        t = _wire.columns(buf, g_start, g_start + g_length, {1: "bytes", 2: "bytes"})
        positions = np.full((n, j, 3), np.nan)
        turns = np.full((n, j, 4), np.nan)
        has = per_frame == j
        positions[has] = _vec3s(buf, *t[1]).reshape(-1, j, 3)
        q = _quats(buf, *t[2])
        q[t[2][1] == 0] = (1.0, 0.0, 0.0, 0.0)  # An unset rotation: none.
        turns[has] = q.reshape(-1, j, 4)
        out.global_positions, out.global_rotations = positions, turns
    return out


def batch_motion(data: bytes, joints: SkeletonInfo, frame_time_s: float) -> RetargetedMotion:
    frames, starts, ends = _wire.split(data, 1)
    out = motion(frames, starts, ends, joints, frame_time_s)
    quality, q_starts, q_ends = _wire.split(data, 2)
    if len(q_starts):
        message = rpb.RetargetQuality.FromString(quality[q_starts[-1]:q_ends[-1]])
        out.quality = json_format.MessageToDict(message, preserving_proto_field_name=True,
                                                including_default_value_fields=True)
    return out


def frame(data: bytes, joints: SkeletonInfo) -> RetargetedFrame:
    """One RetargetResponse (Retarget, a stream's answer) as a frame."""
    return motion(data, np.zeros(1, np.int64), np.full(1, len(data), np.int64), joints).frame(0)


def concatenate(parts: List[RetargetedMotion]) -> RetargetedMotion:
    """Chunks of one clip (RetargetBatch calls), in order."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    cat = lambda name: np.concatenate([getattr(p, name) for p in parts])  # noqa: E731
    limbs = {k: Limbs(*(np.concatenate([getattr(p.limbs[k], f) for p in parts])
                        for f in Limbs.__dataclass_fields__)) for k in first.limbs}
    errors, offset = {}, 0
    for p in parts:
        errors.update({offset + i: e for i, e in p.errors.items()})
        offset += len(p)
    out = RetargetedMotion(first.joint_names, cat("rotations"), cat("root_translations"), limbs,
                           cat("iterations"), cat("sequence"), cat("skipped"), errors, first.frame_time_s)
    if first.global_positions is not None:
        out.global_positions, out.global_rotations = cat("global_positions"), cat("global_rotations")
    qualities = [p.quality for p in parts if p.quality is not None]
    out.quality = qualities[0] if len(qualities) == 1 else (qualities or None)
    return out


def chunks(frames: int, joints: int, batch_frames: int) -> List[Tuple[int, int]]:
    """[start, end) per RetargetBatch call: at most batch_frames frames and
    8 MiB of request (as the reach tool sends them)."""
    per_frame = 2 + (QUAT_FRAME * joints) + 32
    size = max(1, min(batch_frames, (8 << 20) // per_frame))
    return [(s, min(frames, s + size)) for s in range(0, frames, size)]


QUAT_FRAME = 38
