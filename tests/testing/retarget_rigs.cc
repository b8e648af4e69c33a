#include "tests/testing/retarget_rigs.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "importers/gltf.h"
#include "tests/testing/full_body.h"

namespace reach::testing {

std::string TestData(const std::string& path) {
  return absl::StrCat(REACH_TEST_DATA, "/", path);
}

RetargetRig LoadRetargetRig(const std::string& file) {
  SkeletonDef def;
  import::BvhClip clip;
  if (file.find(".bvh") != std::string::npos) {
    absl::StatusOr<import::BvhClip> read = import::ImportBvh(TestData(file));
    EXPECT_TRUE(read.ok()) << read.status();
    clip = *std::move(read);
    def = clip.skeleton.def;
  } else if (file.find(".json") != std::string::npos) {
    absl::StatusOr<SkeletonDef> read = LoadSkeletonJson(ExamplePath(file));
    EXPECT_TRUE(read.ok()) << read.status();
    def = *std::move(read);
  } else {
    absl::StatusOr<import::ImportedSkeleton> read =
        import::ImportGltf(TestData(file));
    EXPECT_TRUE(read.ok()) << read.status();
    def = read->def;
  }
  absl::StatusOr<Skeleton> skeleton = Skeleton::Create(def);
  EXPECT_TRUE(skeleton.ok()) << skeleton.status();
  Pose reference = RestPose(*skeleton);
  if (file.find("ccrig") != std::string::npos) clip.FramePose(0, &reference);
  absl::StatusOr<retarget::Characterization> roles =
      retarget::Characterize(*skeleton, {}, &reference);
  EXPECT_TRUE(roles.ok()) << roles.status();
  return RetargetRig{*std::move(skeleton), *std::move(roles),
                     std::move(reference), std::move(clip)};
}

Eigen::Quaterniond TurnAt(const std::vector<int>& chain,
                          const std::vector<double>& at, double place,
                          const IndependentGlobals& now,
                          const IndependentGlobals& ref) {
  auto turn = [&](size_t i) {
    return Eigen::Quaterniond(now.rotation[chain[i]] *
                              ref.rotation[chain[i]].conjugate());
  };
  size_t k = 0;
  while (k + 1 < chain.size() && at[k + 1] < place) ++k;
  if (k + 1 == chain.size() || at[k + 1] <= at[k]) return turn(k);
  const double w = std::clamp((place - at[k]) / (at[k + 1] - at[k]), 0.0, 1.0);
  return turn(k).slerp(w, turn(k + 1));
}

absl::StatusOr<retarget::Retargeter> MakeRetargeter(
    const RetargetRig& source, const RetargetRig& target,
    const retarget::RetargetOptions& options) {
  const retarget::RetargetSide from{&source.skeleton, &source.roles,
                                    source.reference};
  const absl::StatusOr<Pose> aligned = retarget::AlignLimbs(
      from, {&target.skeleton, &target.roles, target.reference});
  if (!aligned.ok()) return aligned.status();
  return retarget::Retargeter::Create(
      from, {&target.skeleton, &target.roles, *aligned}, options);
}

double Jitter(const std::vector<IndependentGlobals>& frames,
              const std::vector<int>& joints, double legs) {
  double sum = 0.0;
  int count = 0;
  for (size_t i = 3; i < frames.size(); ++i) {
    for (int j : joints) {
      sum += (frames[i].position[j] - 3.0 * frames[i - 1].position[j] +
              3.0 * frames[i - 2].position[j] - frames[i - 3].position[j])
                 .norm() /
             legs;
      ++count;
    }
  }
  return count > 0 ? sum / count : 0.0;
}

std::vector<double> LargestSteps(const std::vector<IndependentGlobals>& frames,
                                 std::vector<int>* at) {
  const size_t n = frames.empty() ? 0 : frames[0].rotation.size();
  std::vector<double> step(n, 0.0);
  if (at != nullptr) at->assign(n, 0);
  for (size_t f = 1; f < frames.size(); ++f) {
    for (size_t j = 0; j < n; ++j) {
      const double s =
          frames[f].rotation[j].angularDistance(frames[f - 1].rotation[j]);
      if (s > step[j]) {
        step[j] = s;
        if (at != nullptr) (*at)[j] = static_cast<int>(f);
      }
    }
  }
  return step;
}

double AllowedStep(const retarget::Transfer& transfer, int joint,
                   const std::vector<double>& source_steps) {
  const int s = transfer.source_of()[joint];
  if (s < 0) return -1.0;
  const int next = transfer.source_next_of(joint);
  return next >= 0 ? std::max(source_steps[s], source_steps[next])
                   : source_steps[s];
}

StepExcess StepBeyondSource(const retarget::Transfer& transfer,
                            const retarget::Characterization& target_roles,
                            const std::vector<double>& target_steps,
                            const std::vector<double>& source_steps,
                            std::string* table) {
  constexpr double kDegree = M_PI / 180.0;
  StepExcess out;
  for (const retarget::RoleAssignment& r : target_roles.roles) {
    const double allowed = AllowedStep(transfer, r.joint, source_steps);
    if (allowed < 0.0) continue;
    const double e = (target_steps[r.joint] - allowed) / kDegree;
    if (table != nullptr) {
      absl::StrAppend(table, " ", r.role, " ", target_steps[r.joint] / kDegree,
                      "/", allowed / kDegree);
    }
    if (e > out.degrees) {
      out.degrees = e;
      out.role = r.role;
      out.joint = r.joint;
    }
  }
  return out;
}

}  // namespace reach::testing
