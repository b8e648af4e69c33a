// Fuzz target: CreateRetargetProfile and retarget frames as the service
// runs them, in process: a profile built from its stored form
// (BuildRetargetProfile: both skeletons validated, characterised, the
// target's limbs aligned, the retargeter made), then frames of source
// poses retargeted with one state (Retargeter::Apply, planting included).
//
// Input: a serialized reach.v1.StoredRetargetProfile; or, after a first
// byte 0xFF, a real pair of rigs (tests/data: the CMU walk, the Boxing rig,
// the BCN rig, RiggedFigure, the humanoid example) chosen and changed by
// the bytes: options in and out of range, role overrides (real and
// made-up roles and joints), retarget poses, bones moved, joints renamed,
// then frames of poses near the reference, some wild.
//
// Seeds (tests/fuzz/corpus/retarget_profile/rigs-*): 0xFF and a few fixed
// random bytes each, so the corpus starts from every pair of real rigs
// (`scripts/fuzz --seed` leaves them: they are not seed-* files).
//
// Checked: a refusal is INVALID_ARGUMENT or NOT_FOUND naming the spec
// ("spec..."); a built profile's every frame is answered (its pose valid
// for the source), with the target's joint count, unit rotations and
// finite numbers, and a bad source pose is refused naming it.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "importers/skeleton_file.h"
#include "reach/v1/retarget.pb.h"
#include "server/retarget_call.h"
#include "server/retarget_profiles.h"
#include "solvers/pose.h"
#include "tests/fuzz/fuzz_support.h"
#include "wire/convert.h"

namespace reach::fuzz {
namespace {

const std::vector<v1::Skeleton>& Rigs() {
  static const std::vector<v1::Skeleton>* rigs = [] {
    auto* out = new std::vector<v1::Skeleton>();
    for (const char* file :
         {"tests/data/mocap/cmu_02_01_walk.bvh",
          "tests/data/rigs/Boxing_Toes.bvh", "tests/data/rigs/BCN_Epileptic.glb",
          "tests/data/gltf/RiggedFigure.glb",
          "examples/humanoid.skeleton.json"}) {
      absl::StatusOr<v1::Skeleton> skeleton = import::LoadSkeletonFile(
          absl::StrCat(REACH_SOURCE_DIR, "/", file));
      REACH_FUZZ_CHECK(skeleton.ok(), skeleton.status().ToString());
      out->push_back(*std::move(skeleton));
    }
    return out;
  }();
  return *rigs;
}

// An index in [0, n): never out of range, wild or not (FuzzInput::Int is,
// in wild mode).
int Index(FuzzInput& in, int n) {
  return in.provider().ConsumeIntegralInRange<int>(0, n - 1);
}

constexpr const char* kRoles[] = {
    "pelvis",         "head",           "left.clavicle", "left.upper_arm",
    "left.forearm",   "left.hand",      "left.thigh",    "left.shin",
    "left.foot",      "left.toe",       "right.hand",    "right.foot",
    "right.thigh",    "spine.0",        "left.tail",     ""};

void ChangeSide(FuzzInput& in, v1::Skeleton* skeleton,
                v1::RetargetSideSpec* side) {
  const int n = skeleton->joints_size();
  // Bones moved, joints renamed (names decide roles).
  while (in.Chance(40)) {
    v1::Joint* joint = skeleton->mutable_joints(Index(in, n));
    if (in.Chance(128)) {
      in.Vec(-1.0, 1.0, joint->mutable_rest()->mutable_translation());
    } else {
      joint->set_name(in.Name(12));
    }
  }
  while (in.Chance(60)) {
    v1::RoleOverride* o = side->add_overrides();
    o->set_role(kRoles[Index(in, static_cast<int>(std::size(kRoles)))]);
    o->set_joint(in.Chance(200) ? skeleton->joints(Index(in, n)).name()
                                : in.Name(8));
  }
  if (in.Chance(50)) {
    v1::Pose* reference = side->mutable_reference();
    // A wrong count now and then (one short or one over).
    const int count = in.Break(30) ? Index(in, n + 2) : n;
    for (int j = 0; j < count; ++j) {
      v1::Quat* q = reference->add_rotations();
      if (j >= n) {
        q->set_w(1);
      } else if (in.Chance(40)) {
        in.Rotation(q);
      } else {
        *q = skeleton->joints(j).rest().rotation();
        if (!skeleton->joints(j).rest().has_rotation()) q->set_w(1);
      }
    }
  }
}

v1::StoredRetargetProfile FromRigs(FuzzInput& in) {
  if (in.Chance(25)) in.set_wild(true);
  const std::vector<v1::Skeleton>& rigs = Rigs();
  v1::StoredRetargetProfile stored;
  const int rig_count = static_cast<int>(rigs.size());
  *stored.mutable_source_skeleton() = rigs[Index(in, rig_count)];
  *stored.mutable_target_skeleton() = rigs[Index(in, rig_count)];
  v1::RetargetProfileSpec& spec = *stored.mutable_spec();
  spec.mutable_source()->set_skeleton_id("source");
  spec.mutable_target()->set_skeleton_id("target");
  ChangeSide(in, stored.mutable_source_skeleton(), spec.mutable_source());
  ChangeSide(in, stored.mutable_target_skeleton(), spec.mutable_target());
  spec.set_keep_target_pose(in.Chance(60));
  spec.set_no_left_arm_ik(in.Chance(30));
  spec.set_no_right_leg_ik(in.Chance(30));
  spec.set_no_planting(in.Chance(30));
  if (in.Chance(60)) spec.set_pelvis_scale(in.Number(0.0, 2.0));
  if (in.Chance(60)) spec.set_source_floor(in.Number(-100.0, 100.0));
  if (in.Chance(60)) spec.set_contact_height(in.Number(0.0, 1.0));
  if (in.Chance(60)) spec.set_contact_speed(in.Number(0.0, 5.0));
  if (in.Chance(60)) spec.set_ankle_height(in.Number(0.0, 0.3));
  if (in.Chance(60)) spec.set_release_seconds(in.Number(0.0, 1.0));
  spec.set_max_iterations(in.Int(0, 16));
  if (in.Break(40)) spec.set_max_iterations(in.Int(-5, 5000));
  if (in.Break(40)) spec.set_contact_speed(in.Number(-1e9, 1e9));
  return stored;
}

void CheckFrames(FuzzInput& in, const BuiltRetargetProfile& profile) {
  const Skeleton& source = profile.source_skeleton;
  const int n = source.num_joints();
  retarget::RetargetState state;
  RetargetFrameScratch scratch;
  v1::RetargetResponse out;
  const int frames = 1 + Index(in, 8);
  for (int f = 0; f < frames; ++f) {
    v1::Pose pose;
    bool valid = true;
    for (int j = 0; j < n; ++j) {
      v1::Quat* q = pose.add_rotations();
      if (in.Chance(80)) {
        in.Rotation(q);
        if (!(std::abs(std::sqrt(q->w() * q->w() + q->x() * q->x() +
                                 q->y() * q->y() + q->z() * q->z()) -
                       1.0) < 1e-6)) {
          valid = false;
        }
      } else {
        ToProto(source.joint(j).rest.rotation, q);
      }
    }
    if (in.Chance(128)) in.Vec(-50.0, 50.0, pose.mutable_root_translation());
    if (in.wild() && !AllModerate(pose)) valid = false;
    const double dt = in.Chance(30) ? in.Number(1e-4, 1.0) : 1.0 / 120;
    const absl::Status status =
        RetargetFrame(profile, pose, "source", dt, in.Chance(60), state,
                      scratch, Deadline{}, nullptr, &out);
    if (!valid) {
      REACH_FUZZ_CHECK(status.ok() || absl::StartsWith(status.message(),
                                                       "source."),
                       status.ToString());
      continue;
    }
    REACH_FUZZ_CHECK(status.ok(), status.ToString());
    REACH_FUZZ_CHECK(out.target().rotations_size() ==
                         profile.target_skeleton.num_joints(),
                     absl::StrCat(out.target().rotations_size()));
    for (const v1::Quat& q : out.target().rotations()) {
      const double norm = std::sqrt(q.w() * q.w() + q.x() * q.x() +
                                    q.y() * q.y() + q.z() * q.z());
      REACH_FUZZ_CHECK(std::abs(norm - 1.0) < 1e-6,
                       absl::StrCat("rotation norm ", norm));
    }
    const v1::Vec3& t = out.target().root_translation();
    REACH_FUZZ_CHECK(std::isfinite(t.x()) && std::isfinite(t.y()) &&
                         std::isfinite(t.z()),
                     "root translation not finite");
  }
}

}  // namespace
}  // namespace reach::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reach;
  using namespace reach::fuzz;
  QuietProtobufLogs();
  v1::StoredRetargetProfile stored;
  FuzzInput in(data, size);
  if (size > 0 && data[0] == 0xFF) {
    in.provider().ConsumeIntegral<uint8_t>();
    stored = FromRigs(in);
  } else if (!stored.ParseFromArray(data, static_cast<int>(size))) {
    return 0;
  }
  SkeletonLimits limits;
  limits.max_joints = 256;
  absl::StatusOr<std::shared_ptr<BuiltRetargetProfile>> built =
      BuildRetargetProfile(stored, limits);
  if (!built.ok()) {
    const absl::StatusCode code = built.status().code();
    REACH_FUZZ_CHECK(code == absl::StatusCode::kInvalidArgument ||
                         code == absl::StatusCode::kNotFound,
                     built.status().ToString());
    REACH_FUZZ_CHECK(absl::StartsWith(built.status().message(), "spec"),
                     built.status().ToString());
    if (Verbose()) std::fprintf(stderr, "%s\n", built.status().ToString().c_str());
    return 0;
  }
  CheckFrames(in, **built);
  return 0;
}
