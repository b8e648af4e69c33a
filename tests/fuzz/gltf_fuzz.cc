// Fuzz target: the glTF importer on arbitrary bytes, from memory
// (ParseGltf): a .glb when the input starts with the binary magic "glTF",
// else .gltf JSON; skin 0.
//
// Checked: an error is INVALID_ARGUMENT; an import gives a definition that
// Skeleton::Create accepts (the importers' contract), of ball joints with
// unique non-empty names.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "importers/gltf.h"
#include "tests/fuzz/fuzz_support.h"

namespace reach::fuzz {
namespace {

void Import(absl::string_view bytes) {
  const std::string file =
      absl::StartsWith(bytes, "glTF") ? "fuzz.glb" : "fuzz.gltf";
  const absl::StatusOr<import::ImportedSkeleton> imported =
      import::ParseGltf(bytes, file);
  if (!imported.ok()) {
    REACH_FUZZ_CHECK(
        imported.status().code() == absl::StatusCode::kInvalidArgument,
        imported.status().ToString());
    return;
  }
  const SkeletonDef& def = imported->def;
  const absl::StatusOr<Skeleton> skeleton = Skeleton::Create(def);
  REACH_FUZZ_CHECK(skeleton.ok(), skeleton.status().ToString());
  absl::flat_hash_set<std::string> names;
  for (const JointDef& joint : def.joints) {
    REACH_FUZZ_CHECK(joint.type == JointType::kBall, joint.name);
    REACH_FUZZ_CHECK(!joint.name.empty() && names.insert(joint.name).second,
                     absl::StrCat("name '", joint.name, "'"));
  }
}

}  // namespace
}  // namespace reach::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  reach::fuzz::Import(
      absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
