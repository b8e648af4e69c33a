"""The add-on against a server with TLS and tokens (CTest blender.addon):
plaintext to it is refused, TLS with the CA but no token is refused at
the first call that needs a role, and TLS with the CA and the token
registers BCN and keys 30 frames of the walk.

    blender -b --addons reach_blender --python-exit-code 1 --python check_secure.py -- \\
        RIG.glb CLIP.bvh ADDRESS CA.crt TOKEN
"""
import sys

import bpy


def refused(op, needle):
    try:
        result = op()
    except RuntimeError as e:
        if needle not in str(e):
            sys.exit(f"check_secure: FAIL: {op.idname_py()}: {str(e)!r} does not say {needle!r}")
        print(f"check_secure: {op.idname_py()} refused: {str(e).strip().splitlines()[-1]}")
        return
    sys.exit(f"check_secure: FAIL: {op.idname_py()} gave {result}")


def main():
    rig, clip, address, ca, token = sys.argv[sys.argv.index("--") + 1:]
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.preferences.addon_enable(module="reach_blender")
    scene = bpy.context.scene
    bpy.ops.import_scene.gltf(filepath=rig)
    obj = next(o for o in scene.objects if o.type == "ARMATURE")
    bpy.context.view_layer.objects.active = obj
    s, ops = scene.reach, bpy.ops.reach
    s.address = address
    refused(ops.connect, address)                      # plaintext to a TLS server
    s.use_tls, s.tls_ca = True, ca
    ops.connect()                                      # health needs no token
    refused(ops.register_armature, "token")
    s.token = token
    ops.connect()
    s.clip, s.first_frame, s.frame_count = clip, 1, 30
    if ops.register_armature() != {"FINISHED"} or ops.retarget() != {"FINISHED"}:
        sys.exit("check_secure: FAIL: not driven over TLS with the token")
    keyed = scene.frame_end - scene.frame_start + 1
    if keyed != 30:
        sys.exit(f"check_secure: FAIL: {keyed} frames keyed, not 30")
    print("check_secure: TLS and token: 30 frames keyed")
    print("check_secure: ok")


main()
