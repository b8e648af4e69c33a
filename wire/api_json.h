// The JSON of the HTTP API (/api/v1, docs/openapi.yaml), which game engines
// and scripts call without a protobuf library: protobuf's JSON mapping of
// the reach.v1 messages with the proto's own field names (snake_case, as
// the service's error messages name them; lowerCamelCase is read too), and
// three simplifications a client can apply without knowing the protos:
//
//   - a Vec3 is an array [x, y, z];
//   - a Quat is an array [x, y, z, w] (the order Godot, Unity and three.js
//     construct quaternions in; the proto's own field order is w, x, y, z);
//   - a SolveResponse's flat `rotations` (w, x, y, z per rotated joint) is
//     an array of [x, y, z, w] arrays, and its flat `translations` an array
//     of [x, y, z] arrays, one per entry of rotated_joints /
//     translated_joints;
//
// and 64-bit integers (versions, sequences) are JSON numbers, not the
// strings protobuf writes. Every field is written, defaults included, so
// an answer's shape does not depend on its values, and an object's keys
// come in the proto's field order. Requests may still give
// a Vec3 or Quat as protobuf's {"x": ..} object.
#ifndef REACH_WIRE_API_JSON_H_
#define REACH_WIRE_API_JSON_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace reach {

// Reads `json` (an object; bare NaN / Infinity read as JsonToMessage does)
// into `message`. Errors are InvalidArgument naming the field
// ("goals[0].target: [x, y, z] needs 3 numbers, got 2") or protobuf's
// message for what protobuf refuses.
absl::Status ApiJsonToMessage(absl::string_view json,
                              google::protobuf::Message* message);

// `message` in the API's JSON.
absl::StatusOr<std::string> MessageToApiJson(
    const google::protobuf::Message& message);

}  // namespace reach

#endif  // REACH_WIRE_API_JSON_H_
