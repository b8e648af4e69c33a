#include "solvers/fabrik.h"

#include <algorithm>
#include <cmath>

#include "solvers/jacobian.h"
#include "solvers/limits.h"
#include "solvers/stall_guard.h"

namespace reach {
namespace {

using Eigen::Quaterniond;
using Eigen::Vector3d;

// The finishing pass takes over when the error fell by less than this
// factor over SlowProgress::kWindow iterations, and runs at most
// kRefineIterations damped least squares steps.
constexpr double kSlowRatio = 0.66;
constexpr int kRefineIterations = 32;

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

// Root finding for BendPointsToReach: a root of f in [a, b] given
// f(a) = fa and f(b) = fb of opposite signs, by Illinois regula falsi
// (superlinear, never leaves the bracket). Returns the last point tried
// and writes f there to *value.
template <class F>
double IllinoisRoot(const F& f, double a, double fa, double b, double fb,
                    double tolerance, double* value) {
  double x = b, fx = fb;
  int kept = 0;  // Which end stayed last time: -1 b, +1 a.
  for (int i = 0; i < 60 && std::abs(fx) > tolerance; ++i) {
    x = (a * fb - b * fa) / (fb - fa);
    fx = f(x);
    if ((fx > 0.0) == (fb > 0.0)) {
      b = x;
      fb = fx;
      if (kept == -1) fa *= 0.5;
      kept = -1;
    } else {
      a = x;
      fa = fx;
      if (kept == 1) fb *= 0.5;
      kept = 1;
    }
  }
  *value = fx;
  return x;
}

// The near-full-extension finish of FABRIK and CCD on an unconstrained
// chain (points p[0..n-1], root fixed, bone lengths len[0..n-2]). Near full
// extension the tip's distance from the root changes only to second order in
// the bends, so both methods converge linearly with a rate near 1 (thousands of
// iterations at 0.9995 x the chain's length). On a free chain the
// distance and the direction separate: change the chain's shape until its
// tip is exactly as far from the root as the target (a scalar root find),
// then turn the whole chain about the root onto the target, which keeps
// every bone length and bend.
// - Tip too far out: bend every inner joint by the same angle about one
//   axis square to the chain's line (a circular arc on a straight chain),
//   in the plane of the chain's present bend, else of the pole, else of
//   the target.
// - Tip too close in: straighten every bone towards the line from the root
//   to the tip by the same fraction (fully straight reaches the chain's
//   length, beyond the target).
// - Target at or beyond the chain's length: the chain straight at it.
// Returns false, points untouched, when no arc within 90 degrees per joint
// reaches the target's distance (or the chain or target is degenerate).
bool BendPointsToReach(const ChainProblem& problem, int n, const double* len,
                       Vector3d* p) {
  const Goal& goal = *problem.goal;
  const Vector3d base = p[0];
  const Vector3d to_target = goal.target - base;
  const double d = to_target.norm();
  const double length = problem.chain_length;
  if (d >= length && d > 0.0) {
    const Vector3d dir = to_target / d;
    for (int k = 0; k + 1 < n; ++k) {
      p[k + 1] = p[k] + len[k] * dir;
    }
    return true;
  }
  if (n < 3 || !(d >= 1e-9 * length)) return false;
  const Vector3d chord = p[n - 1] - base;
  const double chord_len = chord.norm();
  if (chord_len < 1e-9 * length) return false;
  const Vector3d u = chord / chord_len;
  const double tolerance = 0.25 * problem.tolerance;
  const double f0 = chord_len - d;
  double value = f0;

  if (f0 > tolerance) {
    // Arc: bone k turned by q^k about `axis`; the tip's offset is
    // b_0 + q (b_1 + q (b_2 + ...)), one rotation per bone (Horner).
    auto across = [&u](const Vector3d& v) {
      return Vector3d(v - v.dot(u) * u);
    };
    const double tiny_sq = 1e-18 * length * length;
    Vector3d side = Vector3d::Zero();
    for (int k = 1; k + 1 < n; ++k) side += across(p[k] - base);
    if (side.squaredNorm() < tiny_sq && goal.pole) {
      side = across(*goal.pole - base);
    }
    if (side.squaredNorm() < tiny_sq) side = across(to_target);
    if (side.squaredNorm() < tiny_sq) side = u.unitOrthogonal();
    const Vector3d axis = u.cross(side).normalized();
    auto f = [&](double theta) {
      const Quaterniond q = AxisAngle(axis, theta);
      Vector3d sum = p[n - 1] - p[n - 2];
      for (int k = n - 3; k >= 0; --k) {
        sum = (p[k + 1] - p[k]) + RotateVector(q, sum);
      }
      return sum.norm() - d;
    };
    // First guess: a uniform arc, chord / length = 1 - Theta^2 / 24 for a
    // total turn Theta, split over the n - 2 inner joints. Either sense
    // may curl (a chain bent one way straightens first the other way).
    constexpr double kMaxTurn = 0.5 * M_PI;
    const double guess = std::sqrt(24.0 * f0 / length) / (n - 2);
    double b = 0.0, fb = f0;
    for (double sign : {-1.0, 1.0}) {
      for (double step = std::min(guess, kMaxTurn);; step *= 2.0) {
        b = sign * std::min(step, kMaxTurn);
        fb = f(b);
        if (fb <= 0.0 || std::abs(b) >= kMaxTurn) break;
      }
      if (fb <= 0.0) break;
    }
    if (fb > 0.0) return false;
    const double theta = IllinoisRoot(f, 0.0, f0, b, fb, tolerance, &value);
    if (!(std::abs(value) <= tolerance)) return false;
    const Quaterniond step = AxisAngle(axis, theta);
    Quaterniond turn = Quaterniond::Identity();
    Vector3d bone = p[1] - p[0];
    for (int k = 0; k + 1 < n; ++k) {
      const Vector3d next_bone =
          k + 2 < n ? Vector3d(p[k + 2] - p[k + 1]) : Vector3d::Zero();
      p[k + 1] = p[k] + RotateVector(turn, bone);
      bone = next_bone;
      turn = (step * turn).normalized();
    }
  } else if (f0 < -tolerance) {
    // Straighten: bone k's direction nlerped from its own (s = 1) to the
    // chord's (s = 0), keeping its length. At s = 0 the tip lies at the
    // chain's length, beyond the target, so [0, 1] brackets a root.
    auto bone_at = [&](int k, double s) {
      const Vector3d b = p[k + 1] - p[k];
      const double len = b.norm();
      if (len == 0.0) return Vector3d(Vector3d::Zero());
      Vector3d dir = s * (b / len) + (1.0 - s) * u;
      const double dir_len = dir.norm();
      // An exact half turn from the chord: any square direction will do.
      if (dir_len < 1e-12) return Vector3d(len * u.unitOrthogonal());
      return Vector3d((len / dir_len) * dir);
    };
    auto f = [&](double s) {
      Vector3d sum = Vector3d::Zero();
      for (int k = 0; k + 1 < n; ++k) sum += bone_at(k, s);
      return sum.norm() - d;
    };
    const double s =
        IllinoisRoot(f, 1.0, f0, 0.0, length - d, tolerance, &value);
    if (!(std::abs(value) <= tolerance)) return false;
    Vector3d next = bone_at(0, s);
    for (int k = 0; k + 1 < n; ++k) {
      const Vector3d bone = next;
      if (k + 2 < n) next = bone_at(k + 1, s);
      p[k + 1] = p[k] + bone;
    }
  }
  const Quaterniond align = SmallestRotation(p[n - 1] - base, to_target);
  for (int k = 1; k < n; ++k) p[k] = base + RotateVector(align, p[k] - base);
  if (goal.pole) ApplyPole(*goal.pole, n, p);
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
  // Slow progress ends the loop early: FabrikSolver::Solve finishes then.
  SlowProgress slow(kSlowRatio);
  while (iterations < problem.max_iterations) {
    const double error = (p[n - 1] - target).norm();
    if (!guard.KeepGoing(error) || slow.Slow(error)) break;
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

// Unconstrained chains: turns each bone's model-space rotation by the
// smallest rotation from its old direction to its new one. Every bone's
// turn is independent of its parent's (no twist accumulates down the
// chain, and the work pipelines), and it is exact: forward kinematics of
// the result reproduces the points. Uses the entry chain_globals as the
// old pose and updates them to the new one.
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

// FABRIK with joint limits, after Aristidou, Chrysanthou & Lasenby 2016
// ("Extending FABRIK with model constraints", Computer Animation and
// Virtual Worlds 27(1)): both passes carry each joint's whole model-space
// frame, not only its position, and enforce the limits as they go.
//
// - Forward pass (tip to root): bone k's frame is the last one turned by
//   the smallest rotation that points the bone from its old root p[k] at
//   the new position of joint k + 1 (the target for the last bone). Joint
//   k + 1's limits then bind the parent to the child, read backwards: its
//   local rotation F_k^-1 F_{k+1} is projected onto its limits and F_k
//   follows from the result, F_k = F_{k+1} (projected)^-1. The frames keep
//   the twist a point-only pass throws away, which decides where each
//   child's cone lies when bones leave their joints off the twist axis.
// - Backward pass (root to tip): each joint takes the forward frame turned
//   to point its bone at the forward position of its child (a hinge: the
//   turn about its axis, TurnTowards), projected onto its limits
//   (SetGlobalRotation); the positions follow by forward kinematics, so
//   every returned pose respects the limits.
//
// Alone this reaches 73-99% of the random limited ball-chain targets of
// bench/quality_bench.cc per row (the former point-based forward pass:
// 2-49%), and about half of those of tests/solvers/property_test.cc,
// where every other joint is a hinge about a random axis (as before);
// where it stalls FabrikSolver::Solve finishes with RefineTipPosition.
int SolveConstrained(const ChainProblem& problem, Workspace& ws, Pose& pose) {
  const Goal& goal = *problem.goal;
  const Skeleton& skeleton = *problem.skeleton;
  const int n = static_cast<int>(problem.joints.size());
  Vector3d* p = ws.points.data();
  Transform* g = ws.chain_globals.data();
  // The forward pass's frames. They live from one forward pass to the next
  // backward pass only, so the restart scratch serves (RefineTipPosition,
  // which may run afterwards, makes no restarts).
  Quaterniond* f = ws.best_rotations.data();
  const Vector3d& target = goal.target;
  // Slow progress hands over to the finishing pass, which needs a target
  // within reach; beyond it the error levels off at the excess, and the
  // stall guard decides.
  const bool within_reach = (target - p[0]).norm() < problem.chain_length;
  int iterations = 0;
  StallGuard guard(problem.deadline, problem.tolerance);
  SlowProgress slow(kSlowRatio);
  while (iterations < problem.max_iterations) {
    const double error = (p[n - 1] - target).norm();
    if (!guard.KeepGoing(error) || (within_reach && slow.Slow(error))) break;
    ++iterations;
    // Forward reaching: tip onto the target, then towards the root.
    p[n - 1] = target;
    Vector3d next = target;  // Where joint k + 1 now lies.
    for (int k = n - 2; k >= 0; --k) {
      const Vector3d bone =
          g[k].scale * pose.local[problem.joints[k + 1]].translation;
      Quaterniond frame = g[k].rotation;
      frame = SmallestRotation(RotateVector(frame, bone), next - p[k]) * frame;
      if (k + 2 < n) {
        const Joint& child = skeleton.joint(problem.joints[k + 1]);
        if (child.type == JointType::kHinge) {
          // F_k = F_{k+1} H(theta)^-1 with H(theta) the hinge's local
          // rotation: bone k then points along F_{k+1} R(axis, -theta)
          // rest^-1 bone. The angle that points it closest to `next - p[k]`
          // (as TurnTowards), clamped to the hinge's range.
          const Vector3d w =
              RotateVector(child.rest.rotation.conjugate(), bone);
          const Vector3d t = RotateVector(f[k + 1].conjugate(), next - p[k]);
          const Vector3d& axis = child.axis;
          const Vector3d w_across = w - w.dot(axis) * axis;
          const Vector3d t_across = t - t.dot(axis) * axis;
          double theta = HingeAngle(child, frame.conjugate() * f[k + 1]);
          if (w_across.squaredNorm() > 1e-24 &&
              t_across.squaredNorm() > 1e-24) {
            theta = -std::atan2(axis.dot(w_across.cross(t_across)),
                                w_across.dot(t_across));
          }
          frame = (f[k + 1] *
                   HingeRotation(child, ConstrainHingeAngle(child, theta))
                       .conjugate())
                      .normalized();
        } else if (child.IsConstrained()) {
          const Quaterniond local = frame.conjugate() * f[k + 1];
          frame = (f[k + 1] * ConstrainRotation(child, local).conjugate())
                      .normalized();
        }
      }
      f[k] = frame;
      p[k] = next - RotateVector(frame, bone);
      next = p[k];
    }
    if (goal.pole) ApplyPole(*goal.pole, n, p);
    // Backward reaching: from the root (its parent fixed) to the tip.
    const Transform* parent = &problem.parent_global;
    for (int k = 0; k + 1 < n; ++k) {
      const Joint& joint = skeleton.joint(problem.joints[k]);
      g[k] = *parent * pose.local[problem.joints[k]];
      const Vector3d bone =
          g[k].scale * pose.local[problem.joints[k + 1]].translation;
      Quaterniond desired = g[k].rotation;
      if (joint.type == JointType::kHinge) {
        const Vector3d child =
            g[k].translation + RotateVector(g[k].rotation, bone);
        desired = TurnTowards(joint, g[k], child, p[k + 1]) * g[k].rotation;
      } else if (joint.type == JointType::kBall) {
        desired = SmallestRotation(RotateVector(f[k], bone),
                                   p[k + 1] - g[k].translation) *
                  f[k];
      }
      g[k].rotation =
          SetGlobalRotation(problem, k, parent->rotation, desired, pose);
      p[k] = g[k].translation;
      parent = &g[k];
    }
    g[n - 1] = *parent * pose.local[problem.joints[n - 1]];
    p[n - 1] = g[n - 1].translation;
  }
  return iterations;
}

}  // namespace

bool BendToReach(const ChainProblem& problem, Workspace& ws, Pose& pose) {
  const int n = static_cast<int>(problem.joints.size());
  for (int k = 0; k + 1 < n; ++k) {
    if (problem.skeleton->joint(problem.joints[k]).IsConstrained()) {
      return false;
    }
  }
  for (int k = 0; k < n; ++k) ws.points[k] = ws.chain_globals[k].translation;
  if (!BendPointsToReach(problem, n, ws.lengths.data(), ws.points.data()))
    return false;
  WriteRotations(problem, ws, pose);
  return true;
}

int FabrikSolver::Solve(const ChainProblem& problem, Workspace& ws,
                        Pose& pose) const {
  const int n = static_cast<int>(problem.joints.size());
  const Vector3d& target = problem.goal->target;
  bool constrained = false;
  for (int k = 0; k < n; ++k) {
    ws.points[k] = ws.chain_globals[k].translation;
    if (k + 1 < n) {
      constrained |= problem.skeleton->joint(problem.joints[k]).IsConstrained();
    }
  }
  const bool within_reach =
      (target - ws.points[0]).norm() < problem.chain_length;
  int iterations;
  if (constrained) {
    iterations = SolveConstrained(problem, ws, pose);
  } else {
    iterations = SolvePoints(problem, ws);
    // Stopped short (in practice: near full extension, where FABRIK
    // crawls): the exact finish on the points.
    if (within_reach && iterations < problem.max_iterations &&
        (ws.points[n - 1] - target).norm() > problem.tolerance &&
        BendPointsToReach(problem, n, ws.lengths.data(), ws.points.data())) {
      ++iterations;
    }
    WriteRotations(problem, ws, pose);
  }
  // Still short (joints against their limits, or a free chain whose shape
  // no even bend fixes): damped least squares steps from here, within the
  // limits and the iteration cap.
  if (within_reach && iterations < problem.max_iterations &&
      (ws.chain_globals[n - 1].translation - target).norm() >
          problem.tolerance) {
    iterations += RefineTipPosition(
        problem, ws, pose,
        std::min(kRefineIterations, problem.max_iterations - iterations));
    // Stalled against a bound (a knee straight at a one-sided limit).
    iterations += RefineOffBounds(
        problem, ws, pose,
        std::min(kRefineIterations, problem.max_iterations - iterations));
  }
  ApplyTipOrientation(problem, ws, pose);
  return iterations;
}

}  // namespace reach
