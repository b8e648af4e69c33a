"""Webcam pose landmarks -> full-body goals.

MediaPipe Pose (and Holistic) gives each frame 33 "world landmarks": points
in metres with the origin between the hips, x toward the image's right (the
performer's left when they face the camera), y down and z away from the
camera, each with a visibility in [0, 1]. `PoseLandmarks` turns one frame
of them into the full-body goals of a Reach skeleton:

- wrists -> hands, ankles -> feet, hips -> hip sockets, shoulders ->
  shoulders (upper arms), the ears' middle -> head;
- each hand's goal bends its elbow toward the elbow landmark and each
  foot's goal its knee toward the knee landmark (as poles), so the limbs
  bend the way the performer's do;
- a landmark's visibility is its goal's weight; landmarks less visible
  than `min_visibility` give no goal (a hidden foot stays where it is);
- hips and feet are solved first (priority 0), shoulders, hands and head
  next (priority 1).

The frame conversion (metres to the skeleton's units, MediaPipe's y-down
camera axes to the skeleton's) happens in `to_model` and nowhere else.
MediaPipe's world landmarks follow the hips, so the body moves in place
around `origin` unless `goals(..., origin=...)` moves it. A recording
made from the CMU walk (examples/python/record_landmarks.py) streamed onto
the walk's own skeleton::

    import json

    import reach
    from reach.landmarks import CMU_JOINTS, PoseLandmarks

    # CMU units are 1/0.45 inch (17.72 a metre); the hips' centre 16 up.
    body = PoseLandmarks(CMU_JOINTS, scale=17.72, origin=(0.0, 16.0, 0.0))
    with reach.Client() as client:
        skeleton_id = client.import_file("tests/data/mocap/cmu_02_01_walk.bvh").skeleton_id
        with open("examples/python/walk_landmarks.jsonl") as recording:
            with client.stream(skeleton_id) as stream:
                for line in recording:
                    frame = json.loads(line)
                    stream.send(body.goals(frame["landmarks"], frame["visibility"]))
                errors = [max(r.position_error for r in s.results) for s in stream]
    # Noisy landmarks cannot all be met on a rigid body: how far off, in cm.
    print(f"{len(errors)} frames, goals at most {100 * max(errors) / 17.72:.1f} cm off")

With MediaPipe itself, pass its result as it is:
`stream.send(body.goals(result.pose_world_landmarks))` (the landmarks'
own visibilities are the weights).
"""
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from reach._arrays import np, require_numpy
from reach._types import _invalid

# MediaPipe Pose's landmark indices (the 33-point BlazePose topology).
MEDIAPIPE_POSE: Dict[str, int] = {
    "nose": 0, "left_eye_inner": 1, "left_eye": 2, "left_eye_outer": 3,
    "right_eye_inner": 4, "right_eye": 5, "right_eye_outer": 6,
    "left_ear": 7, "right_ear": 8, "mouth_left": 9, "mouth_right": 10,
    "left_shoulder": 11, "right_shoulder": 12, "left_elbow": 13,
    "right_elbow": 14, "left_wrist": 15, "right_wrist": 16,
    "left_pinky": 17, "right_pinky": 18, "left_index": 19, "right_index": 20,
    "left_thumb": 21, "right_thumb": 22, "left_hip": 23, "right_hip": 24,
    "left_knee": 25, "right_knee": 26, "left_ankle": 27, "right_ankle": 28,
    "left_heel": 29, "right_heel": 30, "left_foot_index": 31,
    "right_foot_index": 32,
}

# The roles a skeleton's joints can take, and where each role's target
# comes from: (landmarks whose mean is the target, landmark the limb's
# middle joint bends toward or None, priority).
_ROLES: Dict[str, Tuple[Tuple[str, ...], Optional[str], int]] = {
    "left_hip": (("left_hip",), None, 0),
    "right_hip": (("right_hip",), None, 0),
    "left_foot": (("left_ankle",), "left_knee", 0),
    "right_foot": (("right_ankle",), "right_knee", 0),
    "left_shoulder": (("left_shoulder",), None, 1),
    "right_shoulder": (("right_shoulder",), None, 1),
    "left_hand": (("left_wrist",), "left_elbow", 1),
    "right_hand": (("right_wrist",), "right_elbow", 1),
    "head": (("left_ear", "right_ear"), None, 1),
}

# Joint names of the CMU motion-capture skeletons (tests/data/mocap).
CMU_JOINTS: Dict[str, str] = {
    "left_hip": "LeftUpLeg", "right_hip": "RightUpLeg",
    "left_foot": "LeftFoot", "right_foot": "RightFoot",
    "left_shoulder": "LeftArm", "right_shoulder": "RightArm",
    "left_hand": "LeftHand", "right_hand": "RightHand", "head": "Head",
}

# MediaPipe's axes (x: image right, y: down, z: away from the camera) in a
# right-handed, Y-up model whose character faces +Z with its left on +X:
# a half turn about x.
Y_UP: Tuple[Tuple[float, ...], ...] = ((1.0, 0.0, 0.0), (0.0, -1.0, 0.0), (0.0, 0.0, -1.0))
# The same for a Z-up model whose character faces -Y with its left on +X
# (Blender's convention).
Z_UP: Tuple[Tuple[float, ...], ...] = ((1.0, 0.0, 0.0), (0.0, 0.0, 1.0), (0.0, -1.0, 0.0))


class PoseLandmarks:
    """Full-body goals from MediaPipe Pose world landmarks.

    joints: role -> joint name of the skeleton (roles: left_hip, right_hip,
        left_foot, right_foot, left_shoulder, right_shoulder, left_hand,
        right_hand, head); roles left out give no goal.
    scale: skeleton units per metre (1.0 for a skeleton in metres).
    origin: where the point between the hips goes, in model space.
    axes: 3x3 rows mapping MediaPipe's axes into the model's (Y_UP or Z_UP,
        or your own rotation).
    min_visibility: landmarks less visible give no goal.
    tolerance: the goals' position tolerance, in skeleton units (None: the
        server's default).
    """

    def __init__(self, joints: Mapping[str, str], scale: float = 1.0,
                 origin: Sequence[float] = (0.0, 0.0, 0.0), axes: Any = Y_UP,
                 min_visibility: float = 0.5, tolerance: Optional[float] = None):
        require_numpy("PoseLandmarks")
        unknown = sorted(set(joints) - set(_ROLES))
        if unknown:
            raise _invalid(f"joints: unknown role {unknown[0]!r}; the roles are "
                           + ", ".join(sorted(_ROLES)))
        for role, name in joints.items():
            if not isinstance(name, str) or not name:
                raise _invalid(f"joints[{role!r}]: expected a joint name, got {name!r}")
        self.joints = dict(joints)
        self.scale = _positive(scale, "scale")
        self.origin = _vector(origin, "origin")
        self.axes = np.asarray(axes, dtype=float)
        if self.axes.shape != (3, 3) or not np.all(np.isfinite(self.axes)):
            raise _invalid(f"axes: expected a 3x3 rotation, got shape {self.axes.shape}")
        if not np.allclose(self.axes @ self.axes.T, np.eye(3), atol=1e-6) or \
                np.linalg.det(self.axes) < 0:
            raise _invalid("axes: not a rotation (rows must be orthonormal, determinant 1)")
        if not 0.0 <= min_visibility <= 1.0:
            raise _invalid(f"min_visibility: must be within [0, 1], got {min_visibility}")
        self.min_visibility = float(min_visibility)
        self.tolerance = None if tolerance is None else _positive(tolerance, "tolerance")

    def to_model(self, points: Any, origin: Any = None) -> "np.ndarray":
        """MediaPipe world points (..., 3) in metres -> model space."""
        o = self.origin if origin is None else _vector(origin, "origin")
        return o + self.scale * (np.asarray(points, dtype=float) @ self.axes.T)

    def goals(self, landmarks: Any, visibility: Any = None,
              origin: Any = None) -> List[Dict[str, Any]]:
        """One frame: landmarks (33, 3) in metres (MediaPipe's
        pose_world_landmarks, as an array or a list of objects with x, y, z
        and visibility), visibility (33,) or None (from the objects, else
        all 1) -> goal dicts for Client.solve or Stream.send."""
        points, seen = _frame(landmarks, visibility)
        model = self.to_model(points, origin)
        out: List[Dict[str, Any]] = []
        for role, name in self.joints.items():
            sources, bend, priority = _ROLES[role]
            index = [MEDIAPIPE_POSE[s] for s in sources]
            weight = float(min(seen[i] for i in index))
            if weight < self.min_visibility:
                continue
            goal: Dict[str, Any] = {
                "tip_joint": name, "solver": "full_body", "priority": priority,
                "target": tuple(float(v) for v in model[index].mean(axis=0)),
                "weight": max(weight, 1e-3),
            }
            if bend is not None and seen[MEDIAPIPE_POSE[bend]] >= self.min_visibility:
                goal["pole"] = tuple(float(v) for v in model[MEDIAPIPE_POSE[bend]])
            if self.tolerance is not None:
                goal["options"] = {"tolerance": self.tolerance}
            out.append(goal)
        return out


def _positive(value: Any, where: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise _invalid(f"{where}: expected a number, got {value!r}") from None
    if not np.isfinite(v) or v <= 0.0:
        raise _invalid(f"{where}: must be a finite number > 0, got {value!r}")
    return v


def _vector(value: Any, where: str) -> "np.ndarray":
    v = np.asarray(value, dtype=float)
    if v.shape != (3,) or not np.all(np.isfinite(v)):
        raise _invalid(f"{where}: expected 3 finite numbers, got {value!r}")
    return v


def _frame(landmarks: Any, visibility: Any) -> Tuple["np.ndarray", "np.ndarray"]:
    """(33, 3) points and (33,) visibilities from an array or MediaPipe's
    landmark objects."""
    if not isinstance(landmarks, np.ndarray) and hasattr(landmarks, "landmark"):
        landmarks = landmarks.landmark  # A LandmarkList.
    objects = not isinstance(landmarks, np.ndarray) and len(landmarks) > 0 and \
        hasattr(landmarks[0], "x")
    if objects:
        points = np.array([[p.x, p.y, p.z] for p in landmarks], dtype=float)
        if visibility is None:
            visibility = [getattr(p, "visibility", 1.0) for p in landmarks]
    else:
        points = np.asarray(landmarks, dtype=float)
    if points.shape != (33, 3):
        raise _invalid(f"landmarks: expected 33 points of (x, y, z), got shape {points.shape}")
    bad = np.argwhere(~np.isfinite(points))
    if len(bad):
        i, k = bad[0]
        raise _invalid(f"landmarks[{i}][{k}] = {points[i, k]} is not finite")
    seen = np.ones(33) if visibility is None else np.asarray(visibility, dtype=float)
    if seen.shape != (33,):
        raise _invalid(f"visibility: expected 33 values, got shape {seen.shape}")
    if not np.all(np.isfinite(seen)):
        raise _invalid(f"visibility[{int(np.argwhere(~np.isfinite(seen))[0][0])}] is not finite")
    return points, np.clip(seen, 0.0, 1.0)
