"""Reach IK for Blender: drives the selected armature with motion retargeted
by a Reach server (reach.v1.RetargetService).

View3D > Sidebar (N) > Reach: Connect (address, token, TLS), Register
Armature (the selected armature's rest pose goes to the server, which
characterises it: the panel lists which bone plays which role), Retarget
(a BVH or glTF clip, in one batch or over a live stream, keyed as a new
Action on the armature). Knees and elbows bend as the source's do,
turned onto the rig (the server's pole for each limb is its transferred
knee or elbow; a straight one bends as the rig's retarget pose does).
Axes (Blender's Z-up, the service's Y-up) and units are converted in one
place, frame.py.

Scripts call the same operators (bpy.ops.reach.connect(), ...) with the
settings in scene.reach, or the functions in reach_blender.core.
"""
import json
import sys

import bpy
from bpy.props import BoolProperty, IntProperty, PointerProperty, StringProperty

from . import core

bl_info = {
    "name": "Reach IK",
    "author": "Reach",
    "version": (0, 1, 0),
    "blender": (3, 4, 0),
    "location": "View3D > Sidebar > Reach",
    "description": "Retarget BVH/glTF clips or live streams onto the selected armature "
                   "with a Reach IK server",
    "category": "Animation",
}

# The open connection (one per Blender session; gRPC channels are not
# stored in .blend files).
_client = None
_connected_to = ""


def _prefs_path():
    addon = bpy.context.preferences.addons.get(__package__)
    return addon.preferences.python_path if addon else ""


def _use_python_path(path):
    path = bpy.path.abspath(path) if path else ""
    if path and path not in sys.path:
        sys.path.insert(0, path)


class ReachPreferences(bpy.types.AddonPreferences):
    bl_idname = __package__

    python_path: StringProperty(
        name="Python path", subtype="DIR_PATH",
        description="A directory holding the reach package (pip install --target DIR "
                    "./client/python), when Blender's Python does not find it",
        update=lambda self, _context: _use_python_path(self.python_path))

    def draw(self, context):
        self.layout.prop(self, "python_path")


class ReachSettings(bpy.types.PropertyGroup):
    address: StringProperty(name="Address", default="127.0.0.1:50051",
                            description="host:port of the Reach server")
    token: StringProperty(name="Token", subtype="PASSWORD",
                          description="Bearer token (empty: none)")
    use_tls: BoolProperty(name="TLS", description="Connect over TLS")
    tls_ca: StringProperty(name="CA", subtype="FILE_PATH",
                           description="PEM file of the CA that signed the server "
                                       "(empty: the system's roots)")
    clip: StringProperty(name="Clip", subtype="FILE_PATH",
                         description="A .bvh (imported by the server) or .glb/.gltf clip")
    clip_animation: StringProperty(
        name="Animation", description="glTF clips: the animation to use (empty: the file's first)")
    live: BoolProperty(name="Live stream",
                       description="Retarget over RetargetStream, frame by frame, "
                                   "instead of one RetargetBatch")
    first_frame: IntProperty(name="First source frame", default=0, min=0,
                             description="Skip the clip's frames before this one (CMU: 1 skips "
                                         "the calibration T-pose)")
    frame_count: IntProperty(name="Frames", default=0, min=0,
                             description="How many source frames (0: all)")
    start_frame: IntProperty(name="Start at", default=1,
                             description="The scene frame of the first key")


def _fail(op, message):
    op.report({"ERROR"}, message)
    print(f"reach: {message}", file=sys.stderr)
    return {"CANCELLED"}


class REACH_OT_connect(bpy.types.Operator):
    """Connect to the Reach server (address, token, TLS)"""
    bl_idname = "reach.connect"
    bl_label = "Connect"

    def execute(self, context):
        global _client, _connected_to
        _use_python_path(_prefs_path())
        s = context.scene.reach
        try:
            client = core.connect(s.address, s.token, s.use_tls, s.tls_ca)
        except core.AddonError as e:
            return _fail(self, str(e))
        if _client is not None:
            _client.close()
        _client, _connected_to = client, s.address
        self.report({"INFO"}, f"connected to {s.address}")
        return {"FINISHED"}


def _need_client(op):
    if _client is None:
        _fail(op, "not connected: press Connect first")
    return _client


def _active_armature(context):
    """The active object if it is an armature, else the one selected armature."""
    obj = context.active_object
    if obj is not None and obj.type == "ARMATURE":
        return obj
    armatures = [o for o in context.selected_objects if o.type == "ARMATURE"]
    return armatures[0] if len(armatures) == 1 else obj


class REACH_OT_register_armature(bpy.types.Operator):
    """Register the selected armature's rest pose with the server and show
    the roles its characterisation gives the bones"""
    bl_idname = "reach.register_armature"
    bl_label = "Register Armature"

    def execute(self, context):
        client = _need_client(self)
        if client is None:
            return {"CANCELLED"}
        try:
            rig = core.Rig(_active_armature(context), context.scene)
            skeleton_id, roles = core.register(client, rig)
        except core.AddonError as e:
            return _fail(self, str(e))
        rig.obj["reach_skeleton_id"] = skeleton_id
        rig.obj["reach_roles"] = json.dumps(roles)
        self.report({"INFO"}, f"{rig.obj.name}: {len(rig.names)} bones registered, "
                              f"{len(roles)} roles")
        return {"FINISHED"}


class REACH_OT_retarget(bpy.types.Operator):
    """Retarget the clip onto the selected armature and key a new Action"""
    bl_idname = "reach.retarget"
    bl_label = "Retarget"

    def execute(self, context):
        client = _need_client(self)
        if client is None:
            return {"CANCELLED"}
        s = context.scene.reach
        scene = context.scene
        if not s.clip:
            return _fail(self, "clip: choose a .bvh, .glb or .gltf file")
        try:
            rig = core.Rig(_active_armature(context), scene)
            # Registering again is free (the id is the content's hash) and
            # keeps the profile's joints equal to the bones as they are now.
            skeleton_id, roles = core.register(client, rig)
            clip = core.load_clip(client, s.clip, scene, s.first_frame, s.frame_count,
                                  s.clip_animation)
            profile, frames = core.retarget(client, rig, skeleton_id, clip, live=s.live)
            action = core.key_action(rig, frames, f"{clip.name} ({rig.obj.name})", s.start_frame)
        except core.AddonError as e:
            return _fail(self, str(e))
        obj = rig.obj
        obj["reach_skeleton_id"] = skeleton_id
        obj["reach_roles"] = json.dumps(roles)
        obj["reach_profile_id"] = profile.profile_id
        scene.frame_start = s.start_frame
        scene.frame_end = s.start_frame + len(frames) - 1
        scene.render.fps = max(1, round(1.0 / clip.frame_time_s))
        scene.render.fps_base = scene.render.fps * clip.frame_time_s
        scene.frame_set(s.start_frame)
        self.report({"INFO"}, f"{obj.name}: {len(frames)} frames of {clip.name} keyed as "
                              f"{action.name!r} ({'RetargetStream' if s.live else 'RetargetBatch'})")
        return {"FINISHED"}


class REACH_PT_panel(bpy.types.Panel):
    bl_label = "Reach IK"
    bl_idname = "REACH_PT_panel"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Reach"

    def draw(self, context):
        s = context.scene.reach
        layout = self.layout
        box = layout.box()
        box.prop(s, "address")
        box.prop(s, "token")
        row = box.row()
        row.prop(s, "use_tls")
        if s.use_tls:
            row.prop(s, "tls_ca", text="")
        box.operator("reach.connect")
        if _client is not None:
            box.label(text=f"Connected to {_connected_to}", icon="CHECKMARK")
        obj = context.active_object
        box = layout.box()
        if obj is None or obj.type != "ARMATURE":
            box.label(text="Select an armature", icon="INFO")
        else:
            box.label(text=obj.name, icon="ARMATURE_DATA")
            box.operator("reach.register_armature")
            roles = json.loads(obj.get("reach_roles", "{}"))
            for role, bone in roles.items():
                row = box.row()
                row.label(text=role)
                row.label(text=bone)
        box = layout.box()
        box.prop(s, "clip")
        if s.clip.lower().endswith((".glb", ".gltf")):
            box.prop(s, "clip_animation")
        box.prop(s, "live")
        box.prop(s, "first_frame")
        box.prop(s, "frame_count")
        box.prop(s, "start_frame")
        box.operator("reach.retarget")


_classes = (ReachPreferences, ReachSettings, REACH_OT_connect, REACH_OT_register_armature,
            REACH_OT_retarget, REACH_PT_panel)


def _numpy_bool_alias():
    """Debian's Blender 3.4 glTF importer uses np.bool, which Debian 12's
    NumPy 1.24 no longer has: without the alias it fails on every mesh.
    The alias meant the builtin bool."""
    try:
        import numpy
    except ImportError:
        return
    if "bool" not in numpy.__dict__:
        numpy.bool = bool


def register():
    for cls in _classes:
        bpy.utils.register_class(cls)
    bpy.types.Scene.reach = PointerProperty(type=ReachSettings)
    _numpy_bool_alias()
    try:
        _use_python_path(_prefs_path())
    except AttributeError:  # No preferences while Blender starts up.
        pass


def unregister():
    global _client
    if _client is not None:
        _client.close()
        _client = None
    del bpy.types.Scene.reach
    for cls in reversed(_classes):
        bpy.utils.unregister_class(cls)
