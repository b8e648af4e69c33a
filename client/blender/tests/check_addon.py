"""The add-on's operators on bad input, and on an armature object that is
moved, turned and scaled (CTest blender.addon), in Blender:

- every refusal is an error that names what is wrong (not connected, no
  armature, a scale that is not uniform, a bone that does not inherit its
  parent's rotation, a missing or unknown clip, a first frame past the
  clip, an unknown glTF animation, an address with no server, a CA file
  that is not there), and a refused glTF clip leaves nothing behind;
- BCN's bones turned Y-up inside the armature (as an FBX import has
  them) and its object turned back (+90 degrees about X), moved by
  (1, -2, 0.5), turned 30 degrees about +Z and scaled 0.5, in a scene
  whose unit scale is 3 metres (so 1.5 times its height in
  metres): driven with 40 frames of the walk and saved to OUT.blend, which
  check_walk.py checks like the others (the service's frame includes the
  object's transform and the units).

    blender -b --addons reach_blender --python-exit-code 1 --python check_addon.py -- \\
        RIG.glb CLIP.bvh GLTF_CLIP.glb ADDRESS OUT.blend
"""
import math
import sys

import bpy
import mathutils


def expect_error(op, needle, **kwargs):
    try:
        result = op(**kwargs)
    except RuntimeError as e:
        message = str(e)
    else:
        sys.exit(f"check_addon: FAIL: {op.idname_py()} gave {result}, not an error about {needle!r}")
    if needle not in message:
        sys.exit(f"check_addon: FAIL: {op.idname_py()}: {message!r} does not say {needle!r}")
    print(f"check_addon: {op.idname_py()} refused: {message.strip().splitlines()[-1]}")


def main():
    rig, clip, gltf_clip, address, out = sys.argv[sys.argv.index("--") + 1:]
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.preferences.addon_enable(module="reach_blender")
    scene = bpy.context.scene
    s = scene.reach
    ops = bpy.ops.reach

    expect_error(ops.register_armature, "not connected")
    s.address = "127.0.0.1:9"
    expect_error(ops.connect, "127.0.0.1:9")
    s.use_tls, s.tls_ca = True, "/nonexistent/ca.crt"
    expect_error(ops.connect, "TLS: tls.ca: cannot read '/nonexistent/ca.crt'")
    s.use_tls, s.tls_ca = False, ""
    s.address = address
    ops.connect()
    expect_error(ops.register_armature, "select an armature")

    bpy.ops.import_scene.gltf(filepath=rig)
    obj = next(o for o in scene.objects if o.type == "ARMATURE")
    for o in scene.objects:
        o.select_set(o == obj)
    bpy.context.view_layer.objects.active = obj

    obj.scale = (1.0, 1.0, 2.0)
    expect_error(ops.register_armature, "armature object scale")
    obj.scale = (1.0, 1.0, 1.0)
    obj.data.bones["B_Knee_Left"].use_inherit_rotation = False
    expect_error(ops.register_armature, "'B_Knee_Left' does not inherit its parent's rotation")
    obj.data.bones["B_Knee_Left"].use_inherit_rotation = True

    expect_error(ops.retarget, "clip: choose")
    s.clip = "/nonexistent/walk.bvh"
    expect_error(ops.retarget, "no such file")
    s.clip = __file__
    expect_error(ops.retarget, "not a .bvh, .glb or .gltf")
    s.clip = clip
    s.first_frame = 100000
    expect_error(ops.retarget, "first frame 100000")
    s.first_frame = 0
    s.clip = gltf_clip
    s.clip_animation = "no such animation"
    objects, actions = len(bpy.data.objects), len(bpy.data.actions)
    expect_error(ops.retarget, "clip animation 'no such animation'")
    if (len(bpy.data.objects), len(bpy.data.actions)) != (objects, actions):
        sys.exit("check_addon: FAIL: a refused glTF clip left its objects behind")
    s.clip_animation = ""

    # Moved, turned, scaled, and other units; and Y-up inside, as an FBX
    # import is: the bones turned -90 degrees about X in the armature's own
    # space and the object +90 degrees, so the character stands as before.
    bpy.ops.object.mode_set(mode="EDIT")
    for bone in obj.data.edit_bones:
        bone.transform(mathutils.Matrix.Rotation(-math.pi / 2, 4, "X"))
    bpy.ops.object.mode_set(mode="OBJECT")
    if abs(obj.data.bones["B_Neck"].head_local.y - obj.data.bones["B_Ankle_Left"].head_local.y) < 1.0:
        sys.exit("check_addon: FAIL: the armature's own space is not Y-up")
    obj.location = (1.0, -2.0, 0.5)
    obj.rotation_mode = "XYZ"   # (the glTF importer leaves objects in QUATERNION)
    obj.rotation_euler = (math.radians(90.0), 0.0, math.radians(30.0))
    obj.scale = (0.5, 0.5, 0.5)
    scene.unit_settings.scale_length = 3.0
    s.clip, s.first_frame, s.frame_count = clip, 1, 40
    if ops.register_armature() != {"FINISHED"} or ops.retarget() != {"FINISHED"}:
        sys.exit("check_addon: FAIL: the moved armature was not driven")
    world = obj.matrix_world.to_3x3().normalized()
    want = (mathutils.Matrix.Rotation(math.radians(30.0), 3, "Z")
            @ mathutils.Matrix.Rotation(math.radians(90.0), 3, "X"))
    if max(abs(a - b) for ra, rb in zip(world, want) for a, b in zip(ra, rb)) > 1e-6:
        sys.exit(f"check_addon: FAIL: the armature object is not turned as set: {world}")
    bpy.ops.wm.save_as_mainfile(filepath=out)
    print(f"check_addon: moved, turned and scaled armature driven, saved {out}")
    print("check_addon: ok")


main()
