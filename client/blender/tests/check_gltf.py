"""Checks a .blend that drive_rig.py made from a glTF clip of the same rig
(CTest blender.addon): the BCN character's walk, which `reach retarget
--out X.glb` wrote into a copy of its file, retargeted by the add-on
onto the BCN armature again. Same rig on both sides, so the transfer is
the identity: pelvis, head and hands must come back where the clip has
them (to 1e-4 of the height), and the feet within 3 % (the server plants
them anew, at the 24 fps the clip is sampled at, not the 120 fps it was
planted at). Positions are Blender's own evaluation of both armatures:
the clip's imported by Blender's glTF importer here, with no add-on code.

    blender -b OUT.blend --python-exit-code 1 --python check_gltf.py -- CLIP.glb ANIMATION
"""
import sys

import bpy
import numpy as np

if "bool" not in np.__dict__:  # Debian's Blender 3.4 importer with NumPy 1.24.
    np.bool = bool


def main():
    clip, animation = sys.argv[sys.argv.index("--") + 1:]
    scene = bpy.context.scene
    target = next(o for o in scene.objects if o.type == "ARMATURE" and "reach_profile_id" in o)
    roles = __import__("json").loads(target["reach_roles"])
    before = set(bpy.data.objects)
    bpy.ops.import_scene.gltf(filepath=clip)
    source = next(o for o in bpy.data.objects if o not in before and o.type == "ARMATURE")
    data = source.animation_data
    data.action = data.nla_tracks[animation].strips[0].action
    for track in data.nla_tracks:
        track.mute = True
    ends = [target.matrix_world @ p for b in target.data.bones for p in (b.head_local, b.tail_local)]
    height = max(p.z for p in ends) - min(p.z for p in ends)
    exact = [roles[r] for r in ("pelvis", "head", "left.hand", "right.hand")]
    feet = [roles[r] for r in ("left.foot", "right.foot")]
    worst = {n: 0.0 for n in exact + feet}
    first, last = (int(round(x)) for x in data.action.frame_range)
    frames = list(range(scene.frame_start, scene.frame_end + 1))
    if len(frames) != last - first + 1:
        sys.exit(f"check_gltf: FAIL: {len(frames)} frames keyed, the clip has {last - first + 1}")
    for k, f in enumerate(frames):
        scene.frame_set(f)
        driven = {n: target.matrix_world @ target.pose.bones[n].head for n in worst}
        scene.frame_set(first + k)
        played = {n: source.matrix_world @ source.pose.bones[n].head for n in worst}
        for n in worst:
            worst[n] = max(worst[n], (driven[n] - played[n]).length / height)
    print(f"check_gltf: {len(frames)} frames; driven vs the clip, worst of the height: "
          + ", ".join(f"{n} {v:.1e}" for n, v in worst.items()))
    if max(worst[n] for n in exact) > 1e-4 or max(worst[n] for n in feet) > 0.03:
        sys.exit("check_gltf: FAIL: the driven armature does not play the clip")
    print("check_gltf: ok")


main()
