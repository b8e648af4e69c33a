"""The one place where Blender's frame meets the service's.

Blender's world is Z-up (front -Y) in scene units; the service's model
space is Y-up (front +Z, glTF's convention, which its importers and the
retarget characterisation read) in metres. An armature's own space is
further moved, turned and scaled by its object's world matrix. Every
position and rotation that crosses the wire goes through one `Frame`,
built from the armature object and the scene's unit scale, so no other
code knows about axes or units.
"""
import math

import mathutils

# Service (x, y, z) = Blender world (x, z, -y): -90 degrees about X.
Z_UP_TO_Y_UP = mathutils.Matrix.Rotation(-math.pi / 2.0, 3, "X")


class FrameError(ValueError):
    pass


class Frame:
    """Maps an armature's space (bone heads, rest and pose matrices) to the
    service's model space and back."""

    def __init__(self, armature_world, scale_length=1.0):
        world = mathutils.Matrix(armature_world)
        loc, rot, scale = world.decompose()
        if min(scale) <= 0.0 or max(scale) - min(scale) > 1e-6 * max(scale):
            raise FrameError(
                f"armature object scale {tuple(round(s, 6) for s in scale)}: the service's skeletons "
                "take one uniform positive scale; apply the scale (Ctrl+A) first")
        if scale_length <= 0.0:
            raise FrameError(f"scene unit scale {scale_length}: must be > 0")
        # Metres per armature unit, and the armature's rotation in the service's frame.
        self.scale = scale[0] * scale_length
        self.rotation = (Z_UP_TO_Y_UP @ rot.to_matrix()).to_quaternion().normalized()
        self._offset = Z_UP_TO_Y_UP @ (loc * scale_length)

    @classmethod
    def of(cls, obj, scene):
        return cls(obj.matrix_world, scene.unit_settings.scale_length)

    def point_to_service(self, p):
        """An armature-space point -> (x, y, z) metres, Y-up."""
        q = self._offset + self.rotation @ (mathutils.Vector(p) * self.scale)
        return (q.x, q.y, q.z)

    def point_from_service(self, p):
        """(x, y, z) metres, Y-up -> an armature-space Vector."""
        return self.rotation.inverted() @ (mathutils.Vector(p) - self._offset) / self.scale

    def rotation_to_service(self, r):
        """An armature-space rotation (Matrix or Quaternion) -> the same
        frame's orientation in the service's model space (Quaternion)."""
        q = r.to_quaternion() if hasattr(r, "to_quaternion") else mathutils.Quaternion(r)
        return (self.rotation @ q.normalized()).normalized()

    def direction_to_blender_world(self, v):
        """A service-space direction -> Blender world (for the UI and checks)."""
        return (Z_UP_TO_Y_UP.inverted() @ mathutils.Vector(v)).normalized()
