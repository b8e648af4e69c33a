// Fuzz target: RegisterSkeleton and GetSkeleton as the service runs them,
// in process: a reach.v1.Skeleton parsed from the wire, Registry::Register
// (FromProto, Skeleton::Create, the content id, the store), then the
// definition read back as GetSkeleton returns it.
//
// Input: a serialized reach.v1.Skeleton, or, after a first byte 0xFF (never
// the start of a parsable one), bytes for BuildSkeleton (fuzz_support.h),
// which makes mostly valid skeletons of up to 64 joints.
//
// Checked: a refusal is INVALID_ARGUMENT with a message, and stores
// nothing. A registration is found under its id, which is SkeletonId of the
// definition; registering it again, or its GetSkeleton bytes parsed back,
// gives the same id with created = false; its canonical JSON (what `reach
// get` prints) parsed back registers too, under the id of the definition
// without unknown fields (JSON drops them); the solver definition written
// back to the wire (ToProto, as the client's tools do) registers; a delete
// forgets it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "reach/v1/ik_service.pb.h"
#include "wire/convert.h"
#include "server/registry.h"
#include "server/skeleton_store.h"
#include "tests/fuzz/fuzz_support.h"

namespace reach::fuzz {
namespace {

std::unique_ptr<Registry> NewRegistry() {
  absl::StatusOr<std::unique_ptr<Registry>> registry =
      Registry::Create(NewMemoryStore(), SkeletonLimits{});
  REACH_FUZZ_CHECK(registry.ok(), registry.status().ToString());
  return *std::move(registry);
}

// Registers `definition` in `registry`, expecting it to be accepted under
// `id`, as a new or a known skeleton.
void ExpectRegisters(Registry& registry, const v1::Skeleton& definition,
                     const std::string& id, bool created,
                     const char* what) {
  const absl::StatusOr<RegisterResult> again = registry.Register(definition);
  REACH_FUZZ_CHECK(again.ok(),
                   absl::StrCat(what, ": ", again.status().ToString()));
  REACH_FUZZ_CHECK(again->id == id,
                   absl::StrCat(what, ": id ", again->id, " != ", id));
  REACH_FUZZ_CHECK(again->created == created,
                   absl::StrCat(what, ": created ", again->created));
}

void RegisterAndReadBack(const v1::Skeleton& definition) {
  std::unique_ptr<Registry> registry = NewRegistry();
  const absl::StatusOr<RegisterResult> registered =
      registry->Register(definition);
  if (!registered.ok()) {
    REACH_FUZZ_CHECK(
        registered.status().code() == absl::StatusCode::kInvalidArgument,
        registered.status().ToString());
    REACH_FUZZ_CHECK(!registered.status().message().empty(), "no message");
    REACH_FUZZ_CHECK(registry->size() == 0, "a refused skeleton was kept");
    return;
  }
  const std::string& id = registered->id;
  REACH_FUZZ_CHECK(registered->created && registered->version == 1,
                   "first registration");
  REACH_FUZZ_CHECK(id == SkeletonId(definition), "id is not SkeletonId");
  const std::shared_ptr<const RegisteredSkeleton> found = registry->Find(id);
  REACH_FUZZ_CHECK(found != nullptr, "registered but not found");
  REACH_FUZZ_CHECK(found->num_joints == definition.joints_size(),
                   "joint count");
  REACH_FUZZ_CHECK(
      static_cast<int>(found->chain_names.size()) == definition.chains_size(),
      "chain count");
  const std::shared_ptr<const LoadedSkeleton> loaded = registry->Load(id);
  REACH_FUZZ_CHECK(loaded != nullptr &&
                       loaded->skeleton.num_joints() == found->num_joints,
                   "loaded joint count");

  ExpectRegisters(*registry, definition, id, false, "again");

  // GetSkeleton's answer (the stored bytes, parsed), over the wire and back.
  v1::Skeleton stored;
  REACH_FUZZ_CHECK(stored.ParseFromString(loaded->definition_bytes),
                   "stored definition does not parse");
  v1::GetSkeletonResponse get;
  get.set_skeleton_id(id);
  get.set_version(found->version);
  *get.mutable_skeleton() = stored;
  v1::GetSkeletonResponse got;
  REACH_FUZZ_CHECK(got.ParseFromString(get.SerializeAsString()),
                   "GetSkeletonResponse does not parse back");
  REACH_FUZZ_CHECK(SkeletonId(got.skeleton()) == id, "wire round trip id");
  ExpectRegisters(*registry, got.skeleton(), id, false, "wire round trip");

  // The canonical JSON form, as `reach get` prints it and `reach register`
  // reads it. JSON has no unknown fields.
  v1::Skeleton known = stored;
  known.DiscardUnknownFields();
  const std::string known_id = SkeletonId(known);
  std::string json;
  const auto printed =
      google::protobuf::util::MessageToJsonString(stored, &json);
  REACH_FUZZ_CHECK(printed.ok(), printed.ToString());
  v1::Skeleton from_json;
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, &from_json);
  REACH_FUZZ_CHECK(parsed.ok(), absl::StrCat(parsed.ToString(), ": ", json));
  REACH_FUZZ_CHECK(SkeletonId(from_json) == known_id,
                   absl::StrCat("JSON round trip changes the id: ", json));
  ExpectRegisters(*registry, from_json, known_id, known_id != id,
                  "JSON round trip");

  // The solver's definition back on the wire (ToProto), as tools that build
  // skeletons in code send them.
  SkeletonDef def;
  const absl::Status converted = FromProto(definition, &def);
  REACH_FUZZ_CHECK(converted.ok(), converted.ToString());
  v1::Skeleton rewritten;
  ToProto(def, &rewritten);
  const absl::StatusOr<RegisterResult> again = registry->Register(rewritten);
  REACH_FUZZ_CHECK(again.ok(), absl::StrCat("ToProto(FromProto(definition)): ",
                                            again.status().ToString()));

  const absl::Status deleted = registry->Delete(id);
  REACH_FUZZ_CHECK(deleted.ok(), deleted.ToString());
  REACH_FUZZ_CHECK(registry->Find(id) == nullptr, "deleted but found");
  REACH_FUZZ_CHECK(registry->Delete(id).code() == absl::StatusCode::kNotFound,
                   "second delete");
}

}  // namespace
}  // namespace reach::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  reach::fuzz::QuietProtobufLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  reach::v1::Skeleton definition;
  if (size > 0 && data[0] == 0xFF) {
    reach::fuzz::FuzzInput in(data + 1, size - 1);
    definition = reach::fuzz::BuildSkeleton(in, 64);
  } else if (!definition.ParseFromArray(data, static_cast<int>(size))) {
    return 0;
  }
  reach::fuzz::RegisterAndReadBack(definition);
  return 0;
}
