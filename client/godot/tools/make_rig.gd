# Writes res://rig.tscn: a Spatial with a Skeleton of 17 bones (a humanoid
# in metres, Y up, facing +Z), the rig the example and the tests drive.
# Each bone's rest turns its local +Y along the bone, with a roll about it,
# so no rest rotation is the identity: a client that confused a joint's
# local rotation with its rotation from rest would miss its targets.
#
#   godot3-server --path client/godot --script res://tools/make_rig.gd
extends SceneTree

const BONES = [
	# name, parent, head, tail (model space), roll (radians)
	["Hips", "", Vector3(0, 1.0, 0), Vector3(0, 1.1, 0), 0.2],
	["Spine", "Hips", Vector3(0, 1.1, 0), Vector3(0, 1.3, 0.01), -0.1],
	["Chest", "Spine", Vector3(0, 1.3, 0.01), Vector3(0, 1.5, 0), 0.15],
	["Neck", "Chest", Vector3(0, 1.5, 0), Vector3(0, 1.6, 0.02), 0.0],
	["Head", "Neck", Vector3(0, 1.6, 0.02), Vector3(0, 1.8, 0.02), 0.3],
	["LeftUpperArm", "Chest", Vector3(0.2, 1.45, 0), Vector3(0.45, 1.45, -0.02), 0.4],
	["LeftLowerArm", "LeftUpperArm", Vector3(0.45, 1.45, -0.02), Vector3(0.7, 1.45, 0.02), -0.3],
	["LeftHand", "LeftLowerArm", Vector3(0.7, 1.45, 0.02), Vector3(0.8, 1.45, 0.02), 0.1],
	["RightUpperArm", "Chest", Vector3(-0.2, 1.45, 0), Vector3(-0.45, 1.45, -0.02), -0.4],
	["RightLowerArm", "RightUpperArm", Vector3(-0.45, 1.45, -0.02), Vector3(-0.7, 1.45, 0.02), 0.3],
	["RightHand", "RightLowerArm", Vector3(-0.7, 1.45, 0.02), Vector3(-0.8, 1.45, 0.02), -0.1],
	["LeftUpperLeg", "Hips", Vector3(0.1, 0.95, 0), Vector3(0.1, 0.5, 0.03), 0.25],
	["LeftLowerLeg", "LeftUpperLeg", Vector3(0.1, 0.5, 0.03), Vector3(0.1, 0.08, 0), -0.2],
	["LeftFoot", "LeftLowerLeg", Vector3(0.1, 0.08, 0), Vector3(0.1, 0.0, 0.12), 0.05],
	["RightUpperLeg", "Hips", Vector3(-0.1, 0.95, 0), Vector3(-0.1, 0.5, 0.03), -0.25],
	["RightLowerLeg", "RightUpperLeg", Vector3(-0.1, 0.5, 0.03), Vector3(-0.1, 0.08, 0), 0.2],
	["RightFoot", "RightLowerLeg", Vector3(-0.1, 0.08, 0), Vector3(-0.1, 0.0, 0.12), -0.05],
]


# The rotation taking +Y onto `direction`, then rolled about it.
func _bone_basis(direction: Vector3, roll: float) -> Basis:
	var y = Vector3(0, 1, 0)
	var d = direction.normalized()
	var axis = y.cross(d)
	var basis = Basis()
	if axis.length() > 1e-6:
		basis = Basis(axis.normalized(), y.angle_to(d))
	elif d.y < 0:
		basis = Basis(Vector3(1, 0, 0), PI)
	return basis * Basis(y, roll)


func _init():
	var root = Spatial.new()
	root.name = "Rig"
	var skeleton = Skeleton.new()
	skeleton.name = "Skeleton"
	root.add_child(skeleton)
	skeleton.owner = root
	var globals = {}
	for bone in BONES:
		var global = Transform(_bone_basis(bone[3] - bone[2], bone[4]), bone[2])
		globals[bone[0]] = global
		skeleton.add_bone(bone[0])
		var index = skeleton.get_bone_count() - 1
		var rest = global
		if bone[1] != "":
			skeleton.set_bone_parent(index, skeleton.find_bone(bone[1]))
			rest = globals[bone[1]].affine_inverse() * global
		skeleton.set_bone_rest(index, rest)
	var scene = PackedScene.new()
	scene.pack(root)
	var err = ResourceSaver.save("res://rig.tscn", scene)
	print("make_rig: %d bones, saved res://rig.tscn (%d)" % [skeleton.get_bone_count(), err])
	quit(0 if err == OK else 1)
