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
//   the forward pass keeps each hinge's bone on the cone it sweeps about
//   its axis, and the backward pass works on rotations: each joint turns
//   towards the forward pass's point (a hinge about its axis) and is
//   projected onto its limits, so the returned pose always respects them.
//   Best effort towards the target: cone-limited ball chains solve well,
//   chains of hinges with tight ranges less so (prefer JACOBIAN_DLS there;
//   AUTO does).
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

}  // namespace reach

#endif  // REACH_SOLVERS_FABRIK_H_
