// Solve rate and time per solve on the 7-DOF Franka Emika Panda with its
// joint limits, ours beside Orocos KDL's, under TRAC-IK's protocol
// (Beeson & Ames 2015, "TRAC-IK: An Open-Source Library for Improved
// Solving of Generic Inverse Kinematics"):
//
//   random joint configuration within the limits -> FK pose (6-D target)
//   -> solve from the mid-limit seed; tolerance 1e-5 in position (m) and
//   orientation (rad); a 5 ms budget per solve; a solution counts only if
//   it is inside the limits. "+restarts" variants re-seed uniformly within
//   the limits until a solution or the budget runs out (how TRAC-IK runs
//   KDL); restarts are offered to every solver alike.
//
// Every candidate solution is judged by the same check: KDL's forward
// kinematics of the returned joint angles against the target.
//
// Usage: ik_peer_bench [--samples N] [--budget_ms B] [--seed S]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <kdl/chainfksolverpos_recursive.hpp>
#include <kdl/chainiksolverpos_lma.hpp>
#include <kdl/chainiksolverpos_nr_jl.hpp>
#include <kdl/chainiksolvervel_pinv.hpp>
#include <kdl/frames.hpp>
#include <kdl/jntarray.hpp>
#include <random>
#include <string>
#include <vector>

#include "solvers/limits.h"
#include "solvers/solve.h"
#include "tests/testing/kdl_models.h"
#include "tests/testing/models.h"

namespace reach {
namespace {

using Clock = std::chrono::steady_clock;
using Joints = std::vector<double>;

constexpr double kTolerance = 1e-5;
constexpr int kDof = 7;

struct Config {
  int samples = 2000;
  double budget_ms = 5.0;
  unsigned seed = 2015;
};

// One attempt from a seed: writes joint angles, returns whether the solver
// claims success (the claim is not trusted; see Judge).
using Attempt = std::function<bool(const Joints& seed, const KDL::Frame& target,
                                   Joints* q)>;

struct Method {
  std::string name;
  Attempt attempt;
  bool restarts;
};

class Judge {
 public:
  explicit Judge(const KDL::Chain& chain) : fk_(chain), q_(kDof) {}

  // Brings each angle inside its limits by a multiple of 2pi when one fits
  // (the same rotation; helps solvers that ignore limits), then checks the
  // limits and the FK error.
  bool Accept(const KDL::Frame& target, Joints* q) {
    const auto& limits = testing::PandaLimits();
    for (int i = 0; i < kDof; ++i) {
      double& a = (*q)[i];
      if (!std::isfinite(a)) return false;
      for (double c : {a, a - 2 * M_PI, a + 2 * M_PI}) {
        if (c >= limits[i].lo && c <= limits[i].hi) {
          a = c;
          break;
        }
      }
      if (a < limits[i].lo || a > limits[i].hi) return false;
      q_(i) = a;
    }
    KDL::Frame frame;
    if (fk_.JntToCart(q_, frame) < 0) return false;
    const KDL::Twist diff = KDL::diff(frame, target);
    return diff.vel.Norm() <= kTolerance && diff.rot.Norm() <= kTolerance;
  }

 private:
  KDL::ChainFkSolverPos_recursive fk_;
  KDL::JntArray q_;
};

Joints MidLimits() {
  Joints q(kDof);
  for (int i = 0; i < kDof; ++i) {
    q[i] = 0.5 * (testing::PandaLimits()[i].lo + testing::PandaLimits()[i].hi);
  }
  return q;
}

Joints RandomJoints(std::mt19937_64& rng) {
  Joints q(kDof);
  for (int i = 0; i < kDof; ++i) {
    q[i] = std::uniform_real_distribution<double>(
        testing::PandaLimits()[i].lo, testing::PandaLimits()[i].hi)(rng);
  }
  return q;
}

KDL::JntArray ToKdl(const Joints& q) {
  KDL::JntArray out(q.size());
  for (size_t i = 0; i < q.size(); ++i) out(i) = q[i];
  return out;
}

struct Outcome {
  int solved = 0;
  std::vector<double> micros;  // Time per solve, successes and failures.
};

Outcome Run(const Method& method, const std::vector<KDL::Frame>& targets,
            const KDL::Chain& chain, const Config& config) {
  Judge judge(chain);
  std::mt19937_64 rng(config.seed + 7);
  Outcome out;
  out.micros.reserve(targets.size());
  const Joints mid = MidLimits();
  Joints q(kDof);
  const auto budget =
      std::chrono::duration<double, std::milli>(config.budget_ms);
  for (const KDL::Frame& target : targets) {
    const Clock::time_point start = Clock::now();
    method.attempt(mid, target, &q);
    bool ok = judge.Accept(target, &q);
    while (!ok && method.restarts && Clock::now() - start < budget) {
      method.attempt(RandomJoints(rng), target, &q);
      ok = judge.Accept(target, &q);
    }
    const double us =
        std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    out.micros.push_back(us);
    out.solved += ok;
  }
  return out;
}

// Our solver, one attempt: the seed becomes the start pose.
class OurAttempt {
 public:
  OurAttempt(const Skeleton& skeleton, SolverKind kind)
      : skeleton_(skeleton),
        joints_(testing::PandaJointIndices(skeleton)),
        flange_(skeleton.FindJoint("panda_flange")),
        pose_(RestPose(skeleton)) {
    goal_.chain = 0;
    goal_.solver = kind;
    goal_.options.tolerance = kTolerance;
    goal_.options.orientation_tolerance_rad = kTolerance;
  }

  bool operator()(const Joints& seed, const KDL::Frame& target, Joints* q) {
    for (int i = 0; i < kDof; ++i) {
      pose_.local[joints_[i]].rotation =
          HingeRotation(skeleton_.joint(joints_[i]), seed[i]);
    }
    double x, y, z, w;
    target.M.GetQuaternion(x, y, z, w);
    goal_.target = Eigen::Vector3d(target.p.x(), target.p.y(), target.p.z());
    goal_.target_orientation = Eigen::Quaterniond(w, x, y, z).normalized();
    GoalResult result;
    const absl::Status status = Solve(skeleton_, absl::MakeConstSpan(&goal_, 1),
                                      ws_, &pose_, absl::MakeSpan(&result, 1));
    if (!status.ok()) {
      std::fprintf(stderr, "solve failed: %s\n", status.ToString().c_str());
      std::exit(1);
    }
    for (int i = 0; i < kDof; ++i) {
      (*q)[i] = HingeAngle(skeleton_.joint(joints_[i]),
                           pose_.local[joints_[i]].rotation);
    }
    return result.reached;
  }

 private:
  const Skeleton& skeleton_;
  std::vector<int> joints_;
  int flange_;
  Pose pose_;
  Goal goal_;
  Workspace ws_;
};

int Main(int argc, char** argv) {
  Config config;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--samples")) {
      config.samples = std::atoi(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--budget_ms")) {
      config.budget_ms = std::atof(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--seed")) {
      config.seed = static_cast<unsigned>(std::atoi(argv[i + 1]));
    } else {
      std::fprintf(stderr,
                   "usage: ik_peer_bench [--samples N] [--budget_ms B] "
                   "[--seed S]\n");
      return 2;
    }
  }
  auto skeleton = Skeleton::Create(testing::PandaDef());
  if (!skeleton.ok()) {
    std::fprintf(stderr, "%s\n", skeleton.status().ToString().c_str());
    return 1;
  }
  const KDL::Chain chain = testing::PandaKdlChain();

  // Targets: FK of random configurations within the limits.
  std::mt19937_64 rng(config.seed);
  KDL::ChainFkSolverPos_recursive fk(chain);
  std::vector<KDL::Frame> targets(config.samples);
  for (KDL::Frame& t : targets) fk.JntToCart(ToKdl(RandomJoints(rng)), t);

  KDL::JntArray q_min(kDof), q_max(kDof);
  for (int i = 0; i < kDof; ++i) {
    q_min(i) = testing::PandaLimits()[i].lo;
    q_max(i) = testing::PandaLimits()[i].hi;
  }
  KDL::ChainFkSolverPos_recursive nr_fk(chain);
  KDL::ChainIkSolverVel_pinv nr_vel(chain);
  // TRAC-IK's KDL configuration: 100 Newton-Raphson iterations, eps 1e-5.
  KDL::ChainIkSolverPos_NR_JL nr_jl(chain, q_min, q_max, nr_fk, nr_vel, 100,
                                    kTolerance);
  // LMA weighs orientation by 0.01 by default, which stops it at ~1e-3 rad;
  // equal weights let it meet the 1e-5 orientation tolerance.
  Eigen::Matrix<double, 6, 1> lma_weights = Eigen::Matrix<double, 6, 1>::Ones();
  KDL::ChainIkSolverPos_LMA lma(chain, lma_weights, kTolerance);
  auto kdl_attempt = [](KDL::ChainIkSolverPos& solver) {
    return [&solver](const Joints& seed, const KDL::Frame& target, Joints* q) {
      KDL::JntArray out(kDof);
      const int rc = solver.CartToJnt(ToKdl(seed), target, out);
      for (int i = 0; i < kDof; ++i) (*q)[i] = out(i);
      return rc >= 0;
    };
  };
  OurAttempt dls(*skeleton, SolverKind::kJacobianDls);
  OurAttempt pinv(*skeleton, SolverKind::kJacobianPinv);
  auto ours = [](OurAttempt& a) {
    return [&a](const Joints& seed, const KDL::Frame& target, Joints* q) {
      return a(seed, target, q);
    };
  };

  const std::vector<Method> methods = {
      {"KDL NR_JL", kdl_attempt(nr_jl), false},
      {"KDL NR_JL +restarts", kdl_attempt(nr_jl), true},
      {"KDL LMA", kdl_attempt(lma), false},
      {"KDL LMA +restarts", kdl_attempt(lma), true},
      {"Reach JACOBIAN_PINV", ours(pinv), false},
      {"Reach JACOBIAN_PINV +restarts", ours(pinv), true},
      {"Reach JACOBIAN_DLS", ours(dls), false},
      {"Reach JACOBIAN_DLS +restarts", ours(dls), true},
  };

  std::printf(
      "Panda 7-DOF, joint limits, 6-D targets: %d samples, tolerance %.0e, "
      "budget %.1f ms, seed %u\n\n",
      config.samples, kTolerance, config.budget_ms, config.seed);
  std::printf("%-32s %10s %12s %12s %12s\n", "solver", "solve rate", "mean us",
              "median us", "p99 us");
  for (const Method& method : methods) {
    Outcome outcome = Run(method, targets, chain, config);
    std::vector<double> sorted = outcome.micros;
    std::sort(sorted.begin(), sorted.end());
    double sum = 0.0;
    for (double us : sorted) sum += us;
    std::printf("%-32s %9.2f%% %12.1f %12.1f %12.1f\n", method.name.c_str(),
                100.0 * outcome.solved / config.samples, sum / sorted.size(),
                sorted[sorted.size() / 2],
                sorted[std::min(sorted.size() - 1, sorted.size() * 99 / 100)]);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace reach

int main(int argc, char** argv) { return reach::Main(argc, argv); }
