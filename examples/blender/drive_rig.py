"""Drives a character's own armature with a clip, through the Reach add-on.

Imports RIG (a .glb, with Blender's glTF importer), selects its armature
and runs the add-on's operators as the sidebar's buttons do: Connect,
Register Armature, Retarget (CLIP, a .bvh or .glb/.gltf), which keys an
Action. Optionally saves the .blend and renders one frame (Workbench).

    blender -b --addons reach_blender --python-exit-code 1 \\
        --python examples/blender/drive_rig.py -- RIG.glb CLIP \\
        [--addr HOST:PORT] [--first N] [--frames N] [--live] [--animation NAME] \\
        [--out X.blend] [--render X.png] [--render-frame N]

The address defaults to $REACH_ADDRESS, else 127.0.0.1:50051; the token
to $REACH_TOKEN.
"""
import argparse
import json
import math
import os
import sys

import bpy
import mathutils


def render(scene, armature, path, frame):
    """One Workbench frame from the character's front, the film
    transparent where nothing is."""
    scene.frame_set(frame)
    meshes = [o for o in scene.objects if o.type == "MESH"]
    deps = bpy.context.evaluated_depsgraph_get()
    points = []
    for o in meshes:
        ev = o.evaluated_get(deps)
        mesh = ev.to_mesh()
        points += [ev.matrix_world @ v.co for v in mesh.vertices]
        ev.to_mesh_clear()
    lo = mathutils.Vector([min(p[i] for p in points) for i in range(3)])
    hi = mathutils.Vector([max(p[i] for p in points) for i in range(3)])
    centre, height = (lo + hi) / 2, hi.z - lo.z
    # In front of the character: the way its hips face (left hip to right
    # hip, turned about +Z).
    pose = armature.pose.bones
    hips = [b for b in pose if "hip" in b.name.lower() or "thigh" in b.name.lower()]
    forward = mathutils.Vector((0.0, -1.0, 0.0))
    if len(hips) >= 2:
        a, b = (armature.matrix_world @ h.head for h in hips[:2])
        side = (a - b) if a.x > b.x else (b - a)    # the character's left, roughly
        side.z = 0.0
        if side.length > 1e-6:
            forward = side.normalized().cross(mathutils.Vector((0, 0, 1)))
    direction = (forward * 3.0 + mathutils.Vector((0.0, 0.0, 0.4))).normalized()
    camera = bpy.data.objects.new("camera", bpy.data.cameras.new("camera"))
    scene.collection.objects.link(camera)
    camera.data.lens = 50.0
    distance = 1.6 * height / (2 * math.tan(camera.data.angle / 2))
    camera.location = centre + direction * distance
    camera.rotation_euler = (-direction).to_track_quat("-Z", "Y").to_euler()
    scene.camera = camera
    scene.render.engine = "BLENDER_WORKBENCH"
    scene.render.film_transparent = True
    scene.render.resolution_x, scene.render.resolution_y = 360, 480
    scene.render.resolution_percentage = 100
    scene.render.filepath = path
    scene.render.image_settings.file_format = "PNG"
    scene.render.image_settings.color_mode = "RGBA"
    bpy.ops.render.render(write_still=True)


def main():
    argv = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else []
    parser = argparse.ArgumentParser(prog="drive_rig.py", description=__doc__.splitlines()[0])
    parser.add_argument("rig")
    parser.add_argument("clip")
    parser.add_argument("--addr", default=os.environ.get("REACH_ADDRESS", "127.0.0.1:50051"))
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--frames", type=int, default=0)
    parser.add_argument("--live", action="store_true")
    parser.add_argument("--animation", default="", help="a glTF clip's animation (default: first)")
    parser.add_argument("--out", default="")
    parser.add_argument("--render", default="")
    parser.add_argument("--render-frame", type=int, default=0)
    args = parser.parse_args(argv)

    bpy.ops.wm.read_factory_settings(use_empty=True)
    # read_factory_settings resets the add-ons to the factory set: enable
    # ours again (the --addons flag enabled it for the first scene only).
    bpy.ops.preferences.addon_enable(module="reach_blender")
    scene = bpy.context.scene
    bpy.ops.import_scene.gltf(filepath=os.path.abspath(args.rig))
    armature = next(o for o in scene.objects if o.type == "ARMATURE")
    for o in scene.objects:
        o.select_set(o == armature)
    bpy.context.view_layer.objects.active = armature

    settings = scene.reach
    settings.address = args.addr
    settings.token = os.environ.get("REACH_TOKEN", "")
    settings.clip = os.path.abspath(args.clip)
    settings.first_frame = args.first
    settings.frame_count = args.frames
    settings.live = args.live
    settings.clip_animation = args.animation
    for op in (bpy.ops.reach.connect, bpy.ops.reach.register_armature, bpy.ops.reach.retarget):
        if op() != {"FINISHED"}:
            sys.exit(f"drive_rig: {op.idname_py()} failed")
    action = armature.animation_data.action
    print(f"drive_rig: {armature.name}: {scene.frame_end - scene.frame_start + 1} frames keyed "
          f"as {action.name!r} at {scene.render.fps / scene.render.fps_base:g} fps")
    for role, bone in json.loads(armature["reach_roles"]).items():
        print(f"  {role:20s} {bone}")
    if args.render:
        render(scene, armature, os.path.abspath(args.render),
               args.render_frame or (scene.frame_start + scene.frame_end) // 2)
        print(f"drive_rig: rendered {args.render}")
    if args.out:
        bpy.ops.wm.save_as_mainfile(filepath=os.path.abspath(args.out))
        print(f"drive_rig: saved {args.out}")


main()
