# A solve stream: a WebSocket to /api/v1/solve-stream (made by
# ReachClient.open_solve_stream, which polls it). send() one SolveRequest
# per frame, any time (before the socket is open they wait); the server
# answers each, in order, with its `sequence`: `answered(answer)`. A
# frame's own failure is that answer's "error" ({"code": 3, "message"})
# and the stream goes on. finish() says no more frames; then the server
# answers the rest and ends with {"status": {"code": "OK", ...}}:
# `closed(status)`. `next` gives each answer and then null when the stream
# is closed: the signal to yield on for "the next answer". A stream the
# server ends early (a limit, a bad frame)
# or a socket that fails also ends with `closed`, its status saying why.
extends Reference

signal connected
signal answered(answer)
signal closed(status)
# Each answer, as `answered`; then null once the stream is closed (so a
# `yield(stream, "next")` never waits for an answer that cannot come).
signal next(answer)

var _ws = WebSocketClient.new()
var _url = ""
var _open = false
var _closed = false
var _pending = []  # Messages sent before the socket opened.
var status = null  # The stream's last status, once closed.
var sent = 0  # Requests sent.
var received = 0  # Answers received.


# `headers`: the handshake's extra headers ("Authorization: Bearer ...").
func _init(url: String, headers := []):
	_url = url
	_ws.connect("connection_established", self, "_on_established")
	_ws.connect("connection_error", self, "_on_error")
	_ws.connect("connection_closed", self, "_on_closed")
	_ws.connect("data_received", self, "_on_data")
	var err = _ws.connect_to_url(url, PoolStringArray(), false, PoolStringArray(headers))
	if err != OK:
		_end({"code": "UNAVAILABLE", "message": "%s: could not connect (error %d)" % [_url, err]})


func is_open() -> bool:
	return _open and not _closed


func is_closed() -> bool:
	return _closed


# One SolveRequest (a Dictionary, or JSON text as it is).
func send(request) -> void:
	var ReachClient = load("res://addons/reach/reach_client.gd")
	_put(request if typeof(request) == TYPE_STRING else ReachClient.to_json_text(request))
	sent += 1


# No more frames: the answers to those sent follow, then the status.
func finish() -> void:
	_put(" ")  # Blank: Godot 3 cannot send an empty message.


# Drops the stream without waiting for its answers.
func close() -> void:
	if not _closed:
		_ws.disconnect_from_host()
		_end({"code": "CANCELLED", "message": "closed by the client"})


func poll() -> void:
	if not _closed:
		_ws.poll()


func _put(text: String) -> void:
	if _closed:
		return
	if not _open:
		_pending.append(text)
		return
	_ws.get_peer(1).put_packet(text.to_utf8())


func _on_established(_protocol):
	_open = true
	# Requests are JSON text; Godot's default would be binary frames.
	_ws.get_peer(1).set_write_mode(WebSocketPeer.WRITE_MODE_TEXT)
	emit_signal("connected")
	for text in _pending:
		_ws.get_peer(1).put_packet(text.to_utf8())
	_pending.clear()


func _on_data():
	var peer = _ws.get_peer(1)
	while peer.get_available_packet_count() > 0:
		var text = peer.get_packet().get_string_from_utf8()
		var parsed = JSON.parse(text)
		if parsed.error != OK or typeof(parsed.result) != TYPE_DICTIONARY:
			_ws.disconnect_from_host()
			_end({"code": "INTERNAL", "message": "not a JSON object from the server: " + text.substr(0, 200)})
			return
		var message = parsed.result
		if message.has("status") and message.size() == 1:
			status = message["status"]
			continue
		received += 1
		emit_signal("answered", message)
		emit_signal("next", message)


func _on_error():
	_end({"code": "UNAVAILABLE", "message": "%s: the WebSocket failed (refused, or a missing or wrong token)" % _url})


func _on_closed(_was_clean):
	if status == null:
		status = {"code": "UNAVAILABLE", "message": "%s: closed without a status" % _url}
	_end(status)


func _end(final_status: Dictionary) -> void:
	if _closed:
		return
	_closed = true
	status = final_status
	emit_signal("closed", final_status)
	emit_signal("next", null)
