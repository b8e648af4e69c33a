#include "importers/skeleton_file.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "importers/bvh.h"
#include "importers/chains.h"
#include "importers/gltf.h"
#include "importers/urdf.h"
#include "google/protobuf/util/json_util.h"
#include "wire/convert.h"

namespace reach::import {
namespace {

absl::StatusOr<ImportedSkeleton> ImportByExtension(
    const std::string& path, absl::string_view extension,
    const SkeletonFileOptions& options) {
  if (extension == "bvh") {
    absl::StatusOr<BvhClip> clip = ImportBvh(path);
    if (!clip.ok()) return clip.status();
    return std::move(clip->skeleton);
  }
  if (extension == "urdf") return ImportUrdf(path);
  if (extension == "gltf" || extension == "glb") {
    return ImportGltf(path, options.gltf_skin);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": unknown skeleton format '.", extension,
      "' (expected .json, .bvh, .urdf, .gltf or .glb)"));
}

}  // namespace

absl::StatusOr<v1::Skeleton> LoadSkeletonFile(
    const std::string& path, const SkeletonFileOptions& options) {
  const size_t dot = path.rfind('.');
  const std::string extension = absl::AsciiStrToLower(
      dot == std::string::npos ? "" : absl::string_view(path).substr(dot + 1));
  v1::Skeleton skeleton;
  if (extension == "json") {
    std::string text;
    if (absl::Status s = ReadFile(path, &text); !s.ok()) return s;
    const auto status =
        google::protobuf::util::JsonStringToMessage(text, &skeleton);
    if (!status.ok()) {
      return ImportError(path, 0, "reach.v1.Skeleton JSON",
                         std::string(status.message()));
    }
    if (!options.chains.empty()) {
      SkeletonDef def;
      if (absl::Status s = FromProto(skeleton, &def); !s.ok()) {
        return ImportError(path, 0, "", s.message());
      }
      ApplyChainOverrides(options.chains, &def.chains);
      const std::string name = skeleton.name();
      skeleton.Clear();
      ToProto(def, &skeleton);
      skeleton.set_name(name);
    }
  } else {
    absl::StatusOr<ImportedSkeleton> imported =
        ImportByExtension(path, extension, options);
    if (!imported.ok()) return imported.status();
    ApplyChainOverrides(options.chains, &imported->def.chains);
    ToProto(imported->def, &skeleton);
    skeleton.set_name(imported->name);
  }
  if (!options.name.empty()) skeleton.set_name(options.name);
  return skeleton;
}

}  // namespace reach::import
