"""Poses a Blender armature from a Reach stream.

The server imports a BVH clip (with its motion); this script builds an
armature from the imported skeleton, streams the clip's frames through
SolveStream (the clip's body as the start pose, the limbs at rest, the
clip's hand and foot positions as goals, as stream_bvh.py does) and keys
every solved pose on the armature. It then checks itself: Blender's own
evaluation of the posed bones must put every joint where forward kinematics
of the solved pose does.

    blender -b --python-exit-code 1 --python examples/python/blender_pose.py -- \\
        tests/data/mocap/cmu_02_01_walk.bvh [--addr 127.0.0.1:50051] \\
        [--frames N] [--out walk.blend]

Debian's Blender runs on the system Python: install the `reach` package
with pip (--user), or put it on PYTHONPATH (build/python-site). Official
Blender builds bundle their own Python: see the README's Python section.
"""
import argparse
import os
import sys

import bpy
import mathutils
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import reach  # noqa: E402
from stream_bvh import positions  # noqa: E402  (forward kinematics)


def build_armature(skeleton, rest):
    """An armature whose bone i starts at joint i and points at its first
    child; returns the object and each bone's rest rotation in armature
    space."""
    joints = skeleton["joints"]
    parents = [j.get("parent", 0) for j in joints]
    children = {}
    for i, p in enumerate(parents):
        children.setdefault(p, []).append(i)
    armature = bpy.data.armatures.new("reach")
    obj = bpy.data.objects.new("reach", armature)
    bpy.context.collection.objects.link(obj)
    bpy.context.view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    bones = []
    for i, joint in enumerate(joints):
        bone = armature.edit_bones.new(joint["name"])
        head = rest[i]
        tail = None
        for c in children.get(i, []):
            if np.linalg.norm(rest[c] - head) > 1e-6:
                tail = rest[c]
                break
        if tail is None:  # A leaf: continue the parent's direction.
            p = parents[i]
            direction = head - rest[p] if p >= 0 else np.array([0.0, 1.0, 0.0])
            length = np.linalg.norm(direction)
            direction = direction / length if length > 1e-6 else np.array([0.0, 1.0, 0.0])
            tail = head + 0.05 * direction
        bone.head = mathutils.Vector(head)
        bone.tail = mathutils.Vector(tail)
        if parents[i] >= 0:
            bone.parent = bones[parents[i]]
        bones.append(bone)
    bpy.ops.object.mode_set(mode="OBJECT")
    rest_rotations = [armature.bones[j["name"]].matrix_local.to_quaternion() for j in joints]
    return obj, rest_rotations


def key_pose(obj, skeleton, rest_rotations, rotations, root_translation, rest_root, frame):
    """Keys `rotations` (local, the joints' parent frames) on the armature:
    a pose bone's rotation is in its own rest frame B, so it is
    B^-1 * local * B; the root's location likewise."""
    for i, joint in enumerate(skeleton["joints"]):
        pose_bone = obj.pose.bones[joint["name"]]
        pose_bone.rotation_mode = "QUATERNION"
        b = rest_rotations[i]
        local = mathutils.Quaternion(tuple(rotations[i]))
        pose_bone.rotation_quaternion = b.inverted() @ local @ b
        pose_bone.keyframe_insert("rotation_quaternion", frame=frame)
        if i == 0:
            offset = mathutils.Vector(tuple(np.asarray(root_translation) - rest_root))
            pose_bone.location = b.inverted() @ offset
            pose_bone.keyframe_insert("location", frame=frame)


def main():
    argv = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else []
    parser = argparse.ArgumentParser(prog="blender_pose.py", description=__doc__.splitlines()[0])
    parser.add_argument("bvh")
    parser.add_argument("--addr", default="127.0.0.1:50051")
    parser.add_argument("--token", default=None)
    parser.add_argument("--tls-ca", default=None)
    parser.add_argument("--frames", type=int, default=0, help="0: the whole clip")
    parser.add_argument("--out", default="", help="save the .blend here")
    args = parser.parse_args(argv)
    tls = reach.TLS(ca=args.tls_ca) if args.tls_ca else None

    # An empty scene.
    bpy.ops.wm.read_factory_settings(use_empty=True)
    with reach.Client(args.addr, token=args.token, tls=tls) as client:
        clip = client.import_file(args.bvh, return_motion=True)
        skeleton = clip.skeleton
        joints = skeleton["joints"]
        names = [j["name"] for j in joints]
        parents = [j.get("parent", 0) for j in joints]
        identity = np.tile([1.0, 0.0, 0.0, 0.0], (len(joints), 1))
        rest_root = np.array([joints[0]["rest"].get("translation", {}).get(k, 0.0) for k in "xyz"])
        rest = positions(skeleton, identity, rest_root)
        obj, rest_rotations = build_armature(skeleton, rest)

        limb = set()
        for chain in skeleton["chains"]:
            j = names.index(chain["tip"])
            limb.add(j)
            while j != names.index(chain["root"]):
                j = parents[j]
                limb.add(j)
        limb = sorted(limb)
        frames = len(clip.motion) if args.frames <= 0 else min(args.frames, len(clip.motion))
        scene = bpy.context.scene
        scene.frame_start, scene.frame_end = 1, frames
        scene.render.fps = round(1 / clip.frame_time_s) if clip.frame_time_s > 0 else 30

        solved_last = None
        with client.stream(clip.skeleton_id, window=8) as stream:
            pending = []
            for f in range(frames):
                start = np.array(clip.motion[f], copy=True)
                start[limb] = (1.0, 0.0, 0.0, 0.0)
                targets = positions(skeleton, clip.motion[f], clip.root_translations[f])
                goals = [{"chain": c["name"], "target": tuple(targets[names.index(c["tip"])])}
                         for c in skeleton["chains"]]
                stream.send(goals, start_pose={"rotations": start,
                                               "root_translation": tuple(clip.root_translations[f])})
                pending.append((f, start))
                while stream.in_flight() >= 8 or (f == frames - 1 and stream.in_flight()):
                    answer = next(stream)
                    frame, frame_start = pending.pop(0)
                    if answer.error is not None:
                        raise answer.error
                    solved = answer.apply(frame_start)
                    key_pose(obj, skeleton, rest_rotations, solved, clip.root_translations[frame],
                             rest_root, frame + 1)
                    solved_last = (frame, solved)

    # Self-check: Blender's evaluation of the last frame against FK.
    frame, solved = solved_last
    scene.frame_set(frame + 1)
    bpy.context.view_layer.update()
    expected = positions(skeleton, solved, clip.root_translations[frame])
    heads = np.array([tuple(obj.pose.bones[n].head) for n in names])
    worst = float(np.max(np.linalg.norm(heads - expected, axis=1)))
    print(f"blender_pose: {frames} frames keyed on armature 'reach' ({len(names)} bones); "
          f"Blender's joints vs forward kinematics at frame {frame + 1}: worst {worst:.2e}")
    if args.out:
        bpy.ops.wm.save_as_mainfile(filepath=os.path.abspath(args.out))
        print(f"blender_pose: saved {args.out}")
    if worst > 1e-4 * max(1.0, float(np.max(np.abs(expected)))):
        print("blender_pose: FAILED: the armature does not follow the solved pose", file=sys.stderr)
        sys.exit(1)


main()
