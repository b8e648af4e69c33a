// What every importer returns, and the one shape of its errors.
#ifndef REACH_IMPORTERS_IMPORT_ERROR_H_
#define REACH_IMPORTERS_IMPORT_ERROR_H_

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

// Reads a whole file. NotFound / InvalidArgument name the file.
absl::Status ReadFile(const std::string& path, std::string* contents);

// "dir/walk.bvh" -> "walk".
std::string FileStem(absl::string_view path);

}  // namespace reach::import

#endif  // REACH_IMPORTERS_IMPORT_ERROR_H_
