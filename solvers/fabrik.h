// FABRIK: Forward And Backward Reaching Inverse Kinematics (Aristidou &
// Lasenby 2011, "FABRIK: A fast, iterative solver for the Inverse Kinematics
// problem", Graphical Models 73(5)).
//
// Each iteration moves the tip onto the target and walks the joints back to
// the root keeping bone lengths (forward reaching), then pins the root and
// walks out again (backward reaching). Unreachable targets straighten the
// chain towards them in one pass.
//
// - Pole: after each backward pass every inner joint is turned about the
//   line through its neighbours to face the pole (bone lengths kept).
// - Limits: when a chain joint is a hinge, fixed or a limited ball joint,
//   both passes work on joint frames and enforce the limits as they go
//   (after Aristidou, Chrysanthou & Lasenby 2016, "Extending FABRIK with
//   model constraints"): the forward pass binds each parent to its child
//   through the child's limits, the backward pass projects each joint onto
//   its own, so the returned pose always respects them.
// - Finishing pass: where the iterations stop short of a target within
//   the chain's length (progress below about 10% per iteration over four,
//   or the stall guard) with iterations left under the cap, FABRIK
//   finishes with exact or Newton-type steps inside the cap: on a chain
//   without limits BendToReach
//   below (near full extension, where FABRIK alone crawls for thousands of
//   iterations); otherwise up to 32 damped least squares steps within the
//   limits (RefineTipPosition, jacobian.h). FABRIK alone reaches 73-99%
//   of the random limited ball-chain targets of bench/quality_bench.cc
//   per row, with the finish 99.4-100%; on chains with hinges about random
//   axes about half alone, 98% with the finish. Iterations count both.
// - Target orientation: the tip joint takes it after the position solve.
#ifndef REACH_SOLVERS_FABRIK_H_
#define REACH_SOLVERS_FABRIK_H_

#include "solvers/chain_solver.h"

namespace reach {

class FabrikSolver final : public ChainSolver {
 public:
  int Solve(const ChainProblem& problem, Workspace& ws,
            Pose& pose) const override;
};

// FABRIK's finish near full extension, which CCD shares. On a chain of
// unconstrained ball joints (all but the tip) whose target is within
// reach, changes the chain's shape evenly until the tip is exactly as far
// from the root as the target (bending every joint by one angle in one
// plane when the tip is too far out, straightening every bone by one
// fraction when it is too close in), then turns the chain about its root
// onto the target and faces the bends to the pole, if any; a target at or
// beyond the chain's length gets the chain straight at it. Exact to a
// quarter of the tolerance in a few O(n) passes, where FABRIK and CCD
// near full extension converge with a rate per iteration near 1. Expects
// ws.chain_globals current for `pose` and leaves them current. Returns
// false, pose untouched, when the chain has a constrained joint or no such
// shape reaches the target.
bool BendToReach(const ChainProblem& problem, Workspace& ws, Pose& pose);

}  // namespace reach

#endif  // REACH_SOLVERS_FABRIK_H_
