// Named limb chains guessed from common joint names, and explicit chain
// overrides, for importers of formats that carry no chains (BVH, glTF).
#ifndef REACH_IMPORTERS_CHAINS_H_
#define REACH_IMPORTERS_CHAINS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "solvers/skeleton.h"

namespace reach::import {

// Chains "left_arm", "right_arm", "left_leg", "right_leg" (those that are
// found): each runs from the end joint's grandparent (upper arm / thigh) to
// the end joint, a hand or wrist for arms and a foot or ankle for legs.
// Sides are read from prefixes and suffixes such as "Left", "L_", "_L_",
// "_l", ".L" and "l" before the limb word ("lhand"); when several joints of
// a side match, the one closest to the root wins (so "LeftHand" beats
// "LeftHandIndex1", and "LeftWrist" beats its child "lhand").
std::vector<ChainDef> GuessLimbChains(const SkeletonDef& def);

// Parses a --chain flag: "NAME=ROOT:TIP", or "NAME=ROOT,TIP" when joint
// names hold ':' ("arm=mixamorig:LeftArm,mixamorig:LeftHand").
absl::StatusOr<ChainDef> ParseChainSpec(absl::string_view spec);

// Replaces or adds `overrides` by name in `chains`.
void ApplyChainOverrides(const std::vector<ChainDef>& overrides,
                         std::vector<ChainDef>* chains);

}  // namespace reach::import

#endif  // REACH_IMPORTERS_CHAINS_H_
