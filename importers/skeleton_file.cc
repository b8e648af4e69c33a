#include "importers/skeleton_file.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "importers/bvh.h"
#include "importers/chains.h"
#include "importers/gltf.h"
#include "importers/import_error.h"
#include "importers/urdf.h"
#include "google/protobuf/util/json_util.h"
#include "wire/convert.h"

namespace reach::import {
namespace {

absl::StatusOr<ImportedSkeleton> ImportByExtension(
    const std::string& path, absl::string_view extension,
    const SkeletonFileOptions& options) {
  if (extension == "gltf" || extension == "glb") {
    return ImportGltf(path, options.gltf_skin, options.limits);
  }
  if (extension != "bvh" && extension != "urdf") {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": unknown skeleton format '.", extension,
        "' (expected .json, .bvh, .urdf, .gltf or .glb)"));
  }
  // Read here rather than by ImportBvh / ImportUrdf, to bound the size.
  std::string text;
  if (absl::Status s = ReadFile(path, &text, options.limits.max_file_bytes);
      !s.ok()) {
    return s;
  }
  if (extension == "urdf") return ParseUrdf(text, path);
  absl::StatusOr<BvhClip> clip =
      ParseBvh(text, path, {options.bvh_rest_frame});
  if (!clip.ok()) return clip.status();
  return std::move(clip->skeleton);
}

// The skeleton JSON in `text`, with the options applied.
absl::StatusOr<v1::Skeleton> FromJson(absl::string_view text,
                                      absl::string_view file,
                                      const SkeletonFileOptions& options) {
  v1::Skeleton skeleton;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(text.data(), text.size()), &skeleton);
  if (!status.ok()) {
    return ImportError(file, 0, "reach.v1.Skeleton JSON",
                       std::string(status.message()));
  }
  if (!options.chains.empty()) {
    SkeletonDef def;
    if (absl::Status s = FromProto(skeleton, &def); !s.ok()) {
      return ImportError(file, 0, "", s.message());
    }
    ApplyChainOverrides(options.chains, &def.chains);
    const std::string name = skeleton.name();
    skeleton.Clear();
    ToProto(def, &skeleton);
    skeleton.set_name(name);
  }
  if (!options.name.empty()) skeleton.set_name(options.name);
  return skeleton;
}

// An imported skeleton on the wire, with the options applied.
v1::Skeleton ToWire(ImportedSkeleton imported,
                    const SkeletonFileOptions& options) {
  ApplyChainOverrides(options.chains, &imported.def.chains);
  v1::Skeleton skeleton;
  ToProto(imported.def, &skeleton);
  skeleton.set_name(options.name.empty() ? imported.name : options.name);
  return skeleton;
}

std::string Extension(absl::string_view file) {
  const size_t dot = file.rfind('.');
  const size_t slash = file.rfind('/');
  if (dot == absl::string_view::npos ||
      (slash != absl::string_view::npos && slash > dot)) {
    return "";
  }
  return absl::AsciiStrToLower(file.substr(dot + 1));
}

}  // namespace

SkeletonFormat FormatOfFileName(absl::string_view file) {
  const std::string extension = Extension(file);
  if (extension == "json") return SkeletonFormat::kJson;
  if (extension == "bvh") return SkeletonFormat::kBvh;
  if (extension == "urdf") return SkeletonFormat::kUrdf;
  if (extension == "gltf" || extension == "glb") return SkeletonFormat::kGltf;
  return SkeletonFormat::kUnknown;
}

absl::StatusOr<v1::Skeleton> LoadSkeletonFile(
    const std::string& path, const SkeletonFileOptions& options) {
  const std::string extension = Extension(path);
  if (extension == "json") {
    std::string text;
    if (absl::Status s = ReadFile(path, &text, options.limits.max_file_bytes);
        !s.ok()) {
      return s;
    }
    return FromJson(text, path, options);
  }
  absl::StatusOr<ImportedSkeleton> imported =
      ImportByExtension(path, extension, options);
  if (!imported.ok()) return imported.status();
  return ToWire(*std::move(imported), options);
}

absl::StatusOr<ImportedFile> ImportSkeletonBytes(
    absl::string_view data, SkeletonFormat format, const std::string& file,
    const SkeletonFileOptions& options) {
  if (format == SkeletonFormat::kUnknown) format = FormatOfFileName(file);
  if (static_cast<uint64_t>(data.size()) >
      static_cast<uint64_t>(options.limits.max_file_bytes)) {
    return ImportError(file, 0, "",
                       absl::StrCat(data.size(), " bytes, over the limit of ",
                                    options.limits.max_file_bytes,
                                    " (max_file_bytes)"));
  }
  ImportedFile out;
  switch (format) {
    case SkeletonFormat::kJson: {
      absl::StatusOr<v1::Skeleton> skeleton = FromJson(data, file, options);
      if (!skeleton.ok()) return skeleton.status();
      out.skeleton = *std::move(skeleton);
      return out;
    }
    case SkeletonFormat::kBvh: {
      absl::StatusOr<BvhClip> clip =
          ParseBvh(data, file, {options.bvh_rest_frame});
      if (!clip.ok()) return clip.status();
      out.skeleton = ToWire(clip->skeleton, options);
      out.clip = *std::move(clip);
      return out;
    }
    case SkeletonFormat::kUrdf: {
      absl::StatusOr<ImportedSkeleton> imported = ParseUrdf(data, file);
      if (!imported.ok()) return imported.status();
      out.skeleton = ToWire(*std::move(imported), options);
      return out;
    }
    case SkeletonFormat::kGltf: {
      // ParseGltf reads the form from the name: make it agree with the
      // bytes (a .glb starts with the magic "glTF").
      const bool glb = absl::StartsWith(data, "glTF");
      std::string name = file;
      if (Extension(name) != (glb ? "glb" : "gltf")) {
        absl::StrAppend(&name, glb ? ".glb" : ".gltf");
      }
      absl::StatusOr<ImportedSkeleton> imported =
          ParseGltf(data, name, options.gltf_skin, options.limits,
                    options.named_file);
      if (!imported.ok()) return imported.status();
      out.skeleton = ToWire(*std::move(imported), options);
      return out;
    }
    case SkeletonFormat::kUnknown:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "format: not given, and the file name '", file,
      "' has no known extension (.json, .bvh, .urdf, .gltf or .glb)"));
}

}  // namespace reach::import
