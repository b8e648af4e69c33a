// Fuzz target: the URDF importer (ParseUrdf) on arbitrary text.
//
// Checked: an error is INVALID_ARGUMENT; an import gives a definition that
// Skeleton::Create accepts (the importers' contract) with a fixed root
// joint first and one chain per leaf joint, from the root to that leaf.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "importers/urdf.h"
#include "tests/fuzz/fuzz_support.h"

namespace reach::fuzz {
namespace {

void Import(absl::string_view text) {
  const absl::StatusOr<import::ImportedSkeleton> imported =
      import::ParseUrdf(text, "fuzz.urdf");
  if (!imported.ok()) {
    REACH_FUZZ_CHECK(
        imported.status().code() == absl::StatusCode::kInvalidArgument,
        imported.status().ToString());
    return;
  }
  const SkeletonDef& def = imported->def;
  const absl::StatusOr<Skeleton> skeleton = Skeleton::Create(def);
  REACH_FUZZ_CHECK(skeleton.ok(), skeleton.status().ToString());
  REACH_FUZZ_CHECK(def.joints[0].parent == -1 &&
                       def.joints[0].type == JointType::kFixed,
                   "root joint");
  std::vector<bool> has_child(def.joints.size(), false);
  for (const JointDef& joint : def.joints) {
    if (joint.parent >= 0) has_child[joint.parent] = true;
  }
  size_t leaves = 0;
  for (size_t j = 1; j < def.joints.size(); ++j) leaves += !has_child[j];
  REACH_FUZZ_CHECK(def.chains.size() == leaves,
                   absl::StrCat(def.chains.size(), " chains for ", leaves,
                                " leaves"));
  for (const ChainDef& chain : def.chains) {
    REACH_FUZZ_CHECK(chain.root == def.joints[0].name,
                     absl::StrCat("chain ", chain.name));
  }
}

}  // namespace
}  // namespace reach::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  reach::fuzz::Import(
      absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
