// SolveBatch on the wire, item by item: the server takes a SolveBatch
// request as bytes, finds each item's bytes without parsing the whole
// message, and lets every solver worker parse, solve and serialize its own
// items. The serial parse and serialize of the full ~640 KB of a
// 1000-character call would otherwise run on one thread while the other
// cores wait. The wire format is the same SolveBatchRequest/Response.
#ifndef REACH_SERVER_BATCH_WIRE_H_
#define REACH_SERVER_BATCH_WIRE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "google/protobuf/message_lite.h"
#include "solvers/goal.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"

namespace reach {

// A serialized SolveBatchRequest, split: views into its bytes.
struct BatchRequestView {
  std::vector<absl::string_view> items;  // Each `items` entry, in order.
  absl::string_view skeleton_id;         // The batch's default skeleton.
};

// Finds every `items` entry (field 1) of a serialized SolveBatchRequest and
// its `skeleton_id` (field 2; the last one wins, as when parsing); other
// fields are skipped as a parser would. InvalidArgument names the byte
// offset when the message is malformed, and stops at once when there are
// more than `max_items` items (a 16 MB request of empty items would
// otherwise make millions of views).
absl::Status SplitBatchItems(absl::string_view request, int max_items,
                             BatchRequestView* out);

// Reads a serialized SolveRequest's top-level `skeleton_id` and
// `return_globals` (the last of each wins, as when parsing) without parsing
// the rest, so a batch's response size can be bounded before any item is
// solved. False when the bytes are malformed at the top level (the item's
// own parse then reports it).
bool ScanSolveRequest(absl::string_view request, absl::string_view* skeleton_id,
                      bool* return_globals);

// Appends `response` (a SolveResponse) serialized as an `items` entry of a
// SolveBatchResponse: the concatenation of such entries is the message.
void AppendBatchItem(const google::protobuf::MessageLite& response,
                     std::string* out);

// Appends, as an `items` entry of a SolveBatchResponse, the SolveResponse
// that ToProto(skeleton, start, solved, results) with `sequence` would
// serialize to, byte for byte, written straight from the solve: no message
// is built, sized and serialized field by field. `changed` is scratch (it
// keeps its capacity from call to call).
void AppendSolvedItem(const Skeleton& skeleton, uint64_t sequence,
                      const Pose& start, const Pose& solved,
                      absl::Span<const GoalResult> results,
                      std::vector<uint32_t>* changed, std::string* out);

}  // namespace reach

#endif  // REACH_SERVER_BATCH_WIRE_H_
