// One entry point for every skeleton file format the tools accept.
#ifndef REACH_IMPORTERS_SKELETON_FILE_H_
#define REACH_IMPORTERS_SKELETON_FILE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "reach/v1/skeleton.pb.h"
#include "solvers/skeleton.h"

namespace reach::import {

struct SkeletonFileOptions {
  std::string name;               // Replaces the file's own name when set.
  std::vector<ChainDef> chains;   // Replace or add chains by name.
  int gltf_skin = 0;              // Which skin of a glTF file.
};

// Reads a skeleton by extension: .json (the canonical protobuf JSON of
// reach.v1.Skeleton), .bvh, .urdf, .gltf, .glb. Errors name the file and,
// where the format has them, the element and line.
absl::StatusOr<v1::Skeleton> LoadSkeletonFile(
    const std::string& path, const SkeletonFileOptions& options = {});

}  // namespace reach::import

#endif  // REACH_IMPORTERS_SKELETON_FILE_H_
