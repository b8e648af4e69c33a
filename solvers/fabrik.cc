#include "solvers/fabrik.h"

#include <algorithm>
#include <cmath>

#include "solvers/stall_guard.h"

namespace reach {
namespace {

using Eigen::Quaterniond;
using Eigen::Vector3d;

// Places `moving` at `length` from `anchor`, along the line anchor->moving.
// When the two coincide it continues the line from `behind` through
// `anchor` (any direction keeps the length; this one keeps the chain
// straight there), or +Y when that is degenerate too.
inline Vector3d Reach(const Vector3d& anchor, const Vector3d& moving,
                      double length, const Vector3d& behind) {
  const Vector3d delta = moving - anchor;
  const double dist_sq = delta.squaredNorm();
  if (dist_sq < 1e-300) {
    const Vector3d on = anchor - behind;
    const double on_sq = on.squaredNorm();
    return anchor + (on_sq < 1e-300
                         ? Vector3d(length * Vector3d::UnitY())
                         : Vector3d(on * (length / std::sqrt(on_sq))));
  }
  return anchor + (length / std::sqrt(dist_sq)) * delta;
}

// Turns every inner joint about the line through its neighbours so it faces
// the pole. Rotating about that line keeps both adjacent bone lengths.
void ApplyPole(const Vector3d& pole, int n, Vector3d* p) {
  for (int k = 1; k + 1 < n; ++k) {
    const Vector3d line = p[k + 1] - p[k - 1];
    const double line_len = line.norm();
    if (line_len < 1e-12) continue;
    const Vector3d u = line / line_len;
    const Vector3d rel = p[k] - p[k - 1];
    const Vector3d along = rel.dot(u) * u;
    const Vector3d across = rel - along;
    const Vector3d pole_rel = pole - p[k - 1];
    const Vector3d pole_across = pole_rel - pole_rel.dot(u) * u;
    const double pole_len = pole_across.norm();
    if (pole_len < 1e-12) continue;
    p[k] = p[k - 1] + along + (across.norm() / pole_len) * pole_across;
  }
}

// Whether every point lies on the line from the first to the last.
bool IsStraight(int n, const Vector3d* p) {
  const Vector3d line = p[n - 1] - p[0];
  const double length = line.norm();
  if (length < 1e-12) return false;
  const Vector3d u = line / length;
  const double eps_sq = 1e-18 * length * length;
  for (int k = 1; k + 1 < n; ++k) {
    const Vector3d d = p[k] - p[0];
    if ((d - d.dot(u) * u).squaredNorm() > eps_sq) return false;
  }
  return true;
}

// Unconstrained FABRIK on points only; returns iterations run.
int SolvePoints(const ChainProblem& problem, Workspace& ws) {
  const Goal& goal = *problem.goal;
  const int n = static_cast<int>(problem.joints.size());
  Vector3d* p = ws.points.data();
  const double* len = ws.lengths.data();
  const Vector3d base = p[0];
  const Vector3d& target = goal.target;

  if ((target - base).norm() >= problem.chain_length) {
    // Out of reach: straighten towards the target.
    const Vector3d dir = (target - base).normalized();
    for (int k = 0; k + 1 < n; ++k) p[k + 1] = p[k] + len[k] * dir;
    return 1;
  }
  // Start with the whole chain turned so its tip points at the target: the
  // same pose up to a rigid rotation about the root, and usually far fewer
  // iterations than starting from an arbitrary direction.
  // (Not for a straight chain: aligned with the target it would be the
  // degenerate case FABRIK cannot leave.)
  if (!IsStraight(n, p)) {
    const Quaterniond align = SmallestRotation(p[n - 1] - base, target - base);
    for (int k = 1; k < n; ++k) p[k] = base + RotateVector(align, p[k] - base);
  }
  if (goal.pole) ApplyPole(*goal.pole, n, p);

  int iterations = 0;
  StallGuard guard(problem.deadline, problem.tolerance);
  while (iterations < problem.max_iterations &&
         guard.KeepGoing((p[n - 1] - target).norm())) {
    ++iterations;
    // Forward reaching: tip onto the target, then towards the root. The
    // root's own reach is skipped: the backward pass puts it back on its
    // base at once (p[0] == base here).
    const Vector3d beyond = p[n - 1];  // Where the tip was: the far end.
    p[n - 1] = target;
    for (int k = n - 2; k >= 1; --k) {
      const Vector3d& behind = k + 2 < n ? p[k + 2] : beyond;
      p[k] = Reach(p[k + 1], p[k], len[k], behind);
    }
    // Backward reaching: from the base towards the tip. Should the first
    // inner point land exactly on the base, its direction continues from
    // where the skipped forward reach would have put the root.
    if ((p[1] - base).squaredNorm() < 1e-300) {
      const Vector3d root = Reach(p[1], base, len[0], n > 2 ? p[2] : beyond);
      p[1] = Reach(base, p[1], len[0], root);
    } else {
      p[1] = Reach(base, p[1], len[0], base);
    }
    for (int k = 1; k + 1 < n; ++k) {
      p[k + 1] = Reach(p[k], p[k + 1], len[k], p[k - 1]);
    }
    if (goal.pole) ApplyPole(*goal.pole, n, p);
  }
  return iterations;
}

// Turns chain joints 0..n-2 so each bone points at points[k + 1], in order
// from the root, projecting each onto its limits. Leaves ws.points holding
// the positions actually reached and chain_globals current.
void PointJointsAt(const ChainProblem& problem, Workspace& ws, Pose& pose) {
  const int n = static_cast<int>(problem.joints.size());
  Vector3d* p = ws.points.data();
  Transform* g = ws.chain_globals.data();
  const Transform* parent = &problem.parent_global;
  for (int k = 0; k + 1 < n; ++k) {
    g[k] = *parent * pose.local[problem.joints[k]];
    const Vector3d child = g[k] * pose.local[problem.joints[k + 1]].translation;
    const Quaterniond turn = TurnTowards(
        problem.skeleton->joint(problem.joints[k]), g[k], child, p[k + 1]);
    g[k].rotation = SetGlobalRotation(problem, k, parent->rotation,
                                      turn * g[k].rotation, pose);
    p[k] = g[k].translation;
    parent = &g[k];
  }
  g[n - 1] = *parent * pose.local[problem.joints[n - 1]];
  p[n - 1] = g[n - 1].translation;
}

// Unconstrained chains: turns each bone's model-space rotation by the
// smallest rotation from its old direction to its new one. Unlike
// PointJointsAt, every bone's turn is independent of its parent's (no twist
// accumulates down the chain, and the work pipelines), and it is exact:
// forward kinematics of the result reproduces the points. Uses the entry
// chain_globals as the old pose and updates them to the new one.
void WriteRotations(const ChainProblem& problem, Workspace& ws, Pose& pose) {
  const int n = static_cast<int>(problem.joints.size());
  const Vector3d* p = ws.points.data();
  Transform* g = ws.chain_globals.data();
  const double* len = ws.lengths.data();
  Quaterniond parent = problem.parent_global.rotation;
  for (int k = 0; k + 1 < n; ++k) {
    // Old and new bone vectors both have length len[k] (FABRIK keeps it), so
    // the half-angle form needs no lengths of its own: (len^2 + a.b, a x b)
    // normalised is the rotation from a to b. One square root per bone.
    const Vector3d a = g[k + 1].translation - g[k].translation;
    const Vector3d b = p[k + 1] - p[k];
    const double l_sq = len[k] * len[k];
    const double w = l_sq + a.dot(b);
    Quaterniond turn;
    if (w > 1e-12 * l_sq) {
      const Vector3d c = a.cross(b);
      // One division for the four components (normalize() divides each).
      const double inv = 1.0 / std::sqrt(w * w + c.squaredNorm());
      turn = Quaterniond(w * inv, c.x() * inv, c.y() * inv, c.z() * inv);
    } else {
      // Zero-length bone (nothing to turn) or an exact half turn.
      turn = SmallestRotation(a, b);
    }
    g[k].rotation = turn * g[k].rotation;
    g[k].translation = p[k];
    // Both factors are unit and freshly made, so the product is unit to
    // rounding; Solve renormalises its input on the next call.
    pose.local[problem.joints[k]].rotation = parent.conjugate() * g[k].rotation;
    parent = g[k].rotation;
  }
  g[n - 1].rotation = parent * pose.local[problem.joints[n - 1]].rotation;
  g[n - 1].translation = p[n - 1];
}

// FABRIK with joint limits: forward reaching on points, backward reaching on
// rotations projected onto each joint's limits.
int SolveConstrained(const ChainProblem& problem, Workspace& ws, Pose& pose) {
  const Goal& goal = *problem.goal;
  const int n = static_cast<int>(problem.joints.size());
  Vector3d* p = ws.points.data();
  const double* len = ws.lengths.data();
  const Vector3d& target = goal.target;
  int iterations = 0;
  StallGuard guard(problem.deadline, problem.tolerance);
  while (iterations < problem.max_iterations &&
         guard.KeepGoing((p[n - 1] - target).norm())) {
    ++iterations;
    const Vector3d beyond = p[n - 1];
    p[n - 1] = target;
    for (int k = n - 2; k >= 1; --k) {
      const Joint& joint = problem.skeleton->joint(problem.joints[k]);
      if (joint.type == JointType::kHinge && len[k] > 0.0) {
        // A hinge sweeps its bone over a cone about its axis (a plane when
        // the bone is square to it): the bone keeps its angle to the axis.
        // Reach from the child along the nearest direction on that cone
        // (after Aristidou et al. 2016, "Extending FABRIK with model
        // constraints"), with the axis where the last backward pass left it.
        const Vector3d axis = ws.chain_globals[k].rotation * joint.axis;
        const Vector3d offset = ws.chain_globals[k].rotation *
                                pose.local[problem.joints[k + 1]].translation;
        const double along = offset.dot(axis) / offset.norm();  // cos(beta)
        const Vector3d v = p[k] - p[k + 1];  // Minus the bone.
        const Vector3d across = v - v.dot(axis) * axis;
        const double across_norm = across.norm();
        if (across_norm > 1e-12 * len[k]) {
          const double sin_beta = std::sqrt(std::max(0.0, 1.0 - along * along));
          p[k] = p[k + 1] - len[k] * along * axis +
                 across * (len[k] * sin_beta / across_norm);
          continue;
        }
      }
      p[k] = Reach(p[k + 1], p[k], len[k], k + 2 < n ? p[k + 2] : beyond);
    }
    if (goal.pole) ApplyPole(*goal.pole, n, p);
    PointJointsAt(problem, ws, pose);
  }
  return iterations;
}

}  // namespace

int FabrikSolver::Solve(const ChainProblem& problem, Workspace& ws,
                        Pose& pose) const {
  const int n = static_cast<int>(problem.joints.size());
  bool constrained = false;
  for (int k = 0; k < n; ++k) {
    ws.points[k] = ws.chain_globals[k].translation;
    if (k + 1 < n) {
      constrained |= problem.skeleton->joint(problem.joints[k]).IsConstrained();
    }
  }
  int iterations;
  if (constrained) {
    iterations = SolveConstrained(problem, ws, pose);
  } else {
    iterations = SolvePoints(problem, ws);
    WriteRotations(problem, ws, pose);
  }
  ApplyTipOrientation(problem, ws, pose);
  return iterations;
}

}  // namespace reach
