"""What the add-on's operators do, without the UI: usable from scripts.

An armature goes to the service as a skeleton made from its rest pose
(`Rig`); a clip (a BVH file the server imports, or a glTF file Blender's
importer reads and this module samples) is retargeted onto it by the
server (`RetargetService`), and the answers are keyed as an Action. All
positions and rotations cross between Blender and the service through one
`frame.Frame`.
"""
import os
import site
import sys

import bpy
import mathutils

from .frame import Frame, FrameError


class AddonError(Exception):
    """A failure to show the user as is (operators report it)."""


def _import_client():
    import numpy  # noqa: F401
    import reach
    return reach


def import_reach():
    """The project's Python client, with a message that says how to get it.

    Blender starts Python without the user's site directory (unless run
    with --python-use-system-env), so a `pip install --user` of the client
    is not on the path: it is added when the client is not found
    otherwise."""
    try:
        return _import_client()
    except ImportError:
        pass
    user_site = site.getusersitepackages()
    if os.path.isdir(user_site) and user_site not in sys.path:
        sys.path.append(user_site)
    try:
        return _import_client()
    except ImportError as e:
        raise AddonError(
            f"cannot import the reach Python client ({e}): install it into the Python Blender runs "
            "(Debian's Blender: the system python3, e.g. python3 -m pip install --user "
            "--break-system-packages ./client/python, with apt-get install python3-grpcio "
            "python3-protobuf python3-numpy), or set the add-on's 'Python path' preference to a "
            "directory holding it (pip install --target DIR)") from None


def connect(address, token="", use_tls=False, tls_ca="", timeout=30.0):
    """A reach.Client, checked with a health call."""
    reach = import_reach()
    tls = None
    if use_tls:
        tls = reach.TLS(ca=bpy.path.abspath(tls_ca)) if tls_ca else True
    try:
        client = reach.Client(address or None, token=token or None, tls=tls, timeout=timeout)
    except reach.ReachError as e:
        raise AddonError(f"{'TLS' if use_tls else f'address {address!r}'}: {e.message}") from None
    try:
        status = client.health()
    except reach.ReachError as e:
        client.close()
        raise AddonError(f"address {address!r}: {e.message}") from None
    if status != "SERVING":
        client.close()
        raise AddonError(f"address {address!r}: the server answers {status}")
    return client


def _bones_parents_first(armature):
    """Depth first from each root bone (no recursion: a chain may be long)."""
    out = []
    stack = [b for b in reversed(armature.bones) if b.parent is None]
    while stack:
        bone = stack.pop()
        out.append(bone)
        stack.extend(reversed(bone.children))
    return out


class Rig:
    """An armature object as the service sees it: one joint per bone
    (parents first), each at its bone's head with its bone's rest
    orientation, in the service's frame."""

    def __init__(self, obj, scene):
        if obj is None or obj.type != "ARMATURE":
            raise AddonError("select an armature (the active object is "
                             f"{'nothing' if obj is None else obj.type.lower()})")
        try:
            self.frame = Frame.of(obj, scene)
        except FrameError as e:
            raise AddonError(f"{obj.name}: {e}") from None
        self.obj = obj
        self.bones = _bones_parents_first(obj.data)
        if not self.bones:
            raise AddonError(f"{obj.name}: the armature has no bones")
        # A service joint always turns with its parent; a bone that does
        # not would be posed wrongly, so say so. (Inherit Scale does not
        # matter: nothing here scales a bone.)
        odd = [b.name for b in self.bones if b.parent is not None and not b.use_inherit_rotation]
        if odd:
            raise AddonError(f"{obj.name}: bone {odd[0]!r} does not inherit its parent's rotation "
                             f"(Bone Properties > Relations; {len(odd)} such bones): the "
                             "service's joints do")
        self.names = [b.name for b in self.bones]
        index = {n: i for i, n in enumerate(self.names)}
        self.parents = [index[b.parent.name] if b.parent else -1 for b in self.bones]
        # Rest orientation and position of every joint in the service's model space.
        self.rest_global = [self.frame.rotation_to_service(b.matrix_local) for b in self.bones]
        self.rest_position = [mathutils.Vector(self.frame.point_to_service(b.head_local))
                              for b in self.bones]
        self.rest_local = []
        self.rest_translation = []
        for i, p in enumerate(self.parents):
            if p < 0:
                self.rest_local.append(self.rest_global[i])
                self.rest_translation.append(self.rest_position[i])
            else:
                inv = self.rest_global[p].inverted()
                self.rest_local.append((inv @ self.rest_global[i]).normalized())
                self.rest_translation.append(inv @ (self.rest_position[i] - self.rest_position[p]))

    def skeleton(self):
        """The skeleton dict RegisterSkeleton takes (skeleton.proto)."""
        joints = []
        for name, parent, q, t in zip(self.names, self.parents, self.rest_local,
                                      self.rest_translation):
            joints.append({"name": name, "parent": parent, "type": "JOINT_TYPE_BALL",
                           "rest": {"translation": {"x": t.x, "y": t.y, "z": t.z},
                                    "rotation": {"w": q.w, "x": q.x, "y": q.y, "z": q.z},
                                    "scale": 1.0}})
        return {"name": self.obj.name, "joints": joints}

    def pose_now(self):
        """The armature's evaluated pose (after scene.frame_set) as the
        service's local rotations (J, 4) and root translation (3,)."""
        import numpy as np
        pose = self.obj.pose.bones
        glob = [self.frame.rotation_to_service(pose[n].matrix) for n in self.names]
        rotations = np.empty((len(self.names), 4))
        for i, p in enumerate(self.parents):
            q = glob[i] if p < 0 else (glob[p].inverted() @ glob[i]).normalized()
            rotations[i] = (q.w, q.x, q.y, q.z)
        root = np.array(self.frame.point_to_service(pose[self.names[0]].head))
        return rotations, root

    def positions_now(self):
        """Every bone's evaluated head in the service's frame, (J, 3): what
        Blender's own forward kinematics makes of the keyed pose."""
        import numpy as np
        pose = self.obj.pose.bones
        return np.array([self.frame.point_to_service(pose[n].head) for n in self.names])

    def basis(self, rotations, root_translation):
        """Service local rotations (J, 4) and root translation -> each pose
        bone's rotation_quaternion (relative to its rest: B = rest^-1 q)
        and the root bone's location."""
        quats = []
        for i, q in enumerate(rotations):
            b = self.rest_local[i].inverted() @ mathutils.Quaternion(tuple(q))
            quats.append(b.normalized())
        root = self.bones[0]
        head = self.frame.point_from_service(tuple(root_translation))
        location = root.matrix_local.to_3x3().inverted() @ (head - root.head_local)
        return quats, location


def register(client, rig):
    """Registers the rig; returns (skeleton_id, roles {role: bone}). The
    roles are the server's characterisation (a profile of the rig onto
    itself, whose target report is the rig's)."""
    reach = import_reach()
    try:
        skeleton_id = client.register(rig.skeleton()).skeleton_id
        profile = client.create_profile(skeleton_id, skeleton_id)
    except reach.ReachError as e:
        raise AddonError(f"{rig.obj.name}: {e.message}") from None
    return skeleton_id, dict(profile.target.roles)


class Clip:
    """Source motion: skeleton id, (F, J, 4) rotations, (F, 3) roots, frame time."""

    def __init__(self, skeleton_id, rotations, roots, frame_time_s, name):
        self.skeleton_id, self.rotations, self.roots = skeleton_id, rotations, roots
        self.frame_time_s, self.name = frame_time_s, name


def load_clip(client, path, scene, first=0, count=0, animation=""):
    """A BVH (imported by the server with its motion) or a glTF/GLB file
    (read by Blender's importer: its first armature, registered from its
    rest pose, and its animation named `animation`, else the one the
    importer makes active (the file's first), sampled at the scene's frame
    rate, as the importer places the keys; the imported objects are removed
    again). first/count: the source frames to use."""
    import numpy as np
    reach = import_reach()
    path = bpy.path.abspath(path)
    if not os.path.isfile(path):
        raise AddonError(f"clip {path!r}: no such file")
    name = os.path.splitext(os.path.basename(path))[0]
    ext = os.path.splitext(path)[1].lower()
    if ext == ".bvh":
        try:
            imported = client.import_file(path, return_motion=True)
        except reach.ReachError as e:
            raise AddonError(f"clip {path!r}: {e.message}") from None
        rotations, roots, dt = imported.motion, imported.root_translations, imported.frame_time_s
        skeleton_id = imported.skeleton_id
    elif ext in (".glb", ".gltf"):
        skeleton_id, rotations, roots, dt = _sample_gltf(client, path, scene, animation)
    else:
        raise AddonError(f"clip {path!r}: not a .bvh, .glb or .gltf file")
    if first < 0 or first >= len(rotations):
        raise AddonError(f"first frame {first}: the clip has frames 0..{len(rotations) - 1}")
    end = len(rotations) if count <= 0 else min(len(rotations), first + count)
    return Clip(skeleton_id, np.asarray(rotations[first:end]), np.asarray(roots[first:end]),
                dt if dt > 0 else 1.0 / 30.0, name)


def _sample_gltf(client, path, scene, animation):
    import numpy as np
    reach = import_reach()
    before = set(bpy.data.objects)
    actions_before = set(bpy.data.actions)
    active = bpy.context.view_layer.objects.active
    selected = [o for o in bpy.context.view_layer.objects if o.select_get()]
    saved_frame = scene.frame_current
    try:
        bpy.ops.import_scene.gltf(filepath=path)
    except RuntimeError as e:
        raise AddonError(f"clip {path!r}: Blender's glTF importer failed: {e}") from None
    new = [o for o in bpy.data.objects if o not in before]
    try:
        source = next((o for o in new if o.type == "ARMATURE"), None)
        if source is None:
            raise AddonError(f"clip {path!r}: no armature in the file")
        data = source.animation_data
        # The importer puts each glTF animation on an NLA track of its name.
        tracks = {t.name: t for t in data.nla_tracks} if data else {}
        if animation:
            if animation not in tracks or not tracks[animation].strips:
                raise AddonError(f"clip animation {animation!r}: {os.path.basename(path)} has "
                                 f"{', '.join(sorted(tracks)) or 'no animations'}")
            data.action = tracks[animation].strips[0].action
        action = data.action if data else None
        if action is None:
            raise AddonError(f"clip {path!r}: the armature plays no animation")
        # Only the action plays, not the tracks beside it.
        for t in data.nla_tracks:
            t.mute = True
        rig = Rig(source, scene)
        start, end = (int(round(x)) for x in action.frame_range)
        rotations, roots = [], []
        for f in range(start, end + 1):
            scene.frame_set(f)
            r, t = rig.pose_now()
            rotations.append(r)
            roots.append(t)
        try:
            skeleton_id = client.register(rig.skeleton()).skeleton_id
        except reach.ReachError as e:
            raise AddonError(f"clip {path!r}: {e.message}") from None
        fps = scene.render.fps / scene.render.fps_base
        return skeleton_id, np.array(rotations), np.array(roots), 1.0 / fps
    finally:
        for o in new:
            bpy.data.objects.remove(o, do_unlink=True)
        for a in set(bpy.data.actions) - actions_before:
            bpy.data.actions.remove(a)
        scene.frame_set(saved_frame)
        for o in selected:
            if o.name in bpy.context.view_layer.objects:
                o.select_set(True)
        bpy.context.view_layer.objects.active = active


def retarget(client, rig, target_id, clip, live=False, return_globals=False):
    """The clip onto the rig: (profile, RetargetedMotion or list of
    RetargetedFrame). live: over RetargetStream, frame by frame, else one
    RetargetBatch."""
    reach = import_reach()
    try:
        profile = client.create_profile(clip.skeleton_id, target_id)
        if not live:
            motion = client.retarget_batch(profile, clip.rotations, clip.roots,
                                           frame_time_s=clip.frame_time_s,
                                           return_globals=return_globals)
            return profile, [motion.frame(i) for i in range(len(motion))]
        answers = []
        with client.retarget_stream(profile, frame_time_s=clip.frame_time_s) as stream:
            for rotations, root in zip(clip.rotations, clip.roots):
                stream.send(rotations, root)
            for answer in stream:
                answers.append(answer)
    except reach.ReachError as e:
        raise AddonError(f"retarget {clip.name} onto {rig.obj.name}: {e.message}") from None
    bad = [a for a in answers if a.error is not None]
    if bad:
        raise AddonError(f"retarget {clip.name}: frame {bad[0].sequence}: {bad[0].error.message}")
    return profile, answers


def key_action(rig, frames, name, start_frame=1):
    """Keys one answer per scene frame from start_frame on a new Action
    (LINEAR): every bone's rotation_quaternion and the root's location.
    Returns the Action."""
    obj = rig.obj
    names = frames[0].joint_names
    if list(names) != rig.names:
        raise AddonError(f"{obj.name}: the profile's joints are not the armature's bones "
                         "(re-register the armature)")
    action = bpy.data.actions.new(name)
    if obj.animation_data is None:
        obj.animation_data_create()
    obj.animation_data.action = action
    for pb in obj.pose.bones:
        pb.rotation_mode = "QUATERNION"
    count = len(frames)
    values = [[[0.0] * count for _ in range(4)] for _ in names]
    location = [[0.0] * count for _ in range(3)]
    previous = [None] * len(names)
    for f, answer in enumerate(frames):
        quats, loc = rig.basis(answer.rotations, answer.root_translation)
        for j, q in enumerate(quats):
            # The same hemisphere as the previous key, so LINEAR keys
            # between frames turn the short way.
            if previous[j] is not None and previous[j].dot(q) < 0.0:
                q = -q
            previous[j] = q
            for c in range(4):
                values[j][c][f] = q[c]
        for c in range(3):
            location[c][f] = loc[c]
    frames_axis = [float(start_frame + f) for f in range(count)]

    def curve(path, index, group, ys):
        fc = action.fcurves.new(path, index=index, action_group=group)
        fc.keyframe_points.add(count)
        co = [v for pair in zip(frames_axis, ys) for v in pair]
        fc.keyframe_points.foreach_set("co", co)
        fc.keyframe_points.foreach_set(
            "interpolation", [bpy.types.Keyframe.bl_rna.properties["interpolation"]
                              .enum_items["LINEAR"].value] * count)
        fc.update()

    for j, name in enumerate(names):
        path = f'pose.bones["{bpy.utils.escape_identifier(name)}"]'
        for c in range(4):
            curve(path + ".rotation_quaternion", c, name, values[j][c])
    root = names[0]
    for c in range(3):
        curve(f'pose.bones["{bpy.utils.escape_identifier(root)}"].location', c, root, location[c])
    return action
