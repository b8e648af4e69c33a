// Characterisation lives in the solver library (solvers/characterize.h),
// where the full-body solver's body model uses it too; retargeting names
// it in its own namespace.
#ifndef REACH_RETARGET_CHARACTERIZE_H_
#define REACH_RETARGET_CHARACTERIZE_H_

#include "solvers/characterize.h"

namespace reach::retarget {

using ::reach::Arm;
using ::reach::Characterization;
using ::reach::Characterize;
using ::reach::Decided;
using ::reach::DecidedName;
using ::reach::Finger;
using ::reach::FormatCharacterization;
using ::reach::kLeft;
using ::reach::kRight;
using ::reach::Leg;
using ::reach::RoleAssignment;
using ::reach::RoleOf;
using ::reach::RoleOverride;
using ::reach::Side;

}  // namespace reach::retarget

#endif  // REACH_RETARGET_CHARACTERIZE_H_
