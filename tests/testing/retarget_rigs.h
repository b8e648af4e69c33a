// Rigs the retargeting tests read from tests/data and examples/: a BVH
// (with its clip), a glTF or a skeleton JSON, characterised from its
// retarget pose (the rest pose; the Character Creator clip's first frame,
// since its zero rotations lay the legs up).
#ifndef REACH_TESTS_TESTING_RETARGET_RIGS_H_
#define REACH_TESTS_TESTING_RETARGET_RIGS_H_

#include <string>
#include <vector>

#include "Eigen/Geometry"
#include "absl/status/statusor.h"
#include "importers/bvh.h"
#include "retarget/characterize.h"
#include "retarget/retargeter.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"
#include "tests/testing/sweep.h"

namespace reach::testing {

struct RetargetRig {
  Skeleton skeleton;
  retarget::Characterization roles;
  Pose reference;
  import::BvhClip clip;  // BVH files only.
};

// tests/data/`path`.
std::string TestData(const std::string& path);

// `file`: a path under tests/data (.bvh, .glb/.gltf) or an examples/
// skeleton JSON's name (.json). Failures are test failures.
RetargetRig LoadRetargetRig(const std::string& file);

// A chain's model-space turn from its retarget pose (`ref`) to `now` at
// `place` along it (`at`: each joint's share of the chain's length, in
// [0, 1]): between the two joints that bracket it.
Eigen::Quaterniond TurnAt(const std::vector<int>& chain,
                          const std::vector<double>& at, double place,
                          const IndependentGlobals& now,
                          const IndependentGlobals& ref);

// A retargeter from `source` onto `target` with the target's limbs aligned
// to the source's first (AlignLimbs), as `reach retarget` makes one.
absl::StatusOr<retarget::Retargeter> MakeRetargeter(
    const RetargetRig& source, const RetargetRig& target,
    const retarget::RetargetOptions& options = {});

// The mean size of the third difference of `joints`' positions over
// `frames`, over `legs` (a leg length): jitter.
double Jitter(const std::vector<IndependentGlobals>& frames,
              const std::vector<int>& joints, double legs);

// Each joint's largest per-frame turn (model space, radians) over
// `frames`; with `at`, the index in `frames` of the frame that ends it.
std::vector<double> LargestSteps(const std::vector<IndependentGlobals>& frames,
                                 std::vector<int>* at = nullptr);

// The largest per-frame step (`source_steps`, by source joint) that target
// joint `joint` may take: its source joint's, or the larger of the two
// source joints it lies between; -1 for a joint no source joint drives.
double AllowedStep(const retarget::Transfer& transfer, int joint,
                   const std::vector<double>& source_steps);

// The largest per-frame step of a target role beyond its source's: each
// role's joint's largest step (`target_steps`) less its source joint's,
// or the larger of the two source joints it lies between
// (`source_steps`), in degrees; the role and joint where it is largest.
// With `table`, every role's "role target/source" steps in degrees.
struct StepExcess {
  double degrees = -1e300;
  std::string role;
  int joint = -1;
};
StepExcess StepBeyondSource(const retarget::Transfer& transfer,
                            const retarget::Characterization& target_roles,
                            const std::vector<double>& target_steps,
                            const std::vector<double>& source_steps,
                            std::string* table = nullptr);

}  // namespace reach::testing

#endif  // REACH_TESTS_TESTING_RETARGET_RIGS_H_
