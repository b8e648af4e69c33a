// TWO_BONE: the analytic two-bone solver (hip-knee-ankle, shoulder-elbow-
// wrist).
//
// The chain has exactly three joints: root, mid, tip. The mid joint bends so
// that the root-tip distance matches the target distance (law of cosines,
// generalised to a hinge axis with bone offsets), then the root turns by the
// smallest rotation that points the chain at the target, then twists about
// the root-target line so the bend faces the pole when one is given.
//
// Edge cases (tests/solvers/two_bone_solver_test.cc names each):
// - beyond reach: the chain straightens towards the target;
// - target at the root (zero distance): the chain folds as far as it can and
//   keeps its direction;
// - straight start pose: the bend plane comes from the pole, else from the
//   mid hinge axis, else an arbitrary perpendicular;
// - pole on the root-target line: the pole is ignored (no twist);
// - zero-length bone: the remaining bone points at the target.
// Options: soft (ease into full extension), max_stretch (lengthen the bones
// by up to that factor, measured against the rest translations).
// A hinge mid joint keeps its angle range; other limits are applied best
// effort and show up as an unreached goal.
#ifndef REACH_SOLVERS_TWO_BONE_H_
#define REACH_SOLVERS_TWO_BONE_H_

#include "absl/types/span.h"
#include "solvers/chain_solver.h"

namespace reach {

// Whether the common case's branch-free solve (SolveTwoBoneLimbs) applies
// to a two-bone goal on `chain`: three joints, a ball root and a ball mid
// joint without limits, no target orientation, no soft IK, no stretch.
// TwoBoneSolver then tries the kernel first, and Solve groups such goals;
// a limb the kernel leaves (TwoBoneLimbResult::solved false) goes to the
// general path.
inline bool TwoBoneFastPathApplies(const Skeleton& skeleton,
                                   absl::Span<const int> chain,
                                   const Goal& goal) {
  return chain.size() == 3 && !skeleton.joint(chain[0]).IsConstrained() &&
         !skeleton.joint(chain[1]).IsConstrained() &&
         !goal.target_orientation && !(goal.options.soft > 0.0) &&
         !(goal.options.max_stretch > 1.0);
}

// Writes every field of `limb` for `goal` from its chain's model-space
// transforms (root, mid, tip), its parent's model-space rotation, the mid
// joint's local rotation and the tip joint's local translation. (In place:
// no temporary limb on the hot path.)
void FillTwoBoneLimb(const Eigen::Quaterniond& parent_rotation,
                     const Transform& root, const Transform& mid,
                     const Transform& tip, const Eigen::Quaterniond& mid_local,
                     const Eigen::Vector3d& tip_local, const Goal& goal,
                     TwoBoneLimb* limb);
// The same from model-space transforms indexed by joint (`globals`: those
// of the chain and of its parent current) and the pose's local transforms.
void FillTwoBoneLimb(const Skeleton& skeleton,
                     absl::Span<const Transform> globals, const Pose& pose,
                     absl::Span<const int> chain, const Goal& goal,
                     TwoBoneLimb* limb);

// Solves limbs for which TwoBoneFastPathApplies with the branch-free
// kernel (two_bone_lanes.h): the general path's geometry in closed form,
// so results agree with it to rounding. Where the CPU has AVX2 and FMA,
// every width (one limb in scalar code, up to four in AVX2 lanes) comes
// from one build with fused multiply-adds; elsewhere a baseline build
// solves one limb in scalar code and pairs in SSE2 lanes. Within a build a
// limb's result does not depend on its lane or on the other limbs, bit for
// bit. out.size() >= limbs.size(). Allocates nothing.
void SolveTwoBoneLimbs(absl::Span<const TwoBoneLimb> limbs,
                       absl::Span<TwoBoneLimbResult> out);

// For tests: with `baseline`, SolveTwoBoneLimbs and TwoBoneSolver run the
// kernel's baseline (SSE2) build even where the CPU has AVX2 and FMA, so
// one machine checks both builds; false restores the default. Not to be
// called while solves run.
void UseBaselineTwoBoneKernel(bool baseline);

class TwoBoneSolver final : public ChainSolver {
 public:
  // `branch_free`: try the branch-free kernel (SolveTwoBoneLimbs) first
  // where TwoBoneFastPathApplies, the default; false runs the general path
  // alone (tests compare the two).
  explicit TwoBoneSolver(bool branch_free = true) : branch_free_(branch_free) {}

  int Solve(const ChainProblem& problem, Workspace& ws,
            Pose& pose) const override;

 private:
  bool branch_free_;
};

}  // namespace reach

#endif  // REACH_SOLVERS_TWO_BONE_H_
