#include "tests/testing/sweep.h"

#include <algorithm>
#include <cmath>

#include "solvers/solve.h"

namespace reach::testing {

IndependentGlobals IndependentFk(const Skeleton& skeleton, const Pose& pose) {
  const int n = skeleton.num_joints();
  IndependentGlobals out;
  out.position.resize(n);
  out.rotation.resize(n);
  std::vector<double> scale(n);
  for (int j = 0; j < n; ++j) {
    const Transform& local = pose.local[j];
    const int p = skeleton.joint(j).parent;
    if (p < 0) {
      out.position[j] = local.translation;
      out.rotation[j] = local.rotation;
      scale[j] = local.scale;
    } else {
      out.position[j] = out.position[p] + scale[p] * (out.rotation[p]._transformVector(
                                                         local.translation));
      out.rotation[j] = out.rotation[p] * local.rotation;
      scale[j] = scale[p] * local.scale;
    }
  }
  return out;
}

std::vector<Eigen::Vector3d> SphereDirections(int count) {
  std::vector<Eigen::Vector3d> out;
  const double golden = M_PI * (3.0 - std::sqrt(5.0));
  for (int i = 0; i < count; ++i) {
    const double y = 1.0 - (i + 0.5) * 2.0 / count;
    const double r = std::sqrt(std::max(0.0, 1.0 - y * y));
    const double a = golden * i;
    out.emplace_back(r * std::cos(a), y, r * std::sin(a));
  }
  return out;
}

namespace {

double RotationStep(const Eigen::Quaterniond& a, const Eigen::Quaterniond& b) {
  const Eigen::Quaterniond d = a.conjugate() * b;
  return 2.0 * std::atan2(d.vec().norm(), std::abs(d.w()));
}

}  // namespace

SweepStats RunSweep(const Skeleton& skeleton, const Pose& start,
                    const SweepSpec& spec) {
  SweepStats stats;
  const std::vector<int>& chain = skeleton.chain(spec.chain).joints;
  const int n = static_cast<int>(chain.size());
  const IndependentGlobals rest = IndependentFk(skeleton, start);
  double length = 0.0;
  for (int k = 0; k + 1 < n; ++k) {
    length += (rest.position[chain[k + 1]] - rest.position[chain[k]]).norm();
  }
  const Eigen::Vector3d root = rest.position[chain[0]];
  const Eigen::Vector3d u = spec.direction.normalized();
  auto across = [&](const Eigen::Vector3d& v) -> Eigen::Vector3d {
    return v - v.dot(u) * u;
  };
  std::optional<Eigen::Vector3d> reference;
  if (spec.pole_offset) reference = across(*spec.pole_offset).normalized();

  Workspace ws;
  Pose pose = start;
  Pose previous = start;
  Goal goal;
  goal.chain = spec.chain;
  goal.solver = spec.solver;
  goal.options = spec.options;
  if (spec.pole_offset) goal.pole = root + *spec.pole_offset;
  for (int f = 0; f < spec.frames; ++f) {
    const double phase = spec.frames > 1 ? f / double(spec.frames - 1) : 0.0;
    const double s =
        spec.near + (spec.far - spec.near) * 0.5 * (1.0 - std::cos(2 * M_PI * phase));
    goal.target = root + s * length * u;
    GoalResult result;
    const absl::Status status = Solve(skeleton, absl::MakeConstSpan(&goal, 1),
                                      ws, &pose, absl::MakeSpan(&result, 1));
    ++stats.frames;
    if (!status.ok()) {
      ++stats.solve_errors;
      continue;
    }
    const IndependentGlobals g = IndependentFk(skeleton, pose);
    for (int j : chain) {
      const Eigen::Quaterniond& q = pose.local[j].rotation;
      if (!q.coeffs().allFinite() || std::abs(q.norm() - 1.0) > 1e-9) {
        ++stats.bad_rotations;
      }
      // From frame 1 on: frame 0 steps from the start pose, not a frame.
      if (f > 0) {
        stats.max_step_rad = std::max(
            stats.max_step_rad, RotationStep(previous.local[j].rotation, q));
      }
    }
    const double error = (g.position[chain[n - 1]] - goal.target).norm();
    if (s * length <= length) {
      stats.worst_reachable_error =
          std::max(stats.worst_reachable_error, error / result.tolerance);
      if (error > result.tolerance) ++stats.unreached_reachable;
    }
    Eigen::Vector3d bend = Eigen::Vector3d::Zero();
    for (int k = 1; k + 1 < n; ++k) bend += across(g.position[chain[k]] - root);
    if (bend.norm() > 1e-6 * length) {
      if (!reference) reference = bend.normalized();
      if (bend.dot(*reference) < 0.0) ++stats.wrong_side_frames;
      // The pole's angle only where the knee is visibly off the line: a
      // bend of 1e-5 of the length (what a limb keeps past full
      // extension) turns by degrees with a micro-radian of aim.
      if (spec.pole_offset && bend.norm() > 1e-4 * length) {
        const double angle =
            std::atan2(bend.cross(*reference).norm(), bend.dot(*reference));
        stats.max_pole_angle_deg =
            std::max(stats.max_pole_angle_deg, angle * 180.0 / M_PI);
      }
    }
    previous = pose;
  }
  return stats;
}

double KneePoleAngleDeg(const Eigen::Vector3d& hip, const Eigen::Vector3d& knee,
                        const Eigen::Vector3d& target,
                        const Eigen::Vector3d& pole) {
  const Eigen::Vector3d u = (target - hip).normalized();
  Eigen::Vector3d k = knee - hip;
  Eigen::Vector3d p = pole - hip;
  k -= k.dot(u) * u;
  p -= p.dot(u) * u;
  return std::atan2(k.cross(p).norm(), k.dot(p)) * 180.0 / M_PI;
}

std::vector<Eigen::Vector3d> NearLineTargets(const Eigen::Vector3d& root,
                                             const Eigen::Vector3d& line,
                                             double offset_rad) {
  std::vector<Eigen::Vector3d> out;
  for (const Eigen::Vector3d& about :
       {Eigen::Vector3d(1, 0, 0), Eigen::Vector3d(0, 0, 1),
        Eigen::Vector3d(1, 1, 1)}) {
    const Eigen::Vector3d axis = line.cross(about).squaredNorm() > 1e-12
                                     ? line.cross(about).normalized()
                                     : line.unitOrthogonal();
    out.push_back(root +
                  0.8 * (Eigen::AngleAxisd(offset_rad, axis) * line));
  }
  return out;
}

}  // namespace reach::testing
