// One two-bone limb's inputs and outputs for SolveTwoBoneLimbs
// (two_bone.h), apart so the Workspace can hold them.
#ifndef REACH_SOLVERS_TWO_BONE_LIMB_H_
#define REACH_SOLVERS_TWO_BONE_LIMB_H_

#include <Eigen/Geometry>

#include "solvers/transform.h"

namespace reach {

// One limb for SolveTwoBoneLimbs: the chain's model-space transforms in
// the start pose (scale unused: the positions carry it), its parent's
// model-space rotation, the mid joint's local rotation, the tip joint's
// local translation (the second bone in the mid joint's frame: a straight
// limb bends about an axis fixed in that frame), and the goal.
struct TwoBoneLimb {
  Eigen::Quaterniond parent_rotation = Eigen::Quaterniond::Identity();
  Transform root, mid, tip;
  Eigen::Quaterniond mid_local = Eigen::Quaterniond::Identity();
  Eigen::Vector3d tip_local = Eigen::Vector3d::Zero();
  Eigen::Vector3d target = Eigen::Vector3d::Zero();
  bool has_pole = false;
  Eigen::Vector3d pole = Eigen::Vector3d::Zero();
};

// The solved local rotations of the root and mid joints. `solved` is false
// when the limb is a case the branch-free solve leaves to TwoBoneSolver's
// general path (the target on the root or past 1e50, a zero-length bone,
// the tip turned exactly away from the target, non-finite arithmetic); the
// rotations are then unspecified.
struct TwoBoneLimbResult {
  Eigen::Quaterniond root_local;
  Eigen::Quaterniond mid_local;
  bool solved = false;
};

}  // namespace reach

#endif  // REACH_SOLVERS_TWO_BONE_LIMB_H_
