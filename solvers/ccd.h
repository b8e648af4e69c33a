// CCD: cyclic coordinate descent (Wang & Chen 1991; Kenwright 2012,
// "Inverse Kinematics - Cyclic Coordinate Descent").
//
// Each iteration visits the chain's joints from the tip's parent to the
// root and turns each so the tip swings towards the target: a ball joint by
// the smallest rotation, a hinge about its axis by the angle between the
// tip and target directions projected across it. Every turn is capped by
// options.max_step_rad (per-step damping; 0 = no cap) and projected onto the
// joint's limits, so the result always respects them.
//
// Coordinate descent converges linearly, with a rate near 1 near full
// extension (a turn changes the tip's distance from the root only to
// second order) and against limits. When the error falls by less than
// about 10% per sweep over four sweeps, short of a target within the
// chain's length, CCD finishes inside its iteration cap: exactly on a
// chain of free ball joints without a step cap (BendToReach, fabrik.h),
// else with up to 32 damped least squares steps within the limits and the
// step cap (RefineTipPosition, jacobian.h). Iterations count both.
#ifndef REACH_SOLVERS_CCD_H_
#define REACH_SOLVERS_CCD_H_

#include "solvers/chain_solver.h"

namespace reach {

class CcdSolver final : public ChainSolver {
 public:
  int Solve(const ChainProblem& problem, Workspace& ws,
            Pose& pose) const override;
};

}  // namespace reach

#endif  // REACH_SOLVERS_CCD_H_
