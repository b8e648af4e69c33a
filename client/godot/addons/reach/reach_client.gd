# ReachClient: Reach's HTTP/JSON + WebSocket API (/api/v1, docs/openapi.yaml
# in the Reach repository) from Godot 3, with no gRPC: register a Skeleton
# node's bones, solve chain and full-body goals, stream solves over a
# WebSocket, and put the answers on the Skeleton.
#
# Add this script to a Node in the scene tree (it owns the HTTPRequest
# nodes of its calls and polls its streams in _process). Every call is a
# coroutine: `var r = yield(reach.solve(request), "completed")`; `r` is
#   {"ok": true, "status": 200, "body": <the answer, parsed>}
# or
#   {"ok": false, "status": 400, "code": "INVALID_ARGUMENT",
#    "message": "goals[0].target: ...", "body": <the error, parsed>}
# (the server's own code and message; a transport failure is code
# UNAVAILABLE, status 0). A failed call also emits `request_failed`.
#
# Conventions (the wire's, see client/godot/README.md): Reach's model space
# is the Skeleton node's local space (a world point goes through
# to_skeleton_space); Reach never converts units. A quaternion is
# [x, y, z, w] (Godot's Quat order, both right-handed). A joint's rotation
# on the wire is its LOCAL rotation, the whole of it: a joint at rest has
# rest.rotation, so a Godot bone pose (relative to the rest) is
# rest.inverse() * local. Reach wants parents before children; the joint
# order here is the Skeleton's bones sorted so, joint_order() maps it.
extends Node

signal request_failed(code, message)

# Empty: the environment's REACH_HTTP_URL, else http://127.0.0.1:9465.
export var base_url = ""
# A bearer token of the server's --auth_tokens_file; empty: REACH_TOKEN.
export var token = ""
# Seconds a call may take before it fails with DEADLINE_EXCEEDED.
export var timeout_s = 20.0

const SolveStream = preload("res://addons/reach/solve_stream.gd")

var _streams = []


func url() -> String:
	var u = base_url
	if u == "":
		u = OS.get_environment("REACH_HTTP_URL")
	if u == "":
		u = "http://127.0.0.1:9465"
	return u.trim_suffix("/")


func bearer() -> String:
	return token if token != "" else OS.get_environment("REACH_TOKEN")


# ---- The API's routes --------------------------------------------------------

# Registers `skeleton` (its bones, parents and rests) with `chains`
# ([{"name": "left_arm", "root": "LeftUpperArm", "tip": "LeftHand"}]).
# The answer's body: {"skeleton_id", "version", "created"}.
func register_skeleton(skeleton: Skeleton, skeleton_name: String, chains := []):
	var body = skeleton_json(skeleton, skeleton_name, chains)
	if body.has("error"):
		return _fail_later(0, "INVALID_ARGUMENT", body["error"])
	return call_api(HTTPClient.METHOD_POST, "/api/v1/skeletons", {"skeleton": body})


func get_skeleton(skeleton_id: String):
	return call_api(HTTPClient.METHOD_GET, "/api/v1/skeletons/" + skeleton_id.percent_encode())


func list_skeletons():
	return call_api(HTTPClient.METHOD_GET, "/api/v1/skeletons")


func delete_skeleton(skeleton_id: String):
	return call_api(HTTPClient.METHOD_DELETE, "/api/v1/skeletons/" + skeleton_id.percent_encode())


# One SolveRequest (a Dictionary in the API's JSON).
func solve(request: Dictionary):
	return call_api(HTTPClient.METHOD_POST, "/api/v1/solve", request)


func solve_batch(request: Dictionary):
	return call_api(HTTPClient.METHOD_POST, "/api/v1/solve-batch", request)


# A SolveRequest for `skeleton` as it is posed now: its goals, its
# start_pose the Skeleton's current pose (so apply_solve's answer, which
# holds only the joints that changed, puts every bone where the solve left
# it). `extra` is merged in (full_body, return_globals, sequence, ...).
func solve_request(skeleton: Skeleton, skeleton_id: String, goals: Array, extra := {}) -> Dictionary:
	var request = {"skeleton_id": skeleton_id, "start_pose": pose_json(skeleton), "goals": goals}
	for key in extra:
		request[key] = extra[key]
	return request


# A WebSocket to /api/v1/solve-stream (solve_stream.gd): send() a
# SolveRequest per frame, `answered` gives each answer in order, `closed`
# the stream's last status. Polled by this node while it is in the tree.
func open_solve_stream():
	var ws_url = url().replace("http://", "ws://").replace("https://", "wss://")
	ws_url += "/api/v1/solve-stream"
	# The token in the handshake's header, as the calls send it (not in
	# the URL's ?access_token=, which logs and proxies may keep).
	var headers = []
	if bearer() != "":
		headers.append("Authorization: Bearer " + bearer())
	var stream = SolveStream.new(ws_url, headers)
	_streams.append(stream)
	return stream


func _process(_delta):
	for stream in _streams.duplicate():
		stream.poll()
		if stream.is_closed():
			_streams.erase(stream)


# Any route: `body` a Dictionary (sent as JSON), a String (sent as it is)
# or null. Coroutine; see the top of this file for the result.
func call_api(method: int, path: String, body = null):
	var http = HTTPRequest.new()
	add_child(http)
	if "timeout" in http:
		http.timeout = timeout_s
	var headers = ["Accept: application/json"]
	var data = ""
	if body != null:
		headers.append("Content-Type: application/json")
		data = body if typeof(body) == TYPE_STRING else to_json_text(body)
	if bearer() != "":
		headers.append("Authorization: Bearer " + bearer())
	var err = http.request(url() + path, headers, true, method, data)
	if err != OK:
		http.queue_free()
		return _fail_later(0, "UNAVAILABLE", "%s: the request did not start (error %d)" % [url() + path, err])
	var done = yield(http, "request_completed")
	http.queue_free()
	var result = done[0]
	var status = done[1]
	if result != HTTPRequest.RESULT_SUCCESS:
		var code = "DEADLINE_EXCEEDED" if result == HTTPRequest.RESULT_TIMEOUT else "UNAVAILABLE"
		return _failed(0, code, "%s: no answer (HTTPRequest result %d)" % [url() + path, result])
	var text = done[3].get_string_from_utf8()
	var parsed = JSON.parse(text)
	var answer = parsed.result if parsed.error == OK else text
	if status == 200:
		return {"ok": true, "status": status, "body": answer}
	if typeof(answer) == TYPE_DICTIONARY and answer.has("code") and answer.has("message"):
		var failed = _failed(status, str(answer["code"]), str(answer["message"]))
		failed["body"] = answer
		return failed
	return _failed(status, "UNKNOWN", "%s: HTTP %d: %s" % [path, status, text.substr(0, 300)])


func _failed(status: int, code: String, message: String) -> Dictionary:
	emit_signal("request_failed", code, message)
	return {"ok": false, "status": status, "code": code, "message": message, "body": null}


# A failure found before any request: still a coroutine that yields once,
# so that `yield(call, "completed")` never waits forever.
func _fail_later(status: int, code: String, message: String):
	yield(get_tree(), "idle_frame")
	return _failed(status, code, message)


# ---- Skeletons, poses and answers ---------------------------------------------

# The Skeleton's bone indices in Reach's joint order: parents before
# children (Godot allows any order), roots and siblings in bone order.
func joint_order(skeleton: Skeleton) -> Array:
	var children = {}
	var order = []
	for bone in range(skeleton.get_bone_count()):
		var parent = skeleton.get_bone_parent(bone)
		if not children.has(parent):
			children[parent] = []
		children[parent].append(bone)
	var stack = []
	var roots = children.get(-1, [])
	for i in range(roots.size() - 1, -1, -1):
		stack.append(roots[i])
	while not stack.empty():
		var bone = stack.pop_back()
		order.append(bone)
		var kids = children.get(bone, [])
		for i in range(kids.size() - 1, -1, -1):
			stack.append(kids[i])
	return order


# The Skeleton as Reach's skeleton JSON: {"name", "joints", "chains"}, or
# {"error": why} when a rest cannot be one (non-uniform scale).
func skeleton_json(skeleton: Skeleton, skeleton_name: String, chains := []) -> Dictionary:
	var order = joint_order(skeleton)
	var index_of = {}
	for j in range(order.size()):
		index_of[order[j]] = j
	var joints = []
	for bone in order:
		var rest = skeleton.get_bone_rest(bone)
		var scale = rest.basis.get_scale()
		if abs(scale.x - scale.y) > 1e-4 * abs(scale.x) or abs(scale.x - scale.z) > 1e-4 * abs(scale.x):
			return {"error": "bone '%s': its rest has a non-uniform scale %s; Reach's joints scale uniformly" % [skeleton.get_bone_name(bone), scale]}
		var parent = skeleton.get_bone_parent(bone)
		joints.append({
			"name": skeleton.get_bone_name(bone),
			"parent": index_of[parent] if parent >= 0 else -1,
			"rest": {
				"translation": vec3_json(rest.origin),
				"rotation": quat_json(rest.basis.orthonormalized().get_rotation_quat()),
				"scale": scale.x,
			},
		})
	return {"name": skeleton_name, "joints": joints, "chains": chains}


# The Skeleton's current pose as a Reach Pose: every joint's local rotation
# (rest * pose) and the root's translation.
func pose_json(skeleton: Skeleton) -> Dictionary:
	var rotations = []
	var order = joint_order(skeleton)
	for bone in order:
		rotations.append(quat_json(_local(skeleton, bone).basis.orthonormalized().get_rotation_quat()))
	return {"rotations": rotations, "root_translation": vec3_json(_local(skeleton, order[0]).origin)}


# Puts a SolveResponse on the Skeleton: each rotated joint's bone gets the
# pose that makes its local rotation the answer's (rest.inverse() * local),
# each translated joint's its local translation. Joints the answer leaves
# out keep their pose (the request's start_pose: see solve_request).
func apply_solve(skeleton: Skeleton, answer: Dictionary) -> void:
	var order = joint_order(skeleton)
	var rotations = {}
	var translations = {}
	for k in range(answer["rotated_joints"].size()):
		rotations[int(answer["rotated_joints"][k])] = answer["rotations"][k]
	for k in range(answer["translated_joints"].size()):
		translations[int(answer["translated_joints"][k])] = answer["translations"][k]
	var touched = rotations.keys()
	for j in translations.keys():
		if not rotations.has(j):
			touched.append(j)
	for j in touched:
		var bone = order[j]
		var rest = skeleton.get_bone_rest(bone)
		var local = _local(skeleton, bone)
		if rotations.has(j):
			var s = rest.basis.get_scale().x
			local.basis = Basis(json_quat(rotations[j])).scaled(Vector3(s, s, s))
		if translations.has(j):
			local.origin = json_vec3(translations[j])
		skeleton.set_bone_pose(bone, rest.affine_inverse() * local)


# A point in the scene (global) in the Skeleton's model space, which is
# the space of Reach's targets and poles.
func to_skeleton_space(skeleton: Skeleton, global_point: Vector3) -> Vector3:
	return skeleton.global_transform.affine_inverse().xform(global_point)


func _local(skeleton: Skeleton, bone: int) -> Transform:
	return skeleton.get_bone_rest(bone) * skeleton.get_bone_pose(bone)


static func vec3_json(v: Vector3) -> Array:
	return [v.x, v.y, v.z]


static func quat_json(q: Quat) -> Array:
	q = q.normalized()
	return [q.x, q.y, q.z, q.w]


static func json_vec3(a) -> Vector3:
	return Vector3(a[0], a[1], a[2])


static func json_quat(a) -> Quat:
	return Quat(a[0], a[1], a[2], a[3])


# JSON with every number's digits (Godot 3's JSON.print keeps six) and a
# non-finite number as the bare NaN / Infinity the server reads and names
# the field of, rather than a string it would refuse as the wrong type.
static func to_json_text(value) -> String:
	match typeof(value):
		TYPE_NIL:
			return "null"
		TYPE_BOOL:
			return "true" if value else "false"
		TYPE_INT:
			return str(value)
		TYPE_REAL:
			if is_nan(value):
				return "NaN"
			if is_inf(value):
				return "Infinity" if value > 0 else "-Infinity"
			if value == int(value) and abs(value) < 1e15:
				return str(int(value))
			return "%.17f" % value
		TYPE_STRING:
			return JSON.print(value)
		TYPE_VECTOR3:
			return to_json_text(vec3_json(value))
		TYPE_QUAT:
			return to_json_text(quat_json(value))
		TYPE_DICTIONARY:
			var parts = []
			for key in value:
				parts.append(JSON.print(str(key)) + ":" + to_json_text(value[key]))
			return "{" + PoolStringArray(parts).join(",") + "}"
		TYPE_ARRAY, TYPE_REAL_ARRAY, TYPE_INT_ARRAY, TYPE_STRING_ARRAY:
			var parts = []
			for item in value:
				parts.append(to_json_text(item))
			return "[" + PoolStringArray(parts).join(",") + "]"
	return JSON.print(str(value))
