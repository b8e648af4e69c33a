"""Plain-Python requests and results, and their protobuf forms."""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import grpc
from google.protobuf import json_format

from reach.v1 import ik_service_pb2 as pb
from reach.v1 import skeleton_pb2
from reach.v1 import solve_pb2

try:  # Optional: rotations as (n, 4) arrays.
    import numpy as _np
except ImportError:  # pragma: no cover - exercised where NumPy is absent
    _np = None

Vec3 = Tuple[float, float, float]
Quat = Tuple[float, float, float, float]  # w, x, y, z
GoalLike = Union[Mapping[str, Any], solve_pb2.Goal]
SkeletonLike = Union[str, os.PathLike, Mapping[str, Any], skeleton_pb2.Skeleton]

# "goals[0].chain: unknown chain" -> "goals[0].chain";
# "goals[1].priority = 1 applies to ..." -> "goals[1].priority"
_FIELD = re.compile(r"^(?:[A-Za-z]+: )?([A-Za-z_][\w]*(?:\[\d+\])*(?:\.[A-Za-z_]\w*(?:\[\d+\])*)*)(?:: | = )")


class ReachError(Exception):
    """An error of the service or of a request built here.

    code: the grpc.StatusCode (INVALID_ARGUMENT for a request this package
    refused to build); message: the text; field: the request field the
    message names ("goals[0].chain"), or None.
    """

    def __init__(self, code: grpc.StatusCode, message: str):
        self.code = code
        self.message = message
        match = _FIELD.match(message)
        self.field: Optional[str] = match.group(1) if match else None
        super().__init__(f"{code.name}: {message}")


def _invalid(message: str) -> ReachError:
    return ReachError(grpc.StatusCode.INVALID_ARGUMENT, message)


def from_rpc_error(error: grpc.RpcError) -> ReachError:
    return ReachError(error.code(), error.details() or "")


def _vec3(value: Any, where: str) -> dict:
    if isinstance(value, Mapping):
        return dict(value)
    try:
        x, y, z = (float(v) for v in value)
    except (TypeError, ValueError):
        raise _invalid(f"{where}: expected three numbers (x, y, z), got {value!r}") from None
    return {"x": x, "y": y, "z": z}


def _quat(value: Any, where: str) -> dict:
    if isinstance(value, Mapping):
        return dict(value)
    try:
        w, x, y, z = (float(v) for v in value)
    except (TypeError, ValueError):
        raise _invalid(f"{where}: expected four numbers (w, x, y, z), got {value!r}") from None
    return {"w": w, "x": x, "y": y, "z": z}


def solver_value(name: Union[str, int]) -> int:
    """"fabrik", "FULL_BODY", "solver_ccd", 3 -> the reach.v1.Solver value."""
    if isinstance(name, int):
        return name
    key = str(name).upper().replace("-", "_")
    if not key.startswith("SOLVER_"):
        key = "SOLVER_" + key
    try:
        return solve_pb2.Solver.Value(key)
    except ValueError:
        names = ", ".join(n[7:].lower() for n in solve_pb2.Solver.keys())
        raise _invalid(f"solver: unknown solver {name!r} (one of: {names})") from None


_VEC3_FIELDS = ("target", "pole", "aim_axis", "aimAxis")
_QUAT_FIELDS = ("target_orientation", "targetOrientation", "orientation")


def goal_message(goal: GoalLike, where: str = "goal") -> solve_pb2.Goal:
    """A dict -> reach.v1.Goal.

    Keys are the proto's fields (snake_case or camelCase): chain (or
    root_joint + tip_joint), target (x, y, z), target_orientation or
    orientation (w, x, y, z), pole, aim_axis, solver ("fabrik", ...),
    weight, priority, options ({max_iterations, tolerance, ...}).
    """
    if isinstance(goal, solve_pb2.Goal):
        return goal
    if not isinstance(goal, Mapping):
        raise _invalid(f"{where}: expected a dict or a reach.v1.Goal, got {type(goal).__name__}")
    data = dict(goal)
    for key in _VEC3_FIELDS:
        if key in data:
            data[key] = _vec3(data[key], f"{where}.{key}")
    for key in _QUAT_FIELDS:
        if key in data:
            value = _quat(data.pop(key), f"{where}.{key}")
            data["target_orientation" if key == "orientation" else key] = value
    if "solver" in data:
        data["solver"] = solver_value(data["solver"])
    try:
        return json_format.ParseDict(data, solve_pb2.Goal())
    except json_format.ParseError as e:
        raise _invalid(f"{where}: {e}") from None


def pose_message(pose: Any, where: str = "start_pose") -> solve_pb2.Pose:
    """A reach.v1.Pose, a dict {rotations: [(w,x,y,z)...], root_translation},
    or an (n, 4) sequence/array of local rotations."""
    if isinstance(pose, solve_pb2.Pose):
        return pose
    message = solve_pb2.Pose()
    if isinstance(pose, Mapping):
        rotations = pose.get("rotations", [])
        if "root_translation" in pose or "rootTranslation" in pose:
            t = _vec3(pose.get("root_translation", pose.get("rootTranslation")),
                      f"{where}.root_translation")
            message.root_translation.x, message.root_translation.y, message.root_translation.z = (
                t["x"], t["y"], t["z"])
    else:
        rotations = pose
    for i, q in enumerate(rotations):
        d = _quat(q, f"{where}.rotations[{i}]")
        message.rotations.add(w=d["w"], x=d["x"], y=d["y"], z=d["z"])
    return message


def solve_request(skeleton_id: str, goals: Iterable[GoalLike], start_pose: Any = None,
                  return_globals: bool = False, full_body: Optional[Mapping[str, Any]] = None,
                  sequence: int = 0, latest_wins: bool = False) -> solve_pb2.SolveRequest:
    request = solve_pb2.SolveRequest(skeleton_id=skeleton_id or "", sequence=sequence,
                                     return_globals=return_globals, latest_wins=latest_wins)
    if isinstance(goals, (Mapping, solve_pb2.Goal)):
        goals = [goals]
    for i, goal in enumerate(goals):
        request.goals.append(goal_message(goal, f"goals[{i}]"))
    if start_pose is not None:
        request.start_pose.CopyFrom(pose_message(start_pose))
    if full_body:
        data = dict(full_body)
        try:
            json_format.ParseDict(data, request.full_body)
        except json_format.ParseError as e:
            raise _invalid(f"full_body: {e}") from None
    return request


def batch_request(items: Sequence[Any], skeleton_id: str = "") -> solve_pb2.SolveBatchRequest:
    """Client.solve_batch's items -> a SolveBatchRequest: each item a list of
    goals, or a dict {"goals", "start_pose", "skeleton_id",
    "return_globals", "full_body"}."""
    request = solve_pb2.SolveBatchRequest(skeleton_id=skeleton_id)
    for i, item in enumerate(items):
        if isinstance(item, Mapping) and "goals" in item:
            message = solve_request(item.get("skeleton_id", ""), item["goals"],
                                    item.get("start_pose"), item.get("return_globals", False),
                                    item.get("full_body"), sequence=i)
        else:
            message = solve_request("", item, sequence=i)
        request.items.append(message)
    return request


def frame_request(skeleton_id: str, goals: Any, start_pose: Any, latest_wins: bool,
                  options: Mapping[str, Any]) -> solve_pb2.SolveRequest:
    """A stream frame: a whole SolveRequest as given, or one built from goals."""
    if isinstance(goals, solve_pb2.SolveRequest):
        return goals
    return solve_request(skeleton_id, goals, start_pose, latest_wins=latest_wins, **options)


def skeleton_message(skeleton: SkeletonLike) -> skeleton_pb2.Skeleton:
    """A reach.v1.Skeleton from itself, a dict in protobuf JSON form, or the
    path of a skeleton JSON file (examples/humanoid.skeleton.json)."""
    if isinstance(skeleton, skeleton_pb2.Skeleton):
        return skeleton
    if isinstance(skeleton, (str, os.PathLike)):
        path = os.fspath(skeleton)
        try:
            with open(path, encoding="utf-8") as f:
                skeleton = json.load(f)
        except OSError as e:
            raise ReachError(grpc.StatusCode.NOT_FOUND, f"skeleton: cannot read {path!r}: {e.strerror}") from None
        except ValueError as e:
            raise _invalid(f"skeleton: {path!r} is not JSON: {e}") from None
    if not isinstance(skeleton, Mapping):
        raise _invalid(f"skeleton: expected a path, a dict or a reach.v1.Skeleton, got {type(skeleton).__name__}")
    try:
        return json_format.ParseDict(skeleton, skeleton_pb2.Skeleton())
    except json_format.ParseError as e:
        raise _invalid(f"skeleton: {e}") from None


@dataclass
class Registered:
    skeleton_id: str
    version: int
    created: bool


@dataclass
class Imported:
    """ImportSkeleton's answer. `motion` (BVH with return_motion): local
    rotations per frame and joint, an (frames, joints, 4) NumPy array (else
    nested lists); `root_translations`: (frames, 3); `frame_time_s`."""

    skeleton_id: str
    version: int
    created: bool
    skeleton: dict
    motion: Any = None
    root_translations: Any = None
    frame_time_s: float = 0.0


_FORMATS = {"json": 1, "bvh": 2, "urdf": 3, "gltf": 4, "glb": 4}


def import_request(path: Union[str, os.PathLike], format: Optional[str], name: Optional[str],
                   chains: Optional[Mapping[str, Tuple[str, str]]],
                   return_motion: bool) -> pb.ImportSkeletonRequest:
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ReachError(grpc.StatusCode.NOT_FOUND, f"path: cannot read {path!r}: {e.strerror}") from None
    request = pb.ImportSkeletonRequest(data=data, file_name=os.path.basename(path),
                                       name=name or "", return_motion=return_motion)
    if format is not None:
        if format.lower() not in _FORMATS:
            raise _invalid(f"format: expected one of {sorted(_FORMATS)}, got {format!r}")
        request.format = _FORMATS[format.lower()]
    for chain, (root, tip) in (chains or {}).items():
        request.chains.add(name=chain, root=root, tip=tip)
    return request


def imported(response: pb.ImportSkeletonResponse) -> Imported:
    motion = roots = None
    if len(response.motion):
        rotations = [[(q.w, q.x, q.y, q.z) for q in pose.rotations] for pose in response.motion]
        translations = [(p.root_translation.x, p.root_translation.y, p.root_translation.z)
                        for p in response.motion]
        if _np is not None:
            motion, roots = _np.asarray(rotations, dtype=float), _np.asarray(translations, dtype=float)
        else:
            motion, roots = rotations, translations
    return Imported(response.skeleton_id, response.version, response.created,
                    json_format.MessageToDict(response.skeleton, preserving_proto_field_name=True),
                    motion, roots, response.frame_time_s)


@dataclass
class GoalResult:
    reached: bool
    position_error: float
    orientation_error_rad: float
    iterations: int
    solver: str  # "fabrik", "two_bone", ...
    tolerance: float


@dataclass
class Solution:
    """One answered request. `rotations`: the new local rotations (w, x, y,
    z) of `rotated_joints`, an (n, 4) NumPy array when NumPy is installed,
    else a list of tuples; likewise `translations` (n, 3). `error` is set
    (and nothing else) for a stream frame the server refused."""

    sequence: int
    rotated_joints: List[int]
    rotations: Any
    translated_joints: List[int]
    translations: Any
    hinge_joints: List[int]
    hinge_angles_rad: List[float]
    results: List[GoalResult]
    globals: List[Tuple[Vec3, Quat]] = field(default_factory=list)
    error: Optional[ReachError] = None
    skipped: bool = False
    message: Optional[solve_pb2.SolveResponse] = field(default=None, repr=False)
    # Every joint's name, in the skeleton's order (when the client knows
    # the skeleton): rotated_names and rotation(name) use it.
    joint_names: Optional[List[str]] = field(default=None, repr=False)

    @property
    def rotated_names(self) -> Optional[List[str]]:
        """The names of rotated_joints."""
        if self.joint_names is None:
            return None
        return [self.joint_names[j] for j in self.rotated_joints]

    def rotation(self, joint: Union[str, int]) -> Any:
        """The new local rotation (w, x, y, z) of `joint` (a name or an
        index), or None when this solve did not turn it."""
        if isinstance(joint, str):
            if self.joint_names is None or joint not in self.joint_names:
                raise ReachError(grpc.StatusCode.NOT_FOUND, f"joint: no joint named {joint!r}")
            joint = self.joint_names.index(joint)
        try:
            return self.rotations[self.rotated_joints.index(joint)]
        except ValueError:
            return None

    def apply(self, rotations: Any) -> Any:
        """Returns a copy of `rotations` (n_joints x 4, local) with this
        solution's rotations written into their joints."""
        if _np is not None:
            out = _np.array(rotations, dtype=float, copy=True)
            if len(self.rotated_joints):
                out[self.rotated_joints] = self.rotations
            return out
        out = [tuple(q) for q in rotations]
        for i, j in enumerate(self.rotated_joints):
            out[j] = tuple(self.rotations[i])
        return out


def _rows(values: Sequence[float], width: int) -> Any:
    if _np is not None:
        return _np.asarray(values, dtype=float).reshape(-1, width)
    return [tuple(values[i:i + width]) for i in range(0, len(values), width)]


def solution(response: solve_pb2.SolveResponse) -> Solution:
    error = None
    if response.HasField("error"):
        code = grpc.StatusCode.UNKNOWN
        for c in grpc.StatusCode:
            if c.value[0] == response.error.code:
                code = c
        error = ReachError(code, response.error.message)
    return Solution(
        sequence=response.sequence,
        rotated_joints=list(response.rotated_joints),
        rotations=_rows(response.rotations, 4),
        translated_joints=list(response.translated_joints),
        translations=_rows(response.translations, 3),
        hinge_joints=list(response.hinge_joints),
        hinge_angles_rad=list(response.hinge_angles_rad),
        results=[GoalResult(r.reached, r.position_error, r.orientation_error_rad,
                            r.iterations, solve_pb2.Solver.Name(r.solver)[7:].lower(),
                            r.tolerance) for r in response.results],
        globals=[((g.translation.x, g.translation.y, g.translation.z),
                  (g.rotation.w, g.rotation.x, g.rotation.y, g.rotation.z))
                 for g in response.globals],
        error=error, skipped=response.skipped, message=response)


def summary(message: pb.SkeletonSummary) -> dict:
    return {"skeleton_id": message.skeleton_id, "version": message.version,
            "name": message.name, "joint_count": message.joint_count,
            "chains": list(message.chains)}
