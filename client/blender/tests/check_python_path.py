"""The add-on's "Python path" preference (CTest blender.addon): in a
Blender that cannot import the client (no user site, no PYTHONPATH),
Connect says how to get it; with the preference set to a directory made
by `pip install --target DIR ./client/python`, Connect works.

    blender -b --addons reach_blender --python-exit-code 1 --python check_python_path.py -- \\
        DIR ADDRESS
"""
import sys

import bpy


def main():
    target, address = sys.argv[sys.argv.index("--") + 1:]
    # (--addons loads the add-on but lists it in the preferences only once
    # it is enabled there, as a user does.)
    bpy.ops.preferences.addon_enable(module="reach_blender")
    scene = bpy.context.scene
    scene.reach.address = address
    try:
        bpy.ops.reach.connect()
        sys.exit("check_python_path: FAIL: connected without the client on the path")
    except RuntimeError as e:
        if "cannot import the reach Python client" not in str(e) or "Python path" not in str(e):
            sys.exit(f"check_python_path: FAIL: {e}")
        print(f"check_python_path: without it: {str(e).strip().splitlines()[-1][:100]}...")
    bpy.context.preferences.addons["reach_blender"].preferences.python_path = target
    if bpy.ops.reach.connect() != {"FINISHED"}:
        sys.exit("check_python_path: FAIL: not connected with the Python path set")
    import reach
    print(f"check_python_path: connected with reach from {reach.__file__}")
    if not reach.__file__.startswith(target):
        sys.exit("check_python_path: FAIL: reach came from elsewhere")
    print("check_python_path: ok")


main()
