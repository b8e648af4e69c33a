// Poses of a skeleton imported from a glTF skin, written back into a copy of
// that file as one more animation (the glTF 2.0 specification, 3.11
// animations; binary glTF, 4.4).
//
// The copy keeps the file's JSON and binary chunk as they are (nodes,
// meshes, skins, materials, images, buffers, extensions, the animations it
// had) and appends, after the binary chunk's data, the new animation's
// keys: one sampler input of times (frame f at f * frame_time seconds), and
// per joint node that moves a rotation channel (and a translation channel
// for each root joint and any joint whose translation leaves its rest),
// LINEAR, one key per frame, as floats. A joint's key is its pose's local
// transform expressed in the node's own frame, undoing what the importer
// folded into the joint (the nodes between it and its parent joint, all of
// its ancestors for a root: their rotations, translations and scales, so
// root translations come back in the file's own units). An animated node
// written as a matrix becomes translation, rotation and scale, which
// animation channels need.
#ifndef REACH_IMPORTERS_GLTF_ANIMATION_H_
#define REACH_IMPORTERS_GLTF_ANIMATION_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "importers/import_error.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"

namespace reach::import {

struct GltfAnimationOptions {
  std::string name = "reach";  // The animation's name.
  int skin_index = 0;          // The skin `skeleton` was imported from.
  ImportLimits limits;         // For reading the target file.
};

// Returns a .glb: the .glb file `target` (its bytes; `target_file` names it
// in errors and must end in .glb) with `poses` of `skeleton` added as an
// animation. `skeleton`'s joints are matched by name to those the importer
// reads from the file's skin (every joint must be there; the skeleton may be
// the server's copy of the import). Errors are InvalidArgument naming the
// file: not a .glb, a joint the skin lacks, poses that do not match the
// skeleton, frame_time not positive.
absl::StatusOr<std::string> WriteGltfAnimation(
    absl::string_view target, const std::string& target_file,
    const Skeleton& skeleton, absl::Span<const Pose> poses, double frame_time,
    const GltfAnimationOptions& options = {});

}  // namespace reach::import

#endif  // REACH_IMPORTERS_GLTF_ANIMATION_H_
