"""Checks a .blend that examples/blender/drive_rig.py saved (CTest
blender.addon), inside Blender, against the server and by itself:

- Blender's own evaluation of the keyed Action (the pose bones' heads,
  Blender's forward kinematics) puts every bone where the service's
  answer does (RetargetBatch of the same clip with the profile the add-on
  made, return_globals), to 1e-4 of the body's height; hands and feet
  are reported on their own. The axis change is written here again
  (service (x, y, z) = Blender (x, z, -y)), not taken from the add-on.
- Every frame the character is upright in Blender: the head above both
  feet along +Z, and the armature's height (its bones' extent along +Z)
  within 7 % of the rest pose's (the body height below; the walk keeps
  0.945..1.027 of it: at the end of a stance the retargeter lifts the
  back foot, held where it landed, off the floor rather than let it
  slide after the source's ankle, which rolls forward over the toe).
- Knees bend forward: where a leg bends, its knee lies in front of the
  hip-ankle line (front: the hips' left-to-right axis turned about +Z);
  elbows the other way, behind the shoulder-wrist line.
- The rendered PNG is not empty and is a standing figure (taller than wide).

    blender -b OUT.blend --python-exit-code 1 --python check_walk.py -- \\
        --clip CLIP.bvh --first 1 --addr HOST:PORT [--png walk.png]
"""
import argparse
import json
import math
import sys

import bpy
import mathutils
import numpy as np

import reach


def fail(message):
    print(f"check_walk: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def to_service(world, scale_length):
    """Blender world (Z-up) -> the service's Y-up metres."""
    return np.array([world.x, world.z, -world.y]) * scale_length


def main():
    argv = sys.argv[sys.argv.index("--") + 1:]
    parser = argparse.ArgumentParser()
    parser.add_argument("--clip", required=True)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--addr", required=True)
    parser.add_argument("--png", default="")
    args = parser.parse_args(argv)

    scene = bpy.context.scene
    unit = scene.unit_settings.scale_length
    obj = next(o for o in scene.objects if o.type == "ARMATURE" and "reach_profile_id" in o)
    roles = json.loads(obj["reach_roles"])
    names = [b.name for b in obj.data.bones]
    frames = list(range(scene.frame_start, scene.frame_end + 1))
    world = obj.matrix_world

    with reach.Client(args.addr) as client:
        clip = client.import_file(args.clip, return_motion=True)
        rotations = clip.motion[args.first:args.first + len(frames)]
        roots = clip.root_translations[args.first:args.first + len(frames)]
        if len(rotations) != len(frames):
            fail(f"{len(frames)} frames keyed, the clip has {len(rotations)} from {args.first}")
        answer = client.retarget_batch(obj["reach_profile_id"], rotations, roots,
                                       frame_time_s=clip.frame_time_s, return_globals=True)
    if answer.iterations.min() <= 0:
        fail("the service left frames unsolved (iterations 0): raise --max_solve_ms")
    service_index = [answer.joint(n) for n in names]

    # The rest pose's height (head joint above the lower foot joint, +Z).
    rest_z = {n: (world @ obj.data.bones[n].head_local).z for n in names}
    head, feet = roles["head"], (roles["left.foot"], roles["right.foot"])
    rest_height = (rest_z[head] - min(rest_z[f] for f in feet)) * unit
    ends = [world @ p for b in obj.data.bones for p in (b.head_local, b.tail_local)]
    rest_extent = (max(p.z for p in ends) - min(p.z for p in ends)) * unit
    extents = []
    if rest_height <= 0:
        fail(f"rest pose: head {head} is not above the feet")
    body = rest_extent
    limbs = [roles[r] for r in ("left.hand", "right.hand", "left.foot", "right.foot")]

    worst_all = worst_limbs = 0.0
    heights = []
    knee_angles = []
    elbow_angles = []
    knee_worst_offset = math.inf
    for k, f in enumerate(frames):
        scene.frame_set(f)
        pose = obj.pose.bones
        at = {n: world @ pose[n].head for n in names}
        blender = np.array([to_service(at[n], unit) for n in names])
        service = answer.global_positions[k][service_index]
        err = np.linalg.norm(blender - service, axis=1)
        worst_all = max(worst_all, err.max())
        worst_limbs = max(worst_limbs, max(err[names.index(n)] for n in limbs))

        for foot in feet:
            if not at[head].z > at[foot].z:
                fail(f"frame {f}: head {at[head].z:.4f} not above {foot} {at[foot].z:.4f} (+Z)")
        height = (at[head].z - min(at[foot].z for foot in feet)) * unit
        heights.append(height / rest_height)
        ends = [world @ p for n in names for p in (pose[n].head, pose[n].tail)]
        extents.append((max(p.z for p in ends) - min(p.z for p in ends)) * unit / rest_extent)

        left = at[roles["left.thigh"]] - at[roles["right.thigh"]]
        front = left.cross(mathutils.Vector((0.0, 0.0, 1.0)))
        front.z = 0.0
        front.normalize()
        for side in ("left", "right"):
            hip, knee, ankle = (at[roles[f"{side}.{p}"]] for p in ("thigh", "shin", "foot"))
            axis = (ankle - hip).normalized()
            off = (knee - hip) - axis * (knee - hip).dot(axis)   # knee off the hip-ankle line
            bend = math.degrees((knee - hip).angle(ankle - knee))
            if bend > 10.0:
                # The bend's direction seen from above the leg: its angle to the front.
                flat = off - axis * off.dot(axis)
                fr = front - axis * front.dot(axis)
                knee_angles.append(math.degrees(flat.angle(fr)))
            knee_worst_offset = min(knee_worst_offset, off.dot(front) / body)
        for side in ("left", "right"):
            shoulder, elbow, wrist = (at[roles[f"{side}.{p}"]]
                                      for p in ("upper_arm", "forearm", "hand"))
            axis = (wrist - shoulder).normalized()
            off = (elbow - shoulder) - axis * (elbow - shoulder).dot(axis)
            if math.degrees((elbow - shoulder).angle(wrist - elbow)) > 10.0:
                back = -front - axis * (-front).dot(axis)
                elbow_angles.append(math.degrees(off.angle(back)))

    heights = np.array(heights)
    print(f"check_walk: {len(frames)} frames, body height {body:.4f} m")
    print(f"check_walk: Blender's pose bones vs the service: worst {worst_all / body:.2e} of the "
          f"height over all {len(names)} bones, {worst_limbs / body:.2e} for hands and feet")
    print(f"check_walk: height {heights.min():.4f}..{heights.max():.4f} of the rest pose's "
          f"(head joint over the lower foot joint); the bones' extent along +Z "
          f"{min(extents):.4f}..{max(extents):.4f} of the rest pose's ({rest_extent:.4f} m)")
    print(f"check_walk: knees bent > 10 deg in {len(knee_angles)} leg-frames, bend direction "
          f"within {max(knee_angles, default=0):.1f} deg of the front; lowest knee offset "
          f"along the front {knee_worst_offset:+.4f} of the height")
    print(f"check_walk: elbows bent > 10 deg in {len(elbow_angles)} arm-frames, elbow within "
          f"{max(elbow_angles, default=0):.1f} deg of the back")
    if worst_limbs > 1e-4 * body or worst_all > 1e-4 * body:
        fail("Blender's pose differs from the service's answer by more than 1e-4 of the height")
    if min(extents) < 0.93 or max(extents) > 1.07:
        fail("the armature's height leaves 7 % of the rest pose's")
    if not knee_angles:
        fail("no frame bends a knee")
    if max(knee_angles) > 60.0:
        fail("a knee bends more than 60 degrees away from the front")
    if not elbow_angles or max(elbow_angles) >= 90.0:
        fail("an elbow bends forward (the bend is 90 degrees or more from the back)")
    if knee_worst_offset < -0.01:
        fail("a knee lies behind its hip-ankle line")

    if args.png:
        image = bpy.data.images.load(args.png)
        w, h = image.size
        px = np.empty(w * h * 4, dtype=np.float32)
        image.pixels.foreach_get(px)
        alpha = px.reshape(h, w, 4)[:, :, 3] > 0.5
        covered = alpha.mean()
        rows, cols = np.nonzero(alpha.any(axis=1))[0], np.nonzero(alpha.any(axis=0))[0]
        if covered < 0.02:
            fail(f"{args.png}: only {covered:.1%} of the picture is covered")
        tall, wide = rows[-1] - rows[0] + 1, cols[-1] - cols[0] + 1
        print(f"check_walk: {args.png} {w}x{h}: {covered:.1%} covered, figure {wide}x{tall} px")
        if tall < 1.5 * wide:
            fail(f"{args.png}: the figure is {wide} px wide and {tall} px tall: not standing")
    print("check_walk: ok")


main()
