#!/usr/bin/python3
"""Streams a BVH clip through the server: the server imports the file
(ImportSkeleton, with its motion), then every frame goes to SolveStream with
the clip's body as the start pose, each chain's joints back at rest, and the
chain tips' positions in the clip as goals; prints the position error and
how far the solved limbs are from the mocap's own.

    PYTHONPATH=build/python-site examples/python/stream_bvh.py tests/data/mocap/cmu_02_01_walk.bvh
"""
import argparse
import os
import sys
import time

import numpy as np

import reach


def quat_mul(a, b):
    w1, x1, y1, z1 = np.moveaxis(a, -1, 0)
    w2, x2, y2, z2 = np.moveaxis(b, -1, 0)
    return np.stack([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
                     w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
                     w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2], axis=-1)


def rotate(q, v):
    qv = np.concatenate([[0.0], v])
    return quat_mul(quat_mul(q, qv), q * np.array([1, -1, -1, -1]))[1:]


def positions(skeleton, rotations, root_translation):
    """Model-space joint positions of a pose (local rotations, the root's
    translation), by forward kinematics."""
    joints = skeleton["joints"]
    pos = np.zeros((len(joints), 3))
    rot = np.zeros((len(joints), 4))
    for i, joint in enumerate(joints):
        parent = joint.get("parent", 0)
        offset = np.array([joint["rest"].get("translation", {}).get(k, 0.0) for k in "xyz"])
        if parent < 0:
            pos[i], rot[i] = root_translation, rotations[i]
        else:
            pos[i] = pos[parent] + rotate(rot[parent], offset)
            rot[i] = quat_mul(rot[parent], rotations[i])
    return pos


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bvh")
    parser.add_argument("--addr", default="127.0.0.1:50051")
    parser.add_argument("--token", default=None)
    parser.add_argument("--tls-ca", default=None)
    parser.add_argument("--frames", type=int, default=0, help="0: the whole clip")
    args = parser.parse_args()
    tls = reach.TLS(ca=args.tls_ca) if args.tls_ca else None
    try:
        with reach.Client(args.addr, token=args.token, tls=tls) as client:
            clip = client.import_file(args.bvh, return_motion=True)
            skeleton = clip.skeleton
            names = [j["name"] for j in skeleton["joints"]]
            chains = {c["name"]: (names.index(c["root"]), names.index(c["tip"]))
                      for c in skeleton["chains"]}
            parents = [j.get("parent", 0) for j in skeleton["joints"]]

            def chain_joints(root, tip):
                out = [tip]
                while out[-1] != root:
                    out.append(parents[out[-1]])
                return out

            limb = sorted({j for root, tip in chains.values() for j in chain_joints(root, tip)})
            frames = len(clip.motion) if args.frames <= 0 else min(args.frames, len(clip.motion))
            print(f"imported {os.path.basename(args.bvh)}: {len(names)} joints, chains "
                  f"{sorted(chains)}, {len(clip.motion)} frames at {1 / clip.frame_time_s:.0f} fps")
            worst = 0.0
            worst_angle = 0.0
            start = time.perf_counter()
            with client.stream(clip.skeleton_id, window=8) as stream:
                sent = []
                for f in range(frames):
                    mocap = clip.motion[f]
                    pos = positions(skeleton, mocap, clip.root_translations[f])
                    start_pose = np.array(mocap, copy=True)
                    start_pose[limb] = (1.0, 0.0, 0.0, 0.0)  # The limbs at rest.
                    goals = [{"chain": name, "target": tuple(pos[tip])}
                             for name, (root, tip) in chains.items()]
                    stream.send(goals, start_pose={"rotations": start_pose,
                                                   "root_translation": tuple(clip.root_translations[f])})
                    sent.append((f, start_pose))
                    while stream.in_flight() >= 8 or (f == frames - 1 and stream.in_flight()):
                        answer = next(stream)
                        frame, frame_start = sent.pop(0)
                        if answer.error is not None:
                            raise answer.error
                        worst = max(worst, *(r.position_error for r in answer.results))
                        solved = answer.apply(frame_start)
                        dots = np.abs(np.sum(solved[limb] * clip.motion[frame][limb], axis=1))
                        worst_angle = max(worst_angle,
                                          np.degrees(2 * np.arccos(np.clip(dots, 0, 1))).max())
            seconds = time.perf_counter() - start
    except reach.ReachError as e:
        print(f"stream_bvh: {e}", file=sys.stderr)
        return 1
    print(f"{frames} frames in {seconds:.2f} s ({frames / seconds:.0f} frames/s): worst tip "
          f"error {worst:.2e}, limbs at most {worst_angle:.1f} degrees from the mocap's "
          "(IK picks its own elbows and knees: no poles given)")
    return 0



if __name__ == "__main__":
    sys.exit(main())
