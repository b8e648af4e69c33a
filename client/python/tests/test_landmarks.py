"""reach.landmarks (issue 44, item 3): MediaPipe Pose world landmarks made
here from the CMU walk's joints (the test's own forward kinematics; metres,
origin between the hips, MediaPipe's y-down camera axes) with 1 cm of
noise, streamed as full-body goals; the answers, by the test's own forward
kinematics, keep the hands and feet within 3 cm of the performer's."""
import json
import os

import numpy as np
import pytest

import reach
import snippets
from reach.landmarks import CMU_JOINTS, MEDIAPIPE_POSE, Y_UP, PoseLandmarks

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
WALK = os.path.join(REPO, "tests", "data", "mocap", "cmu_02_01_walk.bvh")
METRES_PER_UNIT = 0.0254 / 0.45  # CMU's units: 1/0.45 inch.


def qmul(a, b):
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def qrot(q, v):
    p = qmul(qmul(q, np.array([0.0, *v])), q * np.array([1.0, -1.0, -1.0, -1.0]))
    return p[1:]


def vec(d, keys="xyz"):
    return np.array([float(d.get(k, 0.0)) for k in keys])


class Body:
    """The skeleton as the server describes it, and forward kinematics."""

    def __init__(self, skeleton):
        joints = skeleton["joints"]
        self.names = [j["name"] for j in joints]
        self.parent = [int(j.get("parent", 0)) if i else -1 for i, j in enumerate(joints)]
        self.offset = [vec(j["rest"].get("translation", {})) for j in joints]
        self.scale = [float(j["rest"].get("scale", 1.0)) for j in joints]

    def index(self, name):
        return self.names.index(name)

    def positions(self, rotations, root):
        """Model-space joint positions of local rotations (w, x, y, z) and
        the root's translation."""
        n = len(self.names)
        pos, rot, scale = np.zeros((n, 3)), np.zeros((n, 4)), np.ones(n)
        for j in range(n):
            q = np.asarray(rotations[j], dtype=float)
            p = self.parent[j]
            if p < 0:
                pos[j], rot[j], scale[j] = root, q, self.scale[j]
            else:
                pos[j] = pos[p] + scale[p] * qrot(rot[p], self.offset[j])
                rot[j] = qmul(rot[p], q)
                scale[j] = scale[p] * self.scale[j]
        return pos, rot


def landmarks_of(body, pos, rot, rng):
    """A MediaPipe frame (33, 3) in metres from the performer's joints:
    origin between the hip sockets, x the image's right (the performer's
    left), y down, z away from the camera (Y_UP's inverse), 1 cm noise;
    and the hips' centre in model space."""
    at = {role: pos[body.index(name)] for role, name in CMU_JOINTS.items()}
    for role, joint in (("left_elbow", "LeftForeArm"), ("right_elbow", "RightForeArm"),
                        ("left_knee", "LeftLeg"), ("right_knee", "RightLeg")):
        at[role] = pos[body.index(joint)]
    head = body.index("Head")
    across = qrot(rot[head], np.array([1.0, 0.0, 0.0])) * 0.07 / METRES_PER_UNIT
    points = {
        "left_hip": at["left_hip"], "right_hip": at["right_hip"],
        "left_ankle": at["left_foot"], "right_ankle": at["right_foot"],
        "left_knee": at["left_knee"], "right_knee": at["right_knee"],
        "left_shoulder": at["left_shoulder"], "right_shoulder": at["right_shoulder"],
        "left_elbow": at["left_elbow"], "right_elbow": at["right_elbow"],
        "left_wrist": at["left_hand"], "right_wrist": at["right_hand"],
        "left_ear": at["head"] + across, "right_ear": at["head"] - across,
    }
    centre = 0.5 * (at["left_hip"] + at["right_hip"])
    frame = np.tile((pos[head] - centre), (33, 1))  # Landmarks not used: the head.
    for name, p in points.items():
        frame[MEDIAPIPE_POSE[name]] = p - centre
    frame = (frame * METRES_PER_UNIT) @ np.asarray(Y_UP)  # Model -> MediaPipe axes.
    # 1 cm of noise (root mean square of its length).
    return frame + rng.normal(0.0, 0.01 / np.sqrt(3.0), frame.shape), centre


def bend(limb):
    """The middle joint's offset from the line between the ends."""
    root, mid, tip = limb
    line = (tip - root) / np.linalg.norm(tip - root)
    off = mid - root
    return off - off.dot(line) * line


def angle(a, b):
    return float(np.arccos(np.clip(a.dot(b) / (np.linalg.norm(a) * np.linalg.norm(b)), -1.0, 1.0)))


@pytest.fixture(scope="module")
def walk(client):
    return client.import_file(WALK, return_motion=True)


def test_a_landmark_session_keeps_hands_and_feet_within_3_cm(client, walk):
    body = Body(walk.skeleton)
    adapter = PoseLandmarks(CMU_JOINTS, scale=1.0 / METRES_PER_UNIT)
    rng = np.random.default_rng(44)
    ends = [body.index(CMU_JOINTS[r]) for r in ("left_hand", "right_hand", "left_foot", "right_foot")]
    legs = [[body.index(CMU_JOINTS[f"{side}_hip"]), body.index(knee), body.index(CMU_JOINTS[f"{side}_foot"])]
            for side, knee in (("left", "LeftLeg"), ("right", "RightLeg"))]
    frames = range(1, walk.motion.shape[0])
    truth, sent = [], []
    for f in frames:
        pos, rot = body.positions(walk.motion[f], walk.root_translations[f])
        landmarks, centre = landmarks_of(body, pos, rot, rng)
        visibility = np.full(33, 0.9)
        sent.append(adapter.goals(landmarks, visibility, origin=centre))
        truth.append(pos)

    pose = np.tile([1.0, 0.0, 0.0, 0.0], (len(body.names), 1))
    root = np.zeros(3)
    worst = knee_worst = 0.0
    bent, angles = 0, []
    with client.stream(walk.skeleton_id, window=8) as stream:
        for goals in sent:
            stream.send(goals)
        answers = list(stream)
    assert len(answers) == len(sent)
    for k, answer in enumerate(answers):
        assert answer.error is None, answer.error
        for j, q in zip(answer.rotated_joints, answer.rotations):
            pose[j] = q
        for j, t in zip(answer.translated_joints, answer.translations):
            assert j == 0
            root = np.asarray(t)
        pos, _ = body.positions(pose, root)
        off = np.linalg.norm(pos[ends] - truth[k][ends], axis=1) * METRES_PER_UNIT
        worst = max(worst, float(off.max()))
        for leg in legs:
            want, got = bend(truth[k][leg]), bend(pos[leg])
            thigh = np.linalg.norm(truth[k][leg[1]] - truth[k][leg[0]])
            # A knee clearly bent in both (a leg the noise straightens has
            # no side).
            if np.linalg.norm(want) > 0.1 * thigh and np.linalg.norm(got) > 0.02 * thigh:
                bent += 1
                angles.append(angle(want, got))
                knee_worst = max(knee_worst, angles[-1])
    median = float(np.median(angles))
    print(f"hands and feet: worst {100 * worst:.2f} cm off the performer's over {len(sent)} "
          f"frames; knees bent {np.degrees(median):.1f} deg (median), "
          f"{np.degrees(knee_worst):.1f} deg at most from the performer's side "
          f"({bent} bent knee-frames)")
    assert worst <= 0.03
    # The knees bend to the performer's side (the knee landmarks are the
    # feet's poles), never the other way (a flip is 90 degrees or more off;
    # the noise on a nearly straight leg turns its bend by up to 70).
    assert bent > 100
    assert knee_worst < np.radians(90.0)
    assert median <= np.radians(15.0)


def test_goals_follow_the_landmarks_and_their_visibility():
    adapter = PoseLandmarks({"left_hand": "LeftHand", "head": "Head", "left_foot": "LeftFoot"},
                            scale=2.0, origin=(0.0, 10.0, 0.0), min_visibility=0.5)
    frame = np.zeros((33, 3))
    frame[MEDIAPIPE_POSE["left_wrist"]] = (0.1, -0.2, 0.3)  # Left, up, away from the camera.
    frame[MEDIAPIPE_POSE["left_elbow"]] = (0.2, -0.3, 0.4)
    frame[MEDIAPIPE_POSE["left_ear"]] = (0.05, -0.6, 0.0)
    frame[MEDIAPIPE_POSE["right_ear"]] = (-0.05, -0.6, 0.0)
    seen = np.full(33, 0.8)
    seen[MEDIAPIPE_POSE["left_ankle"]] = 0.2  # A hidden foot gives no goal.
    goals = {g["tip_joint"]: g for g in adapter.goals(frame, seen)}
    assert sorted(goals) == ["Head", "LeftHand"]
    hand = goals["LeftHand"]
    # Y-up: (x, -y, -z), times 2, from (0, 10, 0).
    assert np.allclose(hand["target"], (0.2, 10.4, -0.6))
    assert np.allclose(hand["pole"], (0.4, 10.6, -0.8))
    assert hand["weight"] == pytest.approx(0.8) and hand["priority"] == 1
    assert hand["solver"] == "full_body"
    assert np.allclose(goals["Head"]["target"], (0.0, 11.2, 0.0))


def test_bad_input_names_the_field():
    with pytest.raises(reach.ReachError, match="joints: unknown role 'left_paw'"):
        PoseLandmarks({"left_paw": "X"})
    with pytest.raises(reach.ReachError, match="scale: must be a finite number > 0"):
        PoseLandmarks(CMU_JOINTS, scale=0)
    with pytest.raises(reach.ReachError, match="axes: not a rotation"):
        PoseLandmarks(CMU_JOINTS, axes=np.diag([1.0, 1.0, -1.0]))
    adapter = PoseLandmarks(CMU_JOINTS)
    with pytest.raises(reach.ReachError, match=r"landmarks: expected 33 points .* shape \(17, 3\)"):
        adapter.goals(np.zeros((17, 3)))
    bad = np.zeros((33, 3))
    bad[15, 1] = np.nan
    with pytest.raises(reach.ReachError, match=r"landmarks\[15\]\[1\] = nan is not finite"):
        adapter.goals(bad)
    with pytest.raises(reach.ReachError, match="origin: expected 3 finite numbers"):
        adapter.goals(np.zeros((33, 3)), origin=(0, 1))


def test_mediapipe_landmark_objects():
    """MediaPipe's own result objects (a list of landmarks with x, y, z and
    visibility) are taken as they are."""
    class Landmark:
        def __init__(self, x, y, z, visibility):
            self.x, self.y, self.z, self.visibility = x, y, z, visibility

    points = [Landmark(0.01 * i, -0.02 * i, 0.0, 0.9 if i != 16 else 0.1) for i in range(33)]
    goals = PoseLandmarks(CMU_JOINTS).goals(points)
    names = {g["tip_joint"] for g in goals}
    assert "RightHand" not in names and "LeftHand" in names
    left = next(g for g in goals if g["tip_joint"] == "LeftHand")
    assert np.allclose(left["target"], (0.15, 0.30, 0.0))


@pytest.mark.timeout(120)
def test_docstring_example_runs_as_written(server):
    import reach.landmarks
    (code,) = snippets.python_blocks(reach.landmarks.__doc__)
    out = snippets.run(code, server.address)
    assert out.startswith("86 frames, goals at most")


@pytest.mark.timeout(120)
def test_the_recording_is_what_its_script_makes(server, tmp_path):
    """examples/python/walk_landmarks.jsonl is record_landmarks.py's
    output (--every 4), so the example's data can be made again."""
    import subprocess
    import sys
    import reach as package
    out = tmp_path / "walk.jsonl"
    env = dict(os.environ, REACH_ADDRESS=server.address,
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(package.__file__))))
    subprocess.run([sys.executable, os.path.join(REPO, "examples", "python", "record_landmarks.py"),
                    WALK, str(out), "--every", "4"], check=True, env=env, timeout=60)
    with open(os.path.join(REPO, "examples", "python", "walk_landmarks.jsonl")) as f:
        committed = [json.loads(line) for line in f]
    made = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(made) == len(committed) == 86
    for a, b in zip(made, committed):
        assert np.allclose(a["landmarks"], b["landmarks"], atol=2e-4)
        assert a["visibility"] == b["visibility"]
