// Protobuf JSON as clients write it. Python's json module (and so any
// request built from Python floats) writes a non-finite float as the bare
// literal NaN, Infinity or -Infinity, which is not JSON: protobuf's parser
// then fails with "Couldn't parse NaN, use quoted "NaN"", naming no field.
// Read here as the quoted "NaN", "Infinity", "-Infinity" that protobuf JSON
// accepts, such a value reaches the service's own validation, which names
// its field ("goals[0].target = (nan, 0, 0) is not finite").
#ifndef REACH_WIRE_JSON_H_
#define REACH_WIRE_JSON_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace reach {

// google::protobuf::util::JsonStringToMessage, and when that fails on a
// text holding bare NaN / Infinity / -Infinity values, again with them
// quoted. Errors are InvalidArgument with protobuf's message.
absl::Status JsonToMessage(absl::string_view json,
                           google::protobuf::Message* message);

// `json` with every bare NaN, Infinity and -Infinity outside strings
// quoted; `*count` (if given) is how many.
std::string QuoteNonFiniteLiterals(absl::string_view json,
                                   int* count = nullptr);

}  // namespace reach

#endif  // REACH_WIRE_JSON_H_
