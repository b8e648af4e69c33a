// What every importer returns, and the one shape of its errors.
#ifndef REACH_IMPORTERS_IMPORT_ERROR_H_
#define REACH_IMPORTERS_IMPORT_ERROR_H_

#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "solvers/skeleton.h"

namespace reach::import {

// A skeleton read from a file: a name for registration (the robot's name,
// the skin's name, the file's stem) and the definition. Importers return
// definitions that Skeleton::Create accepts.
struct ImportedSkeleton {
  std::string name;
  SkeletonDef def;
};

// Bounds on what one import may cost, checked before the parse that would
// spend it: an importer is handed files from clients (ImportSkeleton), and a
// small file must not take a large share of the server's memory, stack or
// CPU. A file over a limit is InvalidArgument naming the file, what was over
// which limit and the limit's name and value ("rig.gltf: JSON nested deeper
// than 64 levels at byte 1234 (max_json_depth)"). The defaults take every
// real rig in tests/data with a wide margin; the server sets them from its
// flags. Each must be positive.
struct ImportLimits {
  // Bytes of one file, any format.
  int64_t max_file_bytes = int64_t{64} << 20;

  // glTF. tinygltf parses the whole JSON into a DOM (nlohmann::json) and
  // then into its own structs, recursing into extras and extensions, all
  // before the skin is read; these bound that work. The JSON is scanned
  // first, in one pass that allocates nothing per element, against:
  //
  // Bytes of JSON: the .gltf file, or a .glb's JSON chunk. Embedded data:
  // URIs are part of it (and of max_gltf_buffer_bytes once decoded).
  int64_t max_gltf_json_bytes = int64_t{32} << 20;
  // Containers ({} and []) open at once; the root object is level 1. Real
  // glTF nests 6 levels (root, meshes, mesh, primitives, primitive,
  // attributes) plus what exporters put in extras and extensions (a few
  // more); tinygltf recurses once per level of extras and extensions, and
  // 15,000 levels (30 KB) overflowed a thread's stack.
  int max_json_depth = 64;
  // JSON values (objects, arrays, strings, numbers, true, false, null) in
  // the file. Each costs about 100-400 bytes once parsed (DOM node plus
  // tinygltf's copy); 2^18 of them peaked near 100 MB. RiggedFigure has
  // 2,131 and the 54-joint BCN_Epileptic.glb 8,351.
  int64_t max_json_values = int64_t{1} << 18;
  // Elements of the top-level "nodes" array: 16 times Skeleton's default
  // max_joints (1024), leaving room for meshes, cameras and props beside
  // the joints. A node costs ~460 bytes once parsed; 5.5 million empty
  // nodes (16.5 MB) took 4.1 GB before this limit.
  int max_gltf_nodes = 16 * 1024;
  // Elements of each other top-level array ("accessors", "meshes",
  // "materials", "buffers", ...). BCN_Epileptic.glb has 361 accessors; a
  // material, the largest element, costs ~2 KB parsed (16,384 empty ones
  // peaked at 39 MB).
  int max_gltf_array_elements = 16 * 1024;
  // Bytes that buffers and images take once loaded: each buffer's
  // byteLength (tinygltf copies a .glb's BIN chunk once per buffer without
  // a uri: 1,100 such buffers in a 1 MB file took 1.1 GB) and the decoded
  // size of every data: URI; for ImportGltf, also the external files read.
  int64_t max_gltf_buffer_bytes = int64_t{64} << 20;
};

// InvalidArgument "FILE:LINE: ELEMENT: MESSAGE". `line` <= 0 leaves the line
// out ("FILE: ELEMENT: MESSAGE") for formats without lines (.glb); an empty
// `element` leaves the element out.
absl::Status ImportError(absl::string_view file, int line,
                         absl::string_view element, absl::string_view message);

// OK when Skeleton::Create accepts `def`; otherwise ImportError(file, 0,
// element, ...) with Create's message, the joint it names followed by its
// name (joints[5] 'panda_link5'). Each importer's last step, so that what
// it returns registers.
absl::Status CheckCreatable(absl::string_view file, absl::string_view element,
                            const SkeletonDef& def);

// Reads a whole file. NotFound / InvalidArgument name the file; a file of
// more than `max_bytes` bytes is InvalidArgument naming the limit
// (`limit_name`), found before more than `max_bytes` + 64 KiB is read.
absl::Status ReadFile(
    const std::string& path, std::string* contents,
    int64_t max_bytes = std::numeric_limits<int64_t>::max(),
    absl::string_view limit_name = "max_file_bytes");

// "dir/walk.bvh" -> "walk".
std::string FileStem(absl::string_view path);

}  // namespace reach::import

#endif  // REACH_IMPORTERS_IMPORT_ERROR_H_
