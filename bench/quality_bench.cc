// Solution quality of the iterative solvers: how often each reaches a
// target it can reach, in how many iterations and how many microseconds.
// A plain program printing Markdown tables (one function per table, one
// shared printer), run by scripts/bench-quality; not run by CI.
//
//   quality_bench [--targets N] [--seed S] [--repeats R]
//                 [--tables limited,extension,sweep,pole,symmetry]
//
// Tables:
// - limited: random chains of ball joints with swing cones and twist ranges
//   (tests/testing/models.h LimitedChainDef), families "wide" (cones
//   20-90 deg, twist +-10-60 deg) and "tight" (5-30 deg, +-5-20 deg) x
//   4, 8, 12, 16 chain joints (including the tip). Every target is on a
//   fresh chain: FK of a random pose within the limits, so every target is
//   reachable. Solved from the rest pose and from another random pose
//   within the limits.
// - extension: straight chains of unlimited ball joints (3, 4, 8, 16
//   joints, random bone lengths), warm-started at full extension along a
//   random direction; targets at 0.999-1.0 x the chain's length along a
//   direction at an angle to the chain's line drawn from each bucket.
// - sweep: a leg (ball knee, hinge knee) warm-started through full
//   extension and back in 24 directions, with and without a pole: flips,
//   wrong-side frames, the largest per-frame joint step against
//   TWO_BONE's on the same sweep, unreached reachable frames.
// - pole: how close each solver puts the knee to the pole's plane, on the
//   issue's case (knee forward, pole behind) and a leg with real limits.
// - symmetry: straight starts with targets 0 to 1e-4 rad off the line.
//
// Every solve goes through reach::Solve with the goal's default options
// (tolerance 1e-5 x the chain's length, the solver's default iteration
// cap): what a caller who sets nothing gets. The time is the mean wall time
// of one Solve call (validation, forward kinematics, solve, measurement),
// single-threaded, from the fastest of --repeats passes (default 3) over
// the row's targets; rates and iterations are the same in every pass.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "solvers/solve.h"
#include "solvers/limits.h"
#include "tests/testing/models.h"
#include "tests/testing/sweep.h"

namespace reach {
namespace {

using ::reach::testing::Rng;

struct Config {
  int targets = 500;  // Per row.
  uint64_t seed = 1;
  int repeats = 3;                  // Timed passes per row; the fastest counts.
  std::vector<std::string> tables;  // Empty: all.
};

// A Markdown table printed with its columns aligned.
class Table {
 public:
  Table(std::string title, std::vector<std::string> columns)
      : title_(std::move(title)), columns_(std::move(columns)) {}

  void AddRow(std::vector<std::string> cells) {
    cells.resize(columns_.size());
    rows_.push_back(std::move(cells));
  }

  void Print() const {
    std::vector<size_t> width(columns_.size());
    for (size_t c = 0; c < columns_.size(); ++c) {
      width[c] = columns_[c].size();
      for (const auto& row : rows_)
        width[c] = std::max(width[c], row[c].size());
    }
    auto line = [&](const std::vector<std::string>& cells) {
      std::string out = "|";
      for (size_t c = 0; c < cells.size(); ++c) {
        out += absl::StrFormat(" %*s |", static_cast<int>(width[c]), cells[c]);
      }
      std::printf("%s\n", out.c_str());
    };
    std::printf("\n### %s\n\n", title_.c_str());
    line(columns_);
    std::string rule = "|";
    for (size_t c = 0; c < columns_.size(); ++c) {
      rule += std::string(width[c] + 1, '-') + ":|";
    }
    std::printf("%s\n", rule.c_str());
    for (const auto& row : rows_) line(row);
    std::fflush(stdout);
  }

 private:
  std::string title_;
  std::vector<std::string> columns_;
  std::vector<std::vector<std::string>> rows_;
};

const SolverKind kSolvers[] = {SolverKind::kFabrik,
                               SolverKind::kCcd,
                               SolverKind::kJacobianTranspose,
                               SolverKind::kJacobianPinv,
                               SolverKind::kJacobianDls,
                               SolverKind::kGradientDescent};

// One target on its own chain, from one start pose.
struct Case {
  Skeleton skeleton;
  Pose start;
  Goal goal;
  Pose scratch;  // The solve's pose, sized once: no allocation when timed.
};

Skeleton MustCreate(SkeletonDef def) {
  auto s = Skeleton::Create(std::move(def));
  if (!s.ok()) {
    std::fprintf(stderr, "bad skeleton: %s\n", s.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*s);
}

// Solve rate, mean iterations and mean microseconds per solve of one
// solver over a set of cases.
struct Outcome {
  double rate = 0.0;
  double iterations = 0.0;
  double micros = 0.0;
  double worst_error = 0.0;  // Largest error / tolerance.
};

// Solves every case `repeats` times; the time is the fastest pass's (the
// results are the same every pass), which keeps a busy machine's stalls
// out of the figures.
Outcome Run(SolverKind solver, std::vector<Case>& cases, int repeats) {
  Workspace ws;
  Outcome out;
  double best_seconds = 1e300;
  for (int pass = 0; pass < repeats; ++pass) {
    int reached = 0;
    int64_t iterations = 0;
    double seconds = 0.0;
    for (Case& c : cases) {
      c.goal.solver = solver;
      c.scratch.local = c.start.local;  // Same size: a copy.
      GoalResult result;
      const auto begin = std::chrono::steady_clock::now();
      const absl::Status status =
          Solve(c.skeleton, absl::MakeConstSpan(&c.goal, 1), ws, &c.scratch,
                absl::MakeSpan(&result, 1));
      seconds += std::chrono::duration<double>(
                     std::chrono::steady_clock::now() - begin)
                     .count();
      if (!status.ok()) {
        std::fprintf(stderr, "solve failed: %s\n", status.ToString().c_str());
        std::exit(1);
      }
      reached += result.reached;
      iterations += result.iterations;
      out.worst_error =
          std::max(out.worst_error, result.position_error / result.tolerance);
    }
    best_seconds = std::min(best_seconds, seconds);
    const double n = static_cast<double>(std::max<size_t>(cases.size(), 1));
    out.rate = reached / n;
    out.iterations = iterations / n;
  }
  out.micros = 1e6 * best_seconds /
               static_cast<double>(std::max<size_t>(cases.size(), 1));
  return out;
}

std::string Percent(double rate) {
  return absl::StrFormat("%.1f%%", 100.0 * rate);
}
std::string Fixed(double v, int digits) {
  return absl::StrFormat("%.*f", digits, v);
}

// Random limited chains, solved from rest and from a random in-limit pose.
void LimitedChainTable(const Config& config) {
  struct Family {
    const char* name;
    double swing_lo_deg, swing_hi_deg, twist_lo_deg, twist_hi_deg;
  };
  const Family families[] = {{"wide", 20, 90, 10, 60}, {"tight", 5, 30, 5, 20}};
  const int joint_counts[] = {4, 8, 12, 16};
  Table table(
      absl::StrFormat("Limited ball chains: %d targets per row (seed %d), "
                      "default options",
                      config.targets, config.seed),
      {"solver", "family", "joints", "rest: solved", "iters", "us",
       "random start: solved", "iters", "us", "worst err/tol"});
  constexpr double kDeg = M_PI / 180;
  for (SolverKind solver : kSolvers) {
    for (const Family& family : families) {
      for (int joints : joint_counts) {
        // The same chains and targets for every solver.
        Rng rng(config.seed * 1000003 + joints * 31 + (family.name[0] == 't'));
        testing::LimitedChainOptions options;
        options.joints = joints;
        options.min_swing_rad = family.swing_lo_deg * kDeg;
        options.max_swing_rad = family.swing_hi_deg * kDeg;
        options.min_twist_rad = family.twist_lo_deg * kDeg;
        options.max_twist_rad = family.twist_hi_deg * kDeg;
        std::vector<Case> from_rest, from_random;
        from_rest.reserve(config.targets);
        from_random.reserve(config.targets);
        for (int t = 0; t < config.targets; ++t) {
          Skeleton skeleton =
              MustCreate(testing::LimitedChainDef(rng, options));
          const Pose target_pose = testing::RandomLimitedPose(skeleton, rng);
          const Pose random_start = testing::RandomLimitedPose(skeleton, rng);
          Goal goal;
          goal.chain = 0;
          goal.target = testing::GlobalOf(skeleton, target_pose,
                                          skeleton.chain(0).joints.back())
                            .translation;
          const Pose rest = RestPose(skeleton);
          from_rest.push_back({skeleton, rest, goal, rest});
          from_random.push_back(
              {std::move(skeleton), random_start, goal, random_start});
        }
        const Outcome a = Run(solver, from_rest, config.repeats);
        const Outcome b = Run(solver, from_random, config.repeats);
        table.AddRow(
            {std::string(SolverName(solver)), family.name,
             std::to_string(joints), Percent(a.rate), Fixed(a.iterations, 1),
             Fixed(a.micros, 1), Percent(b.rate), Fixed(b.iterations, 1),
             Fixed(b.micros, 1),
             absl::StrFormat("%.3g", std::max(a.worst_error, b.worst_error))});
      }
    }
  }
  table.Print();
}

// Straight unlimited chains warm-started at full extension, targets at
// 0.999-1.0 x their length.
void ExtensionTable(const Config& config) {
  struct Bucket {
    const char* name;
    double lo_deg, hi_deg;  // Angle between the chain's line and the target.
  };
  const Bucket buckets[] = {
      {"0.1-1 deg", 0.1, 1}, {"1-10 deg", 1, 10}, {"10-180 deg", 10, 180}};
  const int joint_counts[] = {3, 4, 8, 16};
  Table table(
      absl::StrFormat("Near full extension: straight unlimited chains, warm "
                      "start straight, targets at 0.999-1.0 x length; %d "
                      "targets per row (seed %d)",
                      config.targets, config.seed),
      {"solver", "angle to line", "joints", "solved", "iters", "us",
       "worst err/tol"});
  constexpr double kDeg = M_PI / 180;
  for (SolverKind solver :
       {SolverKind::kFabrik, SolverKind::kCcd, SolverKind::kJacobianDls}) {
    for (const Bucket& bucket : buckets) {
      for (int joints : joint_counts) {
        Rng rng(config.seed * 7919 + joints * 131 +
                static_cast<int>(bucket.lo_deg * 10));
        std::uniform_real_distribution<double> u(0.0, 1.0);
        std::vector<Case> cases;
        cases.reserve(config.targets);
        for (int t = 0; t < config.targets; ++t) {
          SkeletonDef def;
          double length = 0.0;
          for (int k = 0; k < joints; ++k) {
            JointDef& j = def.joints.emplace_back();
            j.name = absl::StrFormat("j%d", k);
            j.parent = k - 1;
            if (k > 0) {
              const double bone = 0.2 + 0.8 * u(rng);
              j.rest.translation = Eigen::Vector3d(bone, 0, 0);
              length += bone;
            }
          }
          def.chains.push_back(
              {"chain", "j0", absl::StrFormat("j%d", joints - 1)});
          Skeleton skeleton = MustCreate(std::move(def));
          // The start: straight along a random direction.
          Pose start = RestPose(skeleton);
          const Eigen::Quaterniond aim = testing::RandomRotation(rng);
          start.local[0].rotation = aim;
          const Eigen::Vector3d line = aim * Eigen::Vector3d::UnitX();
          // The target's direction at an angle from the line, about a
          // random axis square to it.
          const double angle =
              kDeg * (bucket.lo_deg + (bucket.hi_deg - bucket.lo_deg) * u(rng));
          const Eigen::Vector3d a = line.unitOrthogonal();
          const double azimuth = 2 * M_PI * u(rng);
          const Eigen::Vector3d axis =
              std::cos(azimuth) * a + std::sin(azimuth) * line.cross(a);
          Goal goal;
          goal.chain = 0;
          goal.target = (0.999 + 0.001 * u(rng)) * length *
                        (Eigen::AngleAxisd(angle, axis) * line);
          cases.push_back({std::move(skeleton), start, goal, start});
        }
        const Outcome o = Run(solver, cases, config.repeats);
        table.AddRow({std::string(SolverName(solver)), bucket.name,
                      std::to_string(joints), Percent(o.rate),
                      Fixed(o.iterations, 1), Fixed(o.micros, 1),
                      absl::StrFormat("%.3g", o.worst_error)});
      }
    }
  }
  table.Print();
}


constexpr SolverKind kEverySolver[] = {
    SolverKind::kTwoBone,           SolverKind::kFabrik,
    SolverKind::kCcd,               SolverKind::kJacobianTranspose,
    SolverKind::kJacobianPinv,      SolverKind::kJacobianDls,
    SolverKind::kGradientDescent};

// Warm-started sweeps through full extension and back (the stream test of
// tests/solvers/stream_quality_test.cc, with its independent forward
// kinematics): a leg, the foot's target from 0.5 to 1.2 of the leg's
// length and back over 1000 frames, each frame from the previous answer,
// in 24 directions; with and without a pole.
void SweepTable(const Config&) {
  Table table(
      "Warm-started sweeps through full extension (24 directions x 1000 "
      "frames)",
      {"solver", "knee", "pole", "sweeps with a flip", "wrong-side frames",
       "largest step / TWO_BONE's", "unreached reachable frames",
       "worst pole angle (deg)", "us per frame"});
  const std::vector<Eigen::Vector3d> directions =
      testing::SphereDirections(24);
  for (SolverKind solver : kEverySolver) {
    for (bool hinge : {false, true}) {
      const Skeleton leg = MustCreate(testing::TwoBoneLegDef(hinge));
      const Pose rest = RestPose(leg);
      for (bool pole : {false, true}) {
        int flipped = 0, wrong = 0, unreached = 0;
        double ratio = 0.0, angle = 0.0, seconds = 0.0;
        for (int d = 0; d < static_cast<int>(directions.size()); ++d) {
          testing::SweepSpec spec;
          spec.solver = solver;
          spec.direction = directions[d];
          if (pole) {
            const Eigen::Vector3d e1 = directions[d].unitOrthogonal();
            const Eigen::Vector3d e2 = directions[d].cross(e1);
            spec.pole_offset =
                0.5 * (std::cos(d * 1.3) * e1 + std::sin(d * 1.3) * e2) +
                0.3 * directions[d];
          }
          const auto begin = std::chrono::steady_clock::now();
          const testing::SweepStats stats = testing::RunSweep(leg, rest, spec);
          seconds += std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - begin)
                         .count();
          spec.solver = SolverKind::kTwoBone;
          const testing::SweepStats minimum =
              testing::RunSweep(leg, rest, spec);
          flipped += stats.wrong_side_frames > 0;
          wrong += stats.wrong_side_frames;
          unreached += stats.unreached_reachable;
          ratio = std::max(ratio, stats.max_step_rad / minimum.max_step_rad);
          angle = std::max(angle, stats.max_pole_angle_deg);
        }
        table.AddRow({std::string(SolverName(solver)),
                      hinge ? "hinge" : "ball", pole ? "yes" : "no",
                      absl::StrCat(flipped, "/24"), absl::StrCat(wrong),
                      Fixed(ratio, 2), absl::StrCat(unreached),
                      pole ? Fixed(angle, 2) : "-",
                      Fixed(1e6 * seconds / (24.0 * 1000.0), 2)});
      }
    }
  }
  table.Print();
}

// Poles: the case (the knee starts forward, the pole is behind,
// reachable targets) on legs with a ball and a hinge knee; and a leg with
// real limits (hip cone 100 deg, twist +-40 deg, knee [0, 150] deg) whose
// targets and poles come from random poses within the limits (so the
// limits allow the pole), under AUTO and each solver.
void PoleTable(const Config& config) {
  Table table("Poles (knee in the plane of hip, target and pole)",
              {"leg", "solver", "reached", "within 1 deg (of reached)",
               "mean angle (deg)", "worst angle (deg)"});
  auto row = [&](const char* leg_name, const Skeleton& leg, SolverKind solver,
                 bool limited) {
    Rng rng(config.seed);
    Pose forward = RestPose(leg);
    if (!limited) {
      forward.local[0].rotation = AxisAngle(Eigen::Vector3d::UnitX(), -0.4);
      forward.local[1].rotation = AxisAngle(Eigen::Vector3d::UnitX(), 0.8);
    }
    int reached = 0, within = 0, count = 0;
    double sum = 0.0, worst = 0.0;
    Workspace ws;
    for (int t = 0; t < config.targets; ++t) {
      const Pose random = testing::RandomPose(leg, rng, limited ? 1.5 : 1.2);
      const auto fk = testing::IndependentFk(leg, random);
      const Eigen::Vector3d hip = fk.position[0];
      Goal goal;
      goal.chain = 0;
      goal.solver = solver;
      goal.target = fk.position[2];
      if (limited) {
        if ((fk.position[1] - hip).cross(goal.target - hip).norm() < 0.05) {
          continue;  // Nearly straight: no pole plane.
        }
        goal.pole = hip + 2.0 * (fk.position[1] - hip);
      } else {
        goal.pole = hip + Eigen::Vector3d((t % 4 - 1.5) * 0.3, -0.5, -0.6);
      }
      ++count;
      Pose pose = limited ? RestPose(leg) : forward;
      GoalResult result;
      if (!Solve(leg, absl::MakeConstSpan(&goal, 1), ws, &pose,
                 absl::MakeSpan(&result, 1))
               .ok()) {
        std::exit(1);
      }
      const auto solved = testing::IndependentFk(leg, pose);
      if ((solved.position[2] - goal.target).norm() > result.tolerance) {
        continue;
      }
      ++reached;
      const double angle = testing::KneePoleAngleDeg(hip, solved.position[1],
                                            goal.target, *goal.pole);
      within += angle <= 1.0;
      sum += angle;
      worst = std::max(worst, angle);
    }
    table.AddRow({leg_name, std::string(SolverName(solver)),
                  Percent(count ? reached / double(count) : 0.0),
                  Percent(reached ? within / double(reached) : 0.0),
                  Fixed(reached ? sum / reached : 0.0, 3), Fixed(worst, 3)});
  };
  for (bool hinge : {false, true}) {
    const Skeleton leg = MustCreate(testing::TwoBoneLegDef(hinge));
    for (SolverKind solver : kEverySolver) {
      row(hinge ? "hinge knee" : "ball knee", leg, solver, false);
    }
  }
  const Skeleton limited = MustCreate(testing::LimitedLegDef());
  for (SolverKind solver :
       {SolverKind::kAuto, SolverKind::kFabrik, SolverKind::kCcd,
        SolverKind::kJacobianTranspose, SolverKind::kJacobianPinv,
        SolverKind::kJacobianDls, SolverKind::kGradientDescent}) {
    row("limited leg", limited, solver, true);
  }
  table.Print();
}

// The straight-start symmetry band: a straight chain (the leg with a ball
// and a hinge knee, five ball joints) from its rest pose, the target at 0.8
// of its length, off the chain's line by an angle from 0 to 1e-4 rad, about
// three axes. The share of targets each solver reaches.
void SymmetryTable(const Config&) {
  const double kOffsets[] = {0.0, 1e-12, 1e-10, 1e-8, 1e-7,
                             1e-6, 1e-5, 1e-4};
  std::vector<std::string> columns = {"solver"};
  for (double offset : kOffsets) {
    columns.push_back(absl::StrFormat("%g rad", offset));
  }
  Table table("Straight starts: targets near the chain's line (share reached)",
              columns);
  std::vector<Skeleton> chains;
  chains.push_back(MustCreate(testing::TwoBoneLegDef(false)));
  chains.push_back(MustCreate(testing::TwoBoneLegDef(true)));
  chains.push_back(MustCreate(testing::StraightChainDef(5, 0.2)));
  Workspace ws;
  for (SolverKind solver : kEverySolver) {
    std::vector<std::string> cells = {std::string(SolverName(solver))};
    for (double offset : kOffsets) {
      int reached = 0, count = 0;
      for (const Skeleton& chain : chains) {
        const std::vector<int>& joints = chain.chain(0).joints;
        if (solver == SolverKind::kTwoBone && joints.size() != 3) continue;
        const auto rest = testing::IndependentFk(chain, RestPose(chain));
        const Eigen::Vector3d root = rest.position[joints.front()];
        const Eigen::Vector3d line = rest.position[joints.back()] - root;
        for (const Eigen::Vector3d& target :
             testing::NearLineTargets(root, line, offset)) {
          Goal goal;
          goal.chain = 0;
          goal.solver = solver;
          goal.target = target;
          Pose pose = RestPose(chain);
          GoalResult result;
          if (!Solve(chain, absl::MakeConstSpan(&goal, 1), ws, &pose,
                     absl::MakeSpan(&result, 1))
                   .ok()) {
            std::exit(1);
          }
          const double error =
              (testing::IndependentFk(chain, pose).position[joints.back()] -
               goal.target)
                  .norm();
          reached += error <= result.tolerance;
          ++count;
        }
      }
      cells.push_back(Percent(count ? reached / double(count) : 0.0));
    }
    table.AddRow(cells);
  }
  table.Print();
}

struct NamedTable {
  const char* name;
  void (*run)(const Config&);
};
const NamedTable kTables[] = {{"limited", LimitedChainTable},
                              {"extension", ExtensionTable},
                              {"sweep", SweepTable},
                              {"pole", PoleTable},
                              {"symmetry", SymmetryTable}};

int Main(int argc, char** argv) {
  Config config;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (!std::strcmp(argv[i], "--targets") && has_value) {
      config.targets = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--seed") && has_value) {
      config.seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--repeats") && has_value) {
      config.repeats = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--tables") && has_value) {
      config.tables = absl::StrSplit(argv[++i], ',', absl::SkipEmpty());
    } else {
      std::fprintf(stderr,
                   "usage: %s [--targets N] [--seed S] [--repeats R] "
                   "[--tables limited,extension,sweep,pole,symmetry]\n",
                   argv[0]);
      return 2;
    }
  }
  if (config.targets < 1 || config.repeats < 1) {
    std::fprintf(stderr, "--targets and --repeats must be >= 1\n");
    return 2;
  }
  for (const std::string& name : config.tables) {
    if (std::none_of(std::begin(kTables), std::end(kTables),
                     [&](const NamedTable& t) { return name == t.name; })) {
      std::fprintf(stderr, "unknown table '%s'\n", name.c_str());
      return 2;
    }
  }
  for (const NamedTable& t : kTables) {
    if (config.tables.empty() ||
        std::find(config.tables.begin(), config.tables.end(), t.name) !=
            config.tables.end()) {
      t.run(config);
    }
  }
  return 0;
}

}  // namespace
}  // namespace reach

int main(int argc, char** argv) { return reach::Main(argc, argv); }
