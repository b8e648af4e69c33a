#!/usr/bin/python3
"""Makes a MediaPipe Pose recording from a CMU BVH clip, for trying
reach.landmarks without a camera: each line of OUT.jsonl is one frame,
{"landmarks": 33 x [x, y, z] world landmarks in metres (origin between the
hips, x the image's right, y down, z away from the camera), "visibility":
33 values}, with the performer facing the camera. Joints stand in for the
landmarks the adapter uses (hips, knees, ankles, shoulders, elbows, wrists;
the ears beside the head joint); the others are put at the head with
visibility 0.

    REACH_ADDRESS=127.0.0.1:50051 examples/python/record_landmarks.py \\
        tests/data/mocap/cmu_02_01_walk.bvh walk_landmarks.jsonl --every 4

The clip is read by a running reach-server (ImportSkeleton with its
motion); the forward kinematics are NumPy's, here.
"""
import argparse
import json
import sys

import numpy as np

import reach
from reach.landmarks import CMU_JOINTS, MEDIAPIPE_POSE, Y_UP

METRES_PER_UNIT = 0.0254 / 0.45  # CMU's units: 1/0.45 inch.
STAND_INS = dict(CMU_JOINTS, left_elbow="LeftForeArm", right_elbow="RightForeArm",
                 left_knee="LeftLeg", right_knee="RightLeg")
LANDMARK_OF = {"left_hip": "left_hip", "right_hip": "right_hip", "left_foot": "left_ankle",
               "right_foot": "right_ankle", "left_knee": "left_knee", "right_knee": "right_knee",
               "left_shoulder": "left_shoulder", "right_shoulder": "right_shoulder",
               "left_elbow": "left_elbow", "right_elbow": "right_elbow",
               "left_hand": "left_wrist", "right_hand": "right_wrist"}


def qmul(a, b):
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def qrot(q, v):
    return qmul(qmul(q, np.array([0.0, *v])), q * np.array([1.0, -1.0, -1.0, -1.0]))[1:]


def forward_kinematics(skeleton, rotations, root):
    """Model-space positions and rotations of every joint."""
    joints = skeleton["joints"]
    n = len(joints)
    pos, rot = np.zeros((n, 3)), np.zeros((n, 4))
    for j, joint in enumerate(joints):
        t = joint["rest"].get("translation", {})
        offset = np.array([float(t.get(k, 0.0)) for k in "xyz"])
        if j == 0:
            pos[j], rot[j] = root, rotations[j]
        else:
            p = int(joint.get("parent", 0))
            pos[j] = pos[p] + qrot(rot[p], offset)
            rot[j] = qmul(rot[p], rotations[j])
    return pos, rot


def frame_landmarks(names, pos, rot, rng, noise_m):
    """One frame's (33, 3) landmarks in metres and visibilities."""
    at = {role: pos[names.index(joint)] for role, joint in STAND_INS.items()}
    head = names.index(CMU_JOINTS["head"])
    across = qrot(rot[head], np.array([1.0, 0.0, 0.0])) * 0.07 / METRES_PER_UNIT
    centre = 0.5 * (at["left_hip"] + at["right_hip"])
    model = np.tile(pos[head], (33, 1))
    visibility = np.zeros(33)
    for role, landmark in LANDMARK_OF.items():
        model[MEDIAPIPE_POSE[landmark]] = at[role]
        visibility[MEDIAPIPE_POSE[landmark]] = 0.95
    for side, sign in (("left", 1.0), ("right", -1.0)):
        model[MEDIAPIPE_POSE[f"{side}_ear"]] = pos[head] + sign * across
        visibility[MEDIAPIPE_POSE[f"{side}_ear"]] = 0.95
    points = ((model - centre) * METRES_PER_UNIT) @ np.asarray(Y_UP)
    points += rng.normal(0.0, noise_m / np.sqrt(3.0), points.shape)
    return points, visibility


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("clip", help="a CMU BVH clip")
    parser.add_argument("out", help="the recording to write (.jsonl)")
    parser.add_argument("--every", type=int, default=1, help="keep every Nth frame")
    parser.add_argument("--noise-cm", type=float, default=1.0,
                        help="root-mean-square noise added to each landmark")
    args = parser.parse_args()
    if args.every < 1 or not args.noise_cm >= 0.0:
        sys.exit("--every must be >= 1 and --noise-cm >= 0")
    rng = np.random.default_rng(44)
    with reach.Client() as client:
        clip = client.import_file(args.clip, return_motion=True)
        if clip.created:
            client.delete(clip.skeleton_id)
    names = [j["name"] for j in clip.skeleton["joints"]]
    with open(args.out, "w") as out:
        for f in range(1, clip.motion.shape[0], args.every):
            pos, rot = forward_kinematics(clip.skeleton, clip.motion[f], clip.root_translations[f])
            points, visibility = frame_landmarks(names, pos, rot, rng, 0.01 * args.noise_cm)
            out.write(json.dumps({"landmarks": np.round(points, 4).tolist(),
                                  "visibility": visibility.tolist()}) + "\n")


if __name__ == "__main__":
    main()
