// The side a chain bends to: poles for every solver, and no flips through
// full extension on streams.
//
// Without a pole this concerns limbs (three joints: a knee or an elbow);
// a longer chain keeps the bend its solver gives it, its side mattering
// only to leave a straight start.
//
// A chain's bend is the sum of its inner joints' offsets from the root,
// across the line from the root to the tip. Every solution of a position
// goal can be turned about that line (the swivel) without moving the tip,
// so which way the bend faces is free: a pole chooses it, and without a
// pole it should stay where the start pose had it, carried along by the
// smallest rotation from the start's root-tip line to the root-target line
// (what TWO_BONE does by construction). A straight start has no bend; its
// side then comes from the frame of the first inner joint that can bend
// (CanonicalBendSide): the side TWO_BONE bends a straight limb to, fixed
// in the limb's own frames, so a limb straightened by a target out of
// reach bends back to the side it came from.
#ifndef REACH_SOLVERS_BEND_PLANE_H_
#define REACH_SOLVERS_BEND_PLANE_H_

#include "solvers/chain_solver.h"

namespace reach {

// Where a chain's bend should face after a solve.
struct BendReference {
  enum class Source {
    kNone,       // No side to keep (a chain of two joints, degenerate).
    kPole,       // The goal's pole.
    kStart,      // The start pose's bend, carried to the target line.
    kCanonical,  // A straight start: CanonicalBendSide.
  };
  Source source = Source::kNone;
  // Model space, unit, across the root-target line.
  Eigen::Vector3d direction = Eigen::Vector3d::Zero();
  // The start's bend, in units of the chain's length (0: straight).
  double start_bend = 0.0;
};

// The reference for `problem` from its start pose: ws.chain_globals hold
// the chain's model-space transforms in it; the goal's target and pole are
// finite and within reach of double arithmetic (SolveGoal brings far ones
// near first).
BendReference ComputeBendReference(const ChainProblem& problem,
                                   const Workspace& ws, const Pose& pose);

// The axis a straight limb bends about at a ball joint whose model-space
// rotation is `joint_rotation` and whose child sits at `child_local` (the
// child's local translation): Eigen's unitOrthogonal of that bone in the
// joint's own frame, turned to model space. Fixed in the joint's frame, so
// a limb straightened and bent again bends the way it came; TWO_BONE
// bends a straight limb about it (as its SIMD kernel does), and so does
// every other solver's straight start (CanonicalBendSide). Unit.
Eigen::Vector3d StraightBendAxis(const Eigen::Quaterniond& joint_rotation,
                                 const Eigen::Vector3d& child_local);

// Where the bend of the straight chain in ws.chain_globals goes when it
// bends: from the first inner joint that can turn, a hinge towards its
// positive angles (negative when it cannot increase), a ball about
// Eigen's unitOrthogonal of its bone in its own frame (as TWO_BONE bends a
// straight limb). Unit, across the chain; zero when no joint can bend.
Eigen::Vector3d CanonicalBendSide(const ChainProblem& problem,
                                  const Workspace& ws, const Pose& pose);

// Before an iterative solve, where iterating is slowest: a start nearly
// straight (bend under 1e-4 of the chain's length) whose target lies
// inside reach gives no solver a direction to bend in (every update is
// zero or tiny by symmetry: targets within about 1e-5 rad of the line left
// four solvers stuck straight), and near full extension (target beyond
// 0.9 of the length) of a limb (three joints) gradient steps shrink with
// the bend they need. A limb is then shaped like TWO_BONE shapes it: its
// mid joint turns about an axis across the line (its own axis for a
// hinge, the plane of its bones for a bent ball) so the root-tip distance
// matches the target's (the law of cosines, generalised to an axis), to
// the reference's side, and the root turns by the smallest rotation that
// points the tip at the target. A longer straight chain only gets a nudge:
// the inner joint nearest its middle turns towards the reference's side
// by 1e-3 to 0.2 rad (more the farther inside reach the target is), and
// its solver curls it from there. Limits are applied to every turn.
// Returns whether it changed the pose; ws.chain_globals are then current.
bool ShapeForReach(const ChainProblem& problem, const BendReference& reference,
                   Workspace& ws, Pose& pose);

// After a solve: makes the chain's bend face `reference`, keeping the tip
// where the solver put it (a position goal loses nothing).
// - A chain nearly straight (bend under 3e-4 of its length) is re-bent:
//   the inner joint nearest the middle of the chain that can bend across
//   the line moves across it, by turning the root and that joint by small
//   opposite angles (the tip stays on its line; its reach changes by less
//   than 1e-7 of the length). Its bend ends up on the reference's side,
//   at least 1e-5 of the length: a straight pose remembers no side, this
//   one does, so the next frame of a stream, warm-started from it, bends
//   back the way it came. Turning a nearly straight chain about its line
//   instead would roll every joint's frame by up to half a turn.
// - Then the chain turns about its root-tip line (the swivel) by the
//   angle between its bend and the reference. When that leaves the root
//   joint's limits, the largest part of the turn that stays inside is
//   taken (a root that is not a ball joint cannot turn).
// Goals with a target orientation are only swivelled, and only when the
// tip joint is an unconstrained ball (it is turned back to the target
// orientation). Each step is undone if it would move the tip by more than a
// tenth of the tolerance, or out of the tolerance when the solver had
// reached the target. Expects ws.chain_globals current for `pose`;
// afterwards they are scratch.
void AlignBend(const ChainProblem& problem, const BendReference& reference,
               Workspace& ws, Pose& pose);

// Of the turns about the unit `line` by an angle in [lo, hi] (lo <= 0 <=
// hi or `preferred` in range), the one nearest `preferred` whose root
// joint stays within its limits (to 1e-9 rad): the root's local rotation
// for angle a is parent_rotation^-1 AxisAngle(line, a) root_global. A grid
// of 64 angles, then bisection towards `preferred`; NaN when no angle of
// the grid is inside.
double NearestFeasibleTurn(const Joint& root,
                           const Eigen::Quaterniond& parent_rotation,
                           const Eigen::Quaterniond& root_global,
                           const Eigen::Vector3d& line, double preferred,
                           double lo, double hi);

}  // namespace reach

#endif  // REACH_SOLVERS_BEND_PLANE_H_
