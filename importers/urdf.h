// URDF robot descriptions -> skeletons.
//
// Every URDF joint becomes a skeleton joint at its <origin> (xyz, and rpy as
// fixed-axis roll-pitch-yaw), below a fixed root joint named after the root
// link: revolute -> hinge about <axis> with <limit lower upper>, continuous
// -> unlimited hinge, fixed -> fixed. prismatic, floating and planar joints
// are rejected with an error naming the joint. One chain per leaf joint,
// from the root joint to the leaf, named after the leaf.
//
// Joints come depth first from the root link, siblings in document order.
// <mimic> joints are imported as independent joints; a revolute range of a
// full turn or more becomes unlimited. Errors are InvalidArgument
// "FILE:LINE: joint 'NAME': ..." (ImportError); a missing file is NotFound.
#ifndef REACH_IMPORTERS_URDF_H_
#define REACH_IMPORTERS_URDF_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "importers/import_error.h"

namespace reach::import {

// Parses URDF text; `file` names the source in errors.
absl::StatusOr<ImportedSkeleton> ParseUrdf(absl::string_view text,
                                           absl::string_view file);

// Reads and parses a .urdf file.
absl::StatusOr<ImportedSkeleton> ImportUrdf(const std::string& path);

}  // namespace reach::import

#endif  // REACH_IMPORTERS_URDF_H_
