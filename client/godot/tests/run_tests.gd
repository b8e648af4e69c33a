# The Godot client against a real reach-server (CTest godot.client, through
# tests/check_godot.sh), headless:
#
#   REACH_HTTP_URL=http://127.0.0.1:PORT REACH_TOKEN=... REACH_SOLVE_TOKEN=... \
#     godot3-server --path client/godot --script res://tests/run_tests.gd \
#     -- --readme client/godot/README.md
# (--readme relative to the directory Godot was started in.)
#
# 1. The README's example (its gdscript block, which must also be main.gd
#    as shipped) run as written on main.tscn: one solve puts the left hand
#    on $Target, a stream of 30 frames moves the right hand.
# 2. The client's calls on their own: the registered skeleton read back
#    against the Skeleton node, a full-body solve, a stream with a bad
#    frame in it, bad input (NaN, missing fields, unknown ids: the server's
#    error naming the field, surfaced), tokens and roles, a server that is
#    not there.
# Every pose is checked by this file's own forward kinematics (quaternion
# arithmetic on the wire's numbers) and against the Skeleton node's own
# global bone poses after the answer is applied. Exits 1 on any failure,
# and on the watchdog (no path waits longer than WATCHDOG_S).
extends SceneTree

const ReachClient = preload("res://addons/reach/reach_client.gd")
const WATCHDOG_S = 120.0
const WAIT_S = 30.0

var failures = 0
var checks = 0
var finished = []  # The sections that ran to their end (a script error stops one).
var _keep = []


func _init():
	create_timer(WATCHDOG_S).connect("timeout", self, "_on_watchdog")
	call_deferred("_start")


func _start():
	var state = _run()
	if state is GDScriptFunctionState:
		yield(state, "completed")
	check(finished == ["readme", "client"], "every section ran to its end (%s)" % [finished])
	print("godot.client: %d checks, %d failed" % [checks, failures])
	print("godot.client: %s" % ("ok" if failures == 0 and checks > 0 else "FAILED"))
	quit(0 if failures == 0 and checks > 0 else 1)


func _on_watchdog():
	print("FAIL watchdog: the tests did not finish in %d s" % WATCHDOG_S)
	print("godot.client: FAILED")
	quit(1)


func check(ok: bool, what: String) -> bool:
	checks += 1
	print(("ok   " if ok else "FAIL ") + what)
	if not ok:
		failures += 1
	return ok


# `x` as 1.23e-05 (Godot 3's format strings have no %e).
static func e(x: float) -> String:
	if x == 0 or is_nan(x) or is_inf(x):
		return str(x)
	var exponent = int(floor(log(abs(x)) / log(10.0)))
	return "%.2fe%d" % [x / pow(10.0, exponent), exponent]


func _arg(name: String, default := "") -> String:
	var args = OS.get_cmdline_args()
	for i in range(args.size() - 1):
		if args[i] == "--" + name:
			return args[i + 1]
	return default


# Waits for `object`'s `signal_name` at most `seconds`; its argument (an
# array of them for two), or "timeout".
class Waiter:
	extends Reference
	signal done(value)
	var fired = false

	func _init(object, signal_name, tree, seconds):
		object.connect(signal_name, self, "_on_signal")
		tree.create_timer(seconds).connect("timeout", self, "_on_timeout")

	func _on_signal(a = null, b = null):
		if not fired:
			fired = true
			emit_signal("done", a if b == null else [a, b])

	func _on_timeout():
		if not fired:
			fired = true
			emit_signal("done", "timeout")


func wait(object, signal_name: String, seconds := WAIT_S):
	var waiter = Waiter.new(object, signal_name, self, seconds)
	_keep.append(waiter)
	var value = yield(waiter, "done")
	_keep.erase(waiter)
	if typeof(value) == TYPE_STRING and value == "timeout":
		check(false, "%s: no '%s' within %d s" % [object, signal_name, seconds])
	return value


# A client call (a coroutine) awaited with the time limit.
func await_call(state):
	var value = yield(wait(state, "completed"), "completed")
	if typeof(value) != TYPE_DICTIONARY:
		return {"ok": false, "status": -1, "code": "TIMEOUT", "message": "no answer", "body": null}
	return value


# ---- Forward kinematics, this file's own (arrays [x, y, z, w]) ---------------

static func qmul(a, b) -> Array:
	return [
		a[3] * b[0] + a[0] * b[3] + a[1] * b[2] - a[2] * b[1],
		a[3] * b[1] - a[0] * b[2] + a[1] * b[3] + a[2] * b[0],
		a[3] * b[2] + a[0] * b[1] - a[1] * b[0] + a[2] * b[3],
		a[3] * b[3] - a[0] * b[0] - a[1] * b[1] - a[2] * b[2]]


static func qrot(q, v) -> Array:
	var p = qmul(qmul(q, [v[0], v[1], v[2], 0.0]), [-q[0], -q[1], -q[2], q[3]])
	return [p[0], p[1], p[2]]


static func dist(a, b) -> float:
	return sqrt(pow(a[0] - b[0], 2) + pow(a[1] - b[1], 2) + pow(a[2] - b[2], 2))


static func axis_angle(axis: Array, angle: float) -> Array:
	var n = sqrt(axis[0] * axis[0] + axis[1] * axis[1] + axis[2] * axis[2])
	var s = sin(angle / 2) / n
	return [axis[0] * s, axis[1] * s, axis[2] * s, cos(angle / 2)]


# Model-space [position, rotation] of every joint of `skeleton` (Reach's
# skeleton JSON) for local `rotations` and `translations` (arrays, one per
# joint): p = p_parent + scale_parent * q_parent * t.
static func fk(skeleton: Dictionary, rotations: Array, translations: Array) -> Array:
	var pos = []
	var rot = []
	var scale = []
	var joints = skeleton["joints"]
	for j in range(joints.size()):
		var parent = int(joints[j]["parent"])
		var s = joints[j]["rest"]["scale"]
		if s == 0:
			s = 1.0
		if parent < 0:
			pos.append(translations[j])
			rot.append(rotations[j])
			scale.append(s)
			continue
		var offset = qrot(rot[parent], translations[j])
		pos.append([pos[parent][0] + scale[parent] * offset[0],
				pos[parent][1] + scale[parent] * offset[1],
				pos[parent][2] + scale[parent] * offset[2]])
		rot.append(qmul(rot[parent], rotations[j]))
		scale.append(scale[parent] * s)
	return [pos, rot]


# A pose (local rotations and translations, arrays per joint) the rest's.
static func rest_pose(skeleton: Dictionary) -> Dictionary:
	var rotations = []
	var translations = []
	for joint in skeleton["joints"]:
		rotations.append(joint["rest"]["rotation"])
		translations.append(joint["rest"]["translation"])
	return {"rotations": rotations, "translations": translations}


# `pose` with a SolveResponse's changed joints replaced.
static func applied(pose: Dictionary, answer: Dictionary) -> Dictionary:
	var rotations = pose["rotations"].duplicate()
	var translations = pose["translations"].duplicate()
	for k in range(answer["rotated_joints"].size()):
		rotations[int(answer["rotated_joints"][k])] = answer["rotations"][k]
	for k in range(answer["translated_joints"].size()):
		translations[int(answer["translated_joints"][k])] = answer["translations"][k]
	return {"rotations": rotations, "translations": translations}


static func joint_index(skeleton: Dictionary, name: String) -> int:
	for j in range(skeleton["joints"].size()):
		if skeleton["joints"][j]["name"] == name:
			return j
	return -1


# The largest distance between this file's FK of `pose` and the Skeleton
# node's own global bone positions (its evaluation of the applied poses).
func worst_node_vs_fk(node: Skeleton, skeleton: Dictionary, pose: Dictionary) -> float:
	var positions = fk(skeleton, pose["rotations"], pose["translations"])[0]
	var worst = 0.0
	for j in range(positions.size()):
		var bone = node.find_bone(skeleton["joints"][j]["name"])
		var origin = node.get_bone_global_pose(bone).origin
		worst = max(worst, dist(positions[j], [origin.x, origin.y, origin.z]))
	return worst


# ---- The tests ----------------------------------------------------------------

func _run():
	var readme_path = _arg("readme")
	# Relative to where Godot was started (--path changes the directory).
	if readme_path.is_rel_path() and OS.get_environment("PWD") != "":
		readme_path = OS.get_environment("PWD").plus_file(readme_path)
	if not check(readme_path != "" and OS.get_environment("REACH_HTTP_URL") != "",
			"given --readme and REACH_HTTP_URL"):
		return
	var state = _readme_example(readme_path)
	if state is GDScriptFunctionState:
		yield(state, "completed")
	state = _client_calls()
	if state is GDScriptFunctionState:
		yield(state, "completed")


# The README's gdscript blocks: [text, ...].
func _readme_blocks(path: String) -> Array:
	var file = File.new()
	if file.open(path, File.READ) != OK:
		return []
	var text = file.get_as_text()
	file.close()
	var blocks = []
	var parts = text.split("```gdscript\n")
	for i in range(1, parts.size()):
		blocks.append(parts[i].split("```")[0])
	return blocks


func _read(path: String) -> String:
	var file = File.new()
	if file.open(path, File.READ) != OK:
		return ""
	var text = file.get_as_text()
	file.close()
	return text


func _readme_example(readme_path: String):
	var blocks = _readme_blocks(readme_path)
	var example = ""
	for block in blocks:
		if block.begins_with("extends Spatial"):
			example = block
	if not check(example != "", "README: its example script (a gdscript block that extends Spatial)"):
		return
	check(example == _read("res://main.gd"), "README: the example is main.gd as shipped")
	var script = GDScript.new()
	script.source_code = example
	if not check(script.reload() == OK, "README: the example compiles"):
		return
	var main = load("res://main.tscn").instance()
	main.set_script(script)
	var solved = Waiter.new(main, "solved", self, WAIT_S)
	var streamed = Waiter.new(main, "streamed", self, 2 * WAIT_S)
	_keep.append(solved)
	_keep.append(streamed)
	root.add_child(main)
	var answer = yield(solved, "done")
	if not check(typeof(answer) == TYPE_DICTIONARY, "README example: the solve answered (%s)" % [str(answer).substr(0, 200)]):
		return
	var reach = main.get_node("ReachClient")
	var node = main.get_node("Rig/Skeleton")
	# The skeleton as the server has it, read back.
	var got = yield(await_call(reach.get_skeleton(main.skeleton_id)), "completed")
	if not check(got["ok"], "README example: get the registered skeleton back (%s)" % got.get("message", "")):
		return
	var skeleton = got["body"]["skeleton"]
	var pose = applied(rest_pose(skeleton), answer)
	var target = main.get_node("Target").global_transform.origin
	var hand = joint_index(skeleton, "LeftHand")
	var by_fk = fk(skeleton, pose["rotations"], pose["translations"])[0][hand]
	var error = dist(by_fk, [target.x, target.y, target.z])
	var result = answer["results"][0]
	check(result["reached"] and error <= result["tolerance"] * 1.01 + 1e-9,
			"README example: the left hand on $Target by this test's FK (%s, tolerance %s, reached %s)" % [e(error), e(result["tolerance"]), result["reached"]])
	check(abs(error - result["position_error"]) < 1e-6,
			"README example: the reported error %s is this test's FK's %s" % [e(result["position_error"]), e(error)])
	var streamed_value = yield(streamed, "done")
	if not check(typeof(streamed_value) == TYPE_ARRAY, "README example: the stream finished (%s)" % [str(streamed_value).substr(0, 200)]):
		return
	var answers = streamed_value[0]
	var status = streamed_value[1]
	check(status["code"] == "OK", "README example: the stream ended with status OK (%s)" % [status])
	var in_order = answers.size() == 30
	var worst = 0.0
	var right = joint_index(skeleton, "RightHand")
	var all_reached = true
	for frame in range(answers.size()):
		in_order = in_order and int(answers[frame]["sequence"]) == frame
		pose = applied(pose, answers[frame])
		var angle = TAU * frame / 30.0
		var point = [-0.4, 1.25 + 0.1 * sin(angle), 0.2 + 0.1 * cos(angle)]
		worst = max(worst, dist(fk(skeleton, pose["rotations"], pose["translations"])[0][right], point))
		all_reached = all_reached and answers[frame]["results"][0]["reached"]
	check(in_order, "README example: 30 answers, sequences 0..29 in order")
	check(all_reached and worst < 1e-4,
			"README example: every frame's right hand on its circle point by this test's FK (worst %s)" % e(worst))
	# The Skeleton node after the example applied every answer: its own
	# global bone poses against this test's FK of the same answers.
	var node_worst = worst_node_vs_fk(node, skeleton, pose)
	check(node_worst < 1e-4, "README example: the Skeleton node's bones = this test's FK (worst %s m)" % e(node_worst))
	var global_hand = node.global_transform.xform(node.get_bone_global_pose(node.find_bone("LeftHand")).origin)
	check(global_hand.distance_to(target) < 1e-4,
			"README example: the left hand's node still on $Target after the stream (%s)" % e(global_hand.distance_to(target)))
	main.queue_free()
	finished.append("readme")


func _client_calls():
	var reach = ReachClient.new()
	root.add_child(reach)
	var rig = load("res://rig.tscn").instance()
	# Moved, turned and scaled in the scene: targets go through
	# to_skeleton_space, answers stay in the node's space.
	rig.transform = Transform(Basis(Vector3(0, 1, 0), 0.7).scaled(Vector3(2, 2, 2)), Vector3(3, 0.5, -2))
	root.add_child(rig)
	var node = rig.get_node("Skeleton")
	var chains = [
		{"name": "left_arm", "root": "LeftUpperArm", "tip": "LeftHand"},
		{"name": "left_leg", "root": "LeftUpperLeg", "tip": "LeftFoot"},
	]

	# -- Register, and read back against the Skeleton node.
	var r = yield(await_call(reach.register_skeleton(node, "godot-test-rig", chains)), "completed")
	if not check(r["ok"] and r["body"]["skeleton_id"].length() == 64,
			"register: a 64-hex id (%s)" % [r.get("message", "")]):
		return
	var id = r["body"]["skeleton_id"]
	r = yield(await_call(reach.register_skeleton(node, "godot-test-rig", chains)), "completed")
	check(r["ok"] and not r["body"]["created"] and r["body"]["skeleton_id"] == id,
			"register again: the same id, created false")
	r = yield(await_call(reach.get_skeleton(id)), "completed")
	if not check(r["ok"], "get the skeleton"):
		return
	var skeleton = r["body"]["skeleton"]
	var order = reach.joint_order(node)
	var rest_worst = 0.0
	var names_ok = skeleton["joints"].size() == node.get_bone_count()
	for j in range(skeleton["joints"].size()):
		var joint = skeleton["joints"][j]
		var bone = order[j]
		names_ok = names_ok and joint["name"] == node.get_bone_name(bone)
		var parent = node.get_bone_parent(bone)
		names_ok = names_ok and int(joint["parent"]) == (order.find(parent) if parent >= 0 else -1)
		names_ok = names_ok and int(joint["parent"]) < j
	check(names_ok, "get the skeleton: 17 joints, each bone's name, parents before children")
	# The rest pose by this test's FK against the Skeleton node at rest.
	rest_worst = worst_node_vs_fk(node, skeleton, rest_pose(skeleton))
	check(rest_worst < 1e-5, "rest: this test's FK of the registered rests = the node's bones (worst %s m)" % e(rest_worst))

	# -- A full-body solve: targets for both hands and feet made by this
	#    test's FK of a pose (hips lowered and turned, limbs bent), so
	#    reachable by construction; the root free.
	var want = rest_pose(skeleton)
	var bends = {"Hips": [[0, 1, 0], 0.3], "LeftUpperArm": [[1, 0, 0.3], 0.6], "LeftLowerArm": [[0, 0, 1], 0.7],
			"RightUpperArm": [[1, 0.2, 0], -0.5], "RightLowerArm": [[0, 0, 1], -0.8],
			"LeftUpperLeg": [[1, 0, 0], -0.4], "LeftLowerLeg": [[1, 0, 0], 0.6],
			"RightUpperLeg": [[1, 0, 0], 0.2], "RightLowerLeg": [[1, 0, 0], 0.3]}
	for bone_name in bends:
		var j = joint_index(skeleton, bone_name)
		want["rotations"][j] = qmul(want["rotations"][j], axis_angle(bends[bone_name][0], bends[bone_name][1]))
	var hips_at = want["translations"][0]
	want["translations"][0] = [hips_at[0] + 0.02, hips_at[1] - 0.06, hips_at[2] + 0.03]
	var wanted = fk(skeleton, want["rotations"], want["translations"])[0]
	var tips = ["LeftHand", "RightHand", "LeftFoot", "RightFoot"]
	var goals = []
	for tip in tips:
		var p = wanted[joint_index(skeleton, tip)]
		# Given as points in the scene, as a game has them.
		var in_scene = node.global_transform.xform(Vector3(p[0], p[1], p[2]))
		goals.append({"tip_joint": tip, "solver": "SOLVER_FULL_BODY",
				"target": reach.to_skeleton_space(node, in_scene)})
	r = yield(await_call(reach.solve(reach.solve_request(node, id, goals, {"return_globals": true}))), "completed")
	if check(r["ok"], "full body: solved (%s)" % [r.get("message", "")]):
		var answer = r["body"]
		var pose = applied(rest_pose(skeleton), answer)
		var got = fk(skeleton, pose["rotations"], pose["translations"])
		var worst = 0.0
		var reached = true
		for k in range(tips.size()):
			var p = wanted[joint_index(skeleton, tips[k])]
			worst = max(worst, dist(got[0][joint_index(skeleton, tips[k])], p))
			reached = reached and answer["results"][k]["reached"]
		check(reached and worst < 1e-3,
				"full body: both hands and feet on their targets by this test's FK (worst %s m)" % e(worst))
		check(answer["translated_joints"].size() >= 1 and int(answer["translated_joints"][0]) == 0,
				"full body: the hips translated (%s)" % [answer["translated_joints"]])
		var globals_worst = 0.0
		for j in range(answer["globals"].size()):
			globals_worst = max(globals_worst, dist(answer["globals"][j]["translation"], got[0][j]))
		check(answer["globals"].size() == 17 and globals_worst < 1e-9,
				"full body: return_globals = this test's FK (worst %s)" % e(globals_worst))
		reach.apply_solve(node, answer)
		var node_worst = worst_node_vs_fk(node, skeleton, pose)
		check(node_worst < 1e-4, "full body: applied, the Skeleton node's bones = this test's FK (worst %s)" % e(node_worst))
		# pose_json of the posed node gives the same pose back.
		var back = reach.pose_json(node)
		var back_worst = 0.0
		for j in range(17):
			var a = pose["rotations"][j]
			var b = back["rotations"][j]
			var d = abs(a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3])
			back_worst = max(back_worst, 1.0 - d)
		check(back_worst < 1e-5 and dist(back["root_translation"], pose["translations"][0]) < 1e-5,
				"pose_json: the applied pose read back from the node (1 - |dot| worst %s)" % e(back_worst))

	# -- list and solve-batch: the skeleton listed; a batch's items equal
	#    their unary solves.
	r = yield(await_call(reach.list_skeletons()), "completed")
	var listed = false
	if r["ok"]:
		for summary in r["body"]["skeletons"]:
			listed = listed or (summary["skeleton_id"] == id and summary["joint_count"] == 17)
	check(listed, "list: the skeleton, 17 joints")
	var batch_targets = [wanted[joint_index(skeleton, "LeftHand")], wanted[joint_index(skeleton, "LeftFoot")]]
	var items = []
	for k in range(2):
		items.append({"sequence": k, "goals": [{"chain": ["left_arm", "left_leg"][k], "target": batch_targets[k]}]})
	r = yield(await_call(reach.solve_batch({"skeleton_id": id, "items": items})), "completed")
	if check(r["ok"] and r["body"]["items"].size() == 2, "solve-batch: two answers (%s)" % [r.get("message", "")]):
		var same = true
		for k in range(2):
			var single = yield(await_call(reach.solve({"skeleton_id": id, "goals": items[k]["goals"]})), "completed")
			same = same and single["ok"] and str(single["body"]["rotations"]) == str(r["body"]["items"][k]["rotations"])
			var pose = applied(rest_pose(skeleton), r["body"]["items"][k])
			var tip = joint_index(skeleton, ["LeftHand", "LeftFoot"][k])
			var tip_error = dist(fk(skeleton, pose["rotations"], pose["translations"])[0][tip], batch_targets[k])
			check(r["body"]["items"][k]["results"][0]["reached"] and tip_error < 1e-4,
					"solve-batch: item %d's tip on its target by this test's FK (%s)" % [k, e(tip_error)])
		check(same, "solve-batch: each item equals its unary solve")

	# -- A stream with a bad frame in it: that answer's own error names the
	#    field, the stream goes on.
	var stream = reach.open_solve_stream()
	var start = reach.pose_json(node)
	var arm_target = wanted[joint_index(skeleton, "LeftHand")]
	stream.send({"skeleton_id": id, "sequence": 1, "start_pose": start,
			"goals": [{"chain": "left_arm", "target": arm_target}]})
	stream.send({"skeleton_id": id, "sequence": 2, "goals": [{"chain": "left_arm", "target": [NAN, 1, 0]}]})
	stream.send({"skeleton_id": id, "sequence": 3, "start_pose": start,
			"goals": [{"chain": "left_arm", "target": [arm_target[0], arm_target[1] - 0.02, arm_target[2]]}]})
	stream.finish()
	var got_answers = []
	while true:
		var a = yield(wait(stream, "next"), "completed")
		if typeof(a) != TYPE_DICTIONARY:
			break
		got_answers.append(a)
	check(got_answers.size() == 3 and stream.status["code"] == "OK",
			"stream: 3 answers then status OK (%d, %s)" % [got_answers.size(), stream.status])
	if got_answers.size() == 3:
		var bad = got_answers[1].get("error", {})
		check(int(bad.get("code", 0)) == 3 and "goals[0].target" in str(bad.get("message", "")),
				"stream: the NaN frame's own error is INVALID_ARGUMENT naming goals[0].target (%s)" % [bad])
		var third = applied(rest_pose(skeleton), got_answers[2])
		for j in range(17):
			third["rotations"][j] = start["rotations"][j]
		third["translations"][0] = start["root_translation"]
		third = applied(third, got_answers[2])
		var hand = fk(skeleton, third["rotations"], third["translations"])[0][joint_index(skeleton, "LeftHand")]
		var hand_error = dist(hand, [arm_target[0], arm_target[1] - 0.02, arm_target[2]])
		check(got_answers[2]["results"][0]["reached"] and hand_error < 1e-4 and int(got_answers[2]["sequence"]) == 3,
				"stream: the frame after the bad one solved, by this test's FK (%s)" % e(hand_error))

	# -- Bad input: the server's error naming the field, surfaced.
	var failed = []
	reach.connect("request_failed", self, "_on_failed", [failed])
	r = yield(await_call(reach.solve({"skeleton_id": id, "goals": [{"chain": "left_arm", "target": [0.1, NAN, 0.2]}]})), "completed")
	check(not r["ok"] and r["status"] == 400 and r["code"] == "INVALID_ARGUMENT" and "goals[0].target" in r["message"],
			"a NaN target: 400 INVALID_ARGUMENT naming goals[0].target (%s %s)" % [r["status"], r["message"]])
	check(failed.size() == 1 and failed[0][0] == "INVALID_ARGUMENT" and failed[0][1] == r["message"],
			"a NaN target: request_failed emitted with the server's code and message")
	r = yield(await_call(reach.solve({"skeleton_id": id, "goals": [{"chain": "left_arm"}]})), "completed")
	check(not r["ok"] and r["status"] == 400 and "goals[0].target" in r["message"],
			"a goal without its target: 400 naming goals[0].target (%s)" % r["message"])
	r = yield(await_call(reach.solve({"goals": [{"chain": "left_arm", "target": [0.3, 1.2, 0.2]}]})), "completed")
	check(not r["ok"] and r["status"] == 400 and "skeleton_id" in r["message"],
			"no skeleton_id: 400 naming skeleton_id (%s)" % r["message"])
	r = yield(await_call(reach.solve({"skeleton_id": id, "goals": [{"chain": "tail", "target": [0.3, 1.2, 0.2]}]})), "completed")
	check(not r["ok"] and "tail" in r["message"] and "left_arm" in r["message"],
			"an unknown chain: named, with the chains there are (%s)" % r["message"])
	r = yield(await_call(reach.solve({"skeleton_id": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "goals": [{"chain": "left_arm", "target": [0.3, 1.2, 0.2]}]})), "completed")
	check(not r["ok"] and r["status"] == 404 and r["code"] == "NOT_FOUND",
			"an unknown skeleton: 404 NOT_FOUND (%s)" % r["message"])
	r = yield(await_call(reach.solve({"skeleton_id": id, "goals": [{"chain": "left_arm", "target": [0.3, 1.2]}]})), "completed")
	check(not r["ok"] and r["status"] == 400 and "goals[0].target" in r["message"],
			"a target of two numbers: 400 naming goals[0].target (%s)" % r["message"])
	# A rest the wire cannot carry is refused by the client, naming the bone.
	var squashed = load("res://rig.tscn").instance()
	root.add_child(squashed)
	var sk = squashed.get_node("Skeleton")
	sk.set_bone_rest(3, sk.get_bone_rest(3).scaled(Vector3(1, 2, 1)))
	r = yield(await_call(reach.register_skeleton(sk, "squashed")), "completed")
	check(not r["ok"] and r["code"] == "INVALID_ARGUMENT" and "Neck" in r["message"],
			"a non-uniform rest scale: refused by the client naming the bone (%s)" % r["message"])
	squashed.queue_free()

	# -- Tokens and roles (the server runs with --auth_tokens_file).
	var solver_token = OS.get_environment("REACH_SOLVE_TOKEN")
	if check(solver_token != "", "REACH_SOLVE_TOKEN given (a token with the solve role only)"):
		var anonymous = ReachClient.new()
		anonymous.token = "not-a-token"
		root.add_child(anonymous)
		r = yield(await_call(anonymous.list_skeletons()), "completed")
		check(not r["ok"] and r["status"] == 401 and r["code"] == "UNAUTHENTICATED",
				"a wrong token: 401 UNAUTHENTICATED (%s)" % r["message"])
		var wrong_stream = anonymous.open_solve_stream()
		yield(wait(wrong_stream, "closed") if not wrong_stream.is_closed() else _idle_state(), "completed")
		check(wrong_stream.is_closed() and wrong_stream.received == 0 and wrong_stream.status["code"] != "OK",
				"a wrong token: the stream is refused (%s)" % [wrong_stream.status])
		var solver = ReachClient.new()
		solver.token = solver_token
		root.add_child(solver)
		r = yield(await_call(solver.register_skeleton(node, "by-a-solver")), "completed")
		check(not r["ok"] and r["status"] == 403 and r["code"] == "PERMISSION_DENIED",
				"the solve role registers: 403 PERMISSION_DENIED (%s)" % r["message"])
		r = yield(await_call(solver.solve(solver.solve_request(node, id, [{"chain": "left_arm", "target": arm_target}]))), "completed")
		check(r["ok"] and r["body"]["results"][0]["reached"], "the solve role solves (%s)" % [r.get("message", "")])
		var solver_stream = solver.open_solve_stream()
		solver_stream.send(solver.solve_request(node, id, [{"chain": "left_arm", "target": arm_target}], {"sequence": 9}))
		var a = yield(wait(solver_stream, "next"), "completed")
		check(typeof(a) == TYPE_DICTIONARY and int(a["sequence"]) == 9 and a["results"][0]["reached"],
				"the solve role streams (the token in the handshake's Authorization header)")
		solver_stream.close()

	# -- A server that is not there: UNAVAILABLE, no hang.
	var nowhere = ReachClient.new()
	nowhere.base_url = "http://127.0.0.1:9"
	nowhere.timeout_s = 5.0
	root.add_child(nowhere)
	r = yield(await_call(nowhere.list_skeletons()), "completed")
	check(not r["ok"] and r["code"] in ["UNAVAILABLE", "DEADLINE_EXCEEDED"] and r["status"] == 0,
			"no server: %s, not a hang (%s)" % [r["code"], r["message"]])

	# -- Delete what this test made.
	r = yield(await_call(reach.delete_skeleton(id)), "completed")
	check(r["ok"], "delete the skeleton")
	r = yield(await_call(reach.get_skeleton(id)), "completed")
	check(not r["ok"] and r["status"] == 404, "deleted: get answers 404")
	finished.append("client")


func _on_failed(code, message, into):
	into.append([code, message])


func _idle_state():
	yield(self, "idle_frame")
