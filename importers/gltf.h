// glTF 2.0 skins (.gltf and .glb) -> skeletons.
//
// The joints of one skin become skeleton joints in parent-before-child
// order, with each node's local TRS (or matrix) as the rest transform; a
// joint whose parent node is not in the skin is a root (its ancestors'
// transforms are folded into it). Arm and leg chains are guessed from joint
// names (GuessLimbChains).
//
// Joints are ball joints named after their nodes; unnamed nodes and repeated
// names become "node_<index>". Scales must be uniform (to 1e-6, relative),
// as Reach's transforms are. The result is named after the skin when the
// skin's name says something ("ArmRig"), else after the file's stem:
// exporters name skins generically ("skin", "Skin0", Blender's "Armature"),
// and such a name told rigs apart in no listing.
// Errors are InvalidArgument naming the file and the element
// ("skin 1", "node 12 'LeftArm'"); a missing file is NotFound.
//
// Before tinygltf sees a file, its JSON (a .gltf, or a .glb's JSON chunk) is
// scanned once against `limits` (ImportLimits: bytes, nesting depth,
// values, elements of each top-level array, buffer bytes), so that a file
// over them costs a pass over its bytes and no more; the error names the
// limit and the byte where the scan crossed it.
#ifndef REACH_IMPORTERS_GLTF_H_
#define REACH_IMPORTERS_GLTF_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "importers/import_error.h"

namespace reach::import {

// Where the joints of an imported skin are in the file, for writing back
// into it (gltf_animation.h): for joint i of the skeleton (def order), its
// node, and `above[i]`, the product of the local transforms of the nodes
// between it and its parent joint's node (all its ancestors, for a root;
// the identity when there are none), so that the joint's rest is
// above[i] * local(node[i]).
struct GltfJointNodes {
  std::vector<int> node;
  std::vector<Transform> above;
};

// Reads a .gltf (JSON, external or embedded buffers) or .glb file and
// imports skin `skin_index` (the first one by default). External buffer and
// image files count against limits.max_gltf_buffer_bytes when read.
absl::StatusOr<ImportedSkeleton> ImportGltf(
    const std::string& path, int skin_index = 0,
    const ImportLimits& limits = ImportLimits(),
    GltfJointNodes* nodes = nullptr);

// Imports skin `skin_index` of a glTF file already in memory: `file` names
// it in errors and its extension (.gltf or .glb) says which form `contents`
// is. Buffers must be embedded (data: URIs, or a .glb's BIN chunk): no
// other file is read, so a buffer in an external file is an error naming
// its uri. `named_file`: false when `file` is no real file name (bytes sent
// without one): a generic skin name is then kept rather than `file`'s stem.
// With `nodes`, also says which node each joint is.
absl::StatusOr<ImportedSkeleton> ParseGltf(
    absl::string_view contents, const std::string& file, int skin_index = 0,
    const ImportLimits& limits = ImportLimits(), bool named_file = true,
    GltfJointNodes* nodes = nullptr);

}  // namespace reach::import

#endif  // REACH_IMPORTERS_GLTF_H_
