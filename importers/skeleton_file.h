// One entry point for every skeleton file format the tools accept.
#ifndef REACH_IMPORTERS_SKELETON_FILE_H_
#define REACH_IMPORTERS_SKELETON_FILE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "importers/bvh.h"
#include "importers/import_error.h"
#include "reach/v1/skeleton.pb.h"
#include "solvers/skeleton.h"

namespace reach::import {

struct SkeletonFileOptions {
  std::string name;               // Replaces the file's own name when set.
  std::vector<ChainDef> chains;   // Replace or add chains by name.
  int gltf_skin = 0;              // Which skin of a glTF file.
  int bvh_rest_frame = -1;        // BVH: BvhOptions::rest_frame.
  // False when the file name given is no real one (ImportSkeleton bytes
  // without a file_name): glTF then keeps a generic skin name ("Armature")
  // rather than naming the skeleton after it.
  bool named_file = true;
  // What one import may cost (importers/import_error.h): max_file_bytes
  // for every format, the rest for glTF. The defaults hold when unset.
  ImportLimits limits;
};

// Reads a skeleton by extension: .json (the canonical protobuf JSON of
// reach.v1.Skeleton), .bvh, .urdf, .gltf, .glb. Errors name the file and,
// where the format has them, the element and line; a file over
// options.limits is refused unread or, for glTF, after one scan.
absl::StatusOr<v1::Skeleton> LoadSkeletonFile(
    const std::string& path, const SkeletonFileOptions& options = {});

enum class SkeletonFormat { kUnknown, kJson, kBvh, kUrdf, kGltf };

// The format a file name's extension names (.json, .bvh, .urdf, .gltf or
// .glb; any case), else kUnknown.
SkeletonFormat FormatOfFileName(absl::string_view file);

struct ImportedFile {
  v1::Skeleton skeleton;
  std::optional<BvhClip> clip;  // BVH only: the motion.
};

// Imports a skeleton file already in memory (what a client sent): `file`
// names it in errors; `format` kUnknown takes it from `file`'s extension.
// glTF must have its buffers embedded (a .glb, or data: URIs); whether
// `data` is .glb or .gltf is read from its first bytes. Reads no file.
// `data` over options.limits.max_file_bytes is refused whatever its
// format; glTF is also held to the rest of options.limits.
absl::StatusOr<ImportedFile> ImportSkeletonBytes(
    absl::string_view data, SkeletonFormat format, const std::string& file,
    const SkeletonFileOptions& options = {});

}  // namespace reach::import

#endif  // REACH_IMPORTERS_SKELETON_FILE_H_
