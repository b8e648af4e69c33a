// Fuzz target: SolveBatch's wire handling, in process. The input is the
// bytes of a SolveBatchRequest as the server receives them.
//
// SplitBatchItems must agree with protobuf's own parser: it succeeds exactly
// when the bytes parse as a message (google::protobuf::UnknownFieldSet, which
// checks the wire format alone, as the splitter does), and then finds the
// same length-delimited `items` (field 1) in order and the last
// length-delimited `skeleton_id` (field 2). Its item limit stops it with
// INVALID_ARGUMENT when there are more items than allowed. Whatever the
// generated SolveBatchRequest parser accepts, the split finds the same
// items, each parsing to the same SolveRequest.
//
// A split of at most 16 items, with a printable skeleton_id as the service
// demands, is then solved as one chunk by SolveBatchItems (each item
// parsed, solved against its skeleton in a registry of the fixture rigs,
// answered in place; 5 ms deadline): the output must parse as a
// SolveBatchResponse with one item per request item, in order, each with
// its request's sequence, and an error or results for every item.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/unknown_field_set.h"
#include "server/batch_wire.h"
#include "server/metrics.h"
#include "server/registry.h"
#include "server/skeleton_store.h"
#include "server/solve_call.h"
#include "tests/fuzz/fuzz_support.h"

namespace reach::fuzz {
namespace {

constexpr int kMaxItems = 64;     // Split limit (the server: --max_batch).
constexpr int kMaxSolved = 16;    // Items solved per execution.
constexpr double kDeadlineMs = 5.0;
constexpr SolveLimits kLimits{/*max_goals=*/8, /*max_iterations=*/1000};

struct Service {
  std::unique_ptr<Registry> registry;
  Metrics metrics;
  SolveScratch scratch;
};

Service& GetService() {
  static Service* const service = [] {
    auto* out = new Service;
    absl::StatusOr<std::unique_ptr<Registry>> registry =
        Registry::Create(NewMemoryStore(), SkeletonLimits{});
    REACH_FUZZ_CHECK(registry.ok(), registry.status().ToString());
    out->registry = *std::move(registry);
    for (const v1::Skeleton& skeleton : FixtureSkeletons()) {
      REACH_FUZZ_CHECK(out->registry->Register(skeleton).ok(), "fixture");
    }
    return out;
  }();
  return *service;
}

void CheckSplit(absl::string_view bytes) {
  BatchRequestView view;
  const absl::Status split = SplitBatchItems(bytes, kMaxItems, &view);

  google::protobuf::UnknownFieldSet fields;
  const bool parses = fields.ParseFromArray(bytes.data(),
                                            static_cast<int>(bytes.size()));
  std::vector<std::string> items;
  std::string skeleton_id;
  if (parses) {
    for (int i = 0; i < fields.field_count(); ++i) {
      const google::protobuf::UnknownField& field = fields.field(i);
      if (field.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
        continue;
      }
      if (field.number() == 1) items.push_back(field.length_delimited());
      if (field.number() == 2) skeleton_id = field.length_delimited();
    }
  }
  if (parses && static_cast<int>(items.size()) > kMaxItems) {
    REACH_FUZZ_CHECK(split.code() == absl::StatusCode::kInvalidArgument,
                     absl::StrCat("more than ", kMaxItems, " items: ",
                                  split.ToString()));
    return;
  }
  REACH_FUZZ_CHECK(split.ok() == parses,
                   absl::StrCat("split says ", split.ToString(),
                                "; protobuf's parser says ",
                                parses ? "valid" : "invalid"));
  if (!split.ok()) {
    REACH_FUZZ_CHECK(split.code() == absl::StatusCode::kInvalidArgument,
                     split.ToString());
    return;
  }
  REACH_FUZZ_CHECK(view.items.size() == items.size(),
                   absl::StrCat(view.items.size(), " items split, ",
                                items.size(), " parsed"));
  for (size_t i = 0; i < items.size(); ++i) {
    REACH_FUZZ_CHECK(view.items[i] == items[i], absl::StrCat("items[", i, "]"));
  }
  REACH_FUZZ_CHECK(view.skeleton_id == skeleton_id, "skeleton_id");
  // The generated parser, which also parses each item (and checks UTF-8),
  // accepts less; what it accepts, the split must have found the same.
  v1::SolveBatchRequest parsed;
  if (parsed.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    REACH_FUZZ_CHECK(parsed.items_size() == static_cast<int>(items.size()),
                     "items of the generated parser");
    REACH_FUZZ_CHECK(parsed.skeleton_id() == view.skeleton_id,
                     "skeleton_id of the generated parser");
    for (int i = 0; i < parsed.items_size(); ++i) {
      v1::SolveRequest item;
      REACH_FUZZ_CHECK(item.ParseFromArray(view.items[i].data(),
                                           static_cast<int>(
                                               view.items[i].size())),
                       absl::StrCat("items[", i, "] parses in the batch"));
      REACH_FUZZ_CHECK(item.SerializeAsString() ==
                           parsed.items(i).SerializeAsString(),
                       absl::StrCat("items[", i, "]"));
    }
  }

  if (view.items.empty() || view.items.size() > kMaxSolved) return;
  for (const char c : view.skeleton_id) {
    if (c < 0x20 || c > 0x7e) return;  // The service refuses these first.
  }
  Service& service = GetService();
  std::string out;
  const int n = static_cast<int>(view.items.size());
  SolveBatchItems(view, 0, n, *service.registry, kLimits,
                  Deadline::In(kDeadlineMs), &service.metrics,
                  service.scratch, &out);
  v1::SolveBatchResponse response;
  REACH_FUZZ_CHECK(response.ParseFromString(out),
                   "the batch response does not parse");
  REACH_FUZZ_CHECK(response.items_size() == n,
                   absl::StrCat(response.items_size(), " answers for ", n,
                                " items"));
  for (int i = 0; i < n; ++i) {
    const v1::SolveResponse& answer = response.items(i);
    v1::SolveRequest item;
    if (item.ParseFromArray(view.items[i].data(),
                            static_cast<int>(view.items[i].size()))) {
      REACH_FUZZ_CHECK(answer.sequence() == item.sequence(),
                       absl::StrCat("items[", i, "].sequence"));
      if (!answer.has_error()) {
        REACH_FUZZ_CHECK(answer.results_size() == item.goals_size(),
                         absl::StrCat("items[", i, "] results"));
      }
    } else {
      REACH_FUZZ_CHECK(answer.has_error(),
                       absl::StrCat("items[", i, "] does not parse"));
    }
    REACH_FUZZ_CHECK(!answer.has_error() || (answer.error().code() != 0 &&
                                            !answer.error().message().empty()),
                     absl::StrCat("items[", i, "].error"));
  }
}

}  // namespace
}  // namespace reach::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  reach::fuzz::QuietProtobufLogs();
  reach::fuzz::GetService();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  reach::fuzz::CheckSplit(
      absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
