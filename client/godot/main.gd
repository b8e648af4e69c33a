extends Spatial
# Registers the Skeleton, puts the left hand on $Target with one solve,
# then streams 30 frames of the right hand drawing a circle.

signal solved(answer)
signal streamed(answers, status)

onready var reach = $ReachClient
onready var skeleton = $Rig/Skeleton
var skeleton_id = ""

func _ready():
	var chains = [
		{"name": "left_arm", "root": "LeftUpperArm", "tip": "LeftHand"},
		{"name": "right_arm", "root": "RightUpperArm", "tip": "RightHand"},
	]
	var r = yield(reach.register_skeleton(skeleton, "godot-rig", chains), "completed")
	if not r["ok"]:
		push_error("register: %s %s" % [r["code"], r["message"]])
		return
	skeleton_id = r["body"]["skeleton_id"]

	# One solve: the left hand onto $Target (a point in the scene).
	var target = reach.to_skeleton_space(skeleton, $Target.global_transform.origin)
	var goals = [{"chain": "left_arm", "target": target}]
	r = yield(reach.solve(reach.solve_request(skeleton, skeleton_id, goals)), "completed")
	if not r["ok"]:
		push_error("solve: %s %s" % [r["code"], r["message"]])
		return
	reach.apply_solve(skeleton, r["body"])
	emit_signal("solved", r["body"])

	# A stream: one request per frame, each answer applied as it arrives.
	var stream = reach.open_solve_stream()
	var answers = []
	for frame in range(30):
		var angle = TAU * frame / 30.0
		var point = Vector3(-0.4, 1.25 + 0.1 * sin(angle), 0.2 + 0.1 * cos(angle))
		var goal = {"chain": "right_arm", "target": point}
		stream.send(reach.solve_request(skeleton, skeleton_id, [goal], {"sequence": frame}))
		var answer = yield(stream, "next")
		if answer == null:  # The stream ended: stream.status says why.
			push_error("stream: %s %s" % [stream.status["code"], stream.status["message"]])
			return
		reach.apply_solve(skeleton, answer)
		answers.append(answer)
	stream.finish()
	var status = yield(stream, "closed")
	emit_signal("streamed", answers, status)
