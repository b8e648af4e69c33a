// Warm-started target sweeps through full extension, measured by a forward
// kinematics of their own: what a live stream does to a chain solver.
// Shared by tests (tests/solvers/stream_quality_test.cc) and
// bench/quality_bench.cc.
#ifndef REACH_TESTS_TESTING_SWEEP_H_
#define REACH_TESTS_TESTING_SWEEP_H_

#include <optional>
#include <vector>

#include "solvers/goal.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"

namespace reach::testing {

// Model-space positions and rotations of every joint, composed here from
// the rest translations, scales and local rotations with Eigen's own
// quaternion product (not the library's Transform or ComputeGlobals).
struct IndependentGlobals {
  std::vector<Eigen::Vector3d> position;
  std::vector<Eigen::Quaterniond> rotation;
};
IndependentGlobals IndependentFk(const Skeleton& skeleton, const Pose& pose);

// `count` unit directions spread evenly over the sphere (a Fibonacci
// lattice; deterministic).
std::vector<Eigen::Vector3d> SphereDirections(int count);

// One sweep: the chain's tip target moves from the root along `direction`,
// its distance from `near` x to `far` x the chain's length and back (a
// raised cosine over `frames` frames), each frame solved from the previous
// frame's answer (the first from `start`). With `pole_offset`, every frame
// has the pole root + pole_offset.
struct SweepSpec {
  int chain = 0;
  SolverKind solver = SolverKind::kAuto;
  Eigen::Vector3d direction = Eigen::Vector3d::UnitZ();
  std::optional<Eigen::Vector3d> pole_offset;
  int frames = 1000;
  double near = 0.5;
  double far = 1.2;
  SolveOptions options;
};

struct SweepStats {
  int frames = 0;
  int solve_errors = 0;  // Solve returned a status other than OK.
  // Frames whose bend (the inner joints' offset across the root-target
  // line, summed) faces away from the reference: the pole's direction
  // across the line, or without a pole the first frame's bend. Frames
  // whose chain is straight (bend under 1e-6 of its length) are not
  // counted either way.
  int wrong_side_frames = 0;
  // Largest angle between a bent frame's bend and the pole's direction
  // across the line, degrees, over frames bent by more than 1e-4 of the
  // length (0 without a pole).
  double max_pole_angle_deg = 0.0;
  // Largest change of any chain joint's local rotation between consecutive
  // frames, radians.
  double max_step_rad = 0.0;
  // Frames whose target is within the chain's length (reachable) and whose
  // tip misses it by more than the goal's tolerance.
  int unreached_reachable = 0;
  // Largest position error on reachable frames, in units of the tolerance.
  double worst_reachable_error = 0.0;
  // A rotation that is not finite or not unit (to 1e-9).
  int bad_rotations = 0;
};

SweepStats RunSweep(const Skeleton& skeleton, const Pose& start,
                    const SweepSpec& spec);

// The angle (degrees) between the knee's offset and the pole's across the
// hip-target line: 0 when the knee lies in the pole's plane on its side.
double KneePoleAngleDeg(const Eigen::Vector3d& hip, const Eigen::Vector3d& knee,
                        const Eigen::Vector3d& target,
                        const Eigen::Vector3d& pole);

// The symmetry band's targets for a straight chain from `root` along
// `line` (root to tip): 0.8 of the line, turned off it by `offset_rad`
// about three axes across it.
std::vector<Eigen::Vector3d> NearLineTargets(const Eigen::Vector3d& root,
                                             const Eigen::Vector3d& line,
                                             double offset_rad);

}  // namespace reach::testing

#endif  // REACH_TESTS_TESTING_SWEEP_H_
