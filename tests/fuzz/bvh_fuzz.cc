// Fuzz target: the BVH importer (ParseBvh) on arbitrary text, then what the
// tools do with a clip: a pose per frame, and solved poses written back out
// as BVH (WriteBvh).
//
// Checked: a parse that succeeds gives a definition Skeleton::Create
// accepts (the importers' contract), channels that fit the frames
// (num_frames * num_channels values, each joint's channel indices within a
// frame), and finite unit rotations in every pose (up to 8 frames are
// posed); those poses written as BVH parse back, with the same frame count
// and frame time to the written precision.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "importers/bvh.h"
#include "tests/fuzz/fuzz_support.h"

namespace reach::fuzz {
namespace {

constexpr int kMaxPosedFrames = 8;

void CheckChannels(const import::BvhClip& clip) {
  const int frames = clip.num_frames;
  const int channels = clip.num_channels;
  REACH_FUZZ_CHECK(frames >= 0 && channels >= 0, "counts");
  REACH_FUZZ_CHECK(clip.values.size() ==
                       static_cast<size_t>(frames) * channels,
                   absl::StrCat(clip.values.size(), " values for ", frames,
                                " frames of ", channels, " channels"));
  REACH_FUZZ_CHECK(clip.joints.size() == clip.skeleton.def.joints.size(),
                   "one channel set per joint");
  for (size_t j = 0; j < clip.joints.size(); ++j) {
    const import::BvhJointChannels& c = clip.joints[j];
    const auto inside = [&](int index) {
      return index >= c.first && index < c.first + c.count &&
             index < channels;
    };
    REACH_FUZZ_CHECK(c.num_rotations >= 0 && c.num_rotations <= 3,
                     absl::StrCat("joint ", j, " rotations"));
    for (int r = 0; r < c.num_rotations; ++r) {
      REACH_FUZZ_CHECK(inside(c.rotation[r]) && c.axis[r] >= 0 &&
                           c.axis[r] <= 2,
                       absl::StrCat("joint ", j, " rotation channel ", r));
    }
    for (int p : c.position) {
      REACH_FUZZ_CHECK(p == -1 || inside(p),
                       absl::StrCat("joint ", j, " position channel"));
    }
  }
}

void ImportAndWriteBack(absl::string_view text) {
  const absl::StatusOr<import::BvhClip> clip = import::ParseBvh(text, "fuzz.bvh");
  if (!clip.ok()) {
    REACH_FUZZ_CHECK(clip.status().code() == absl::StatusCode::kInvalidArgument,
                     clip.status().ToString());
    return;
  }
  const absl::StatusOr<Skeleton> skeleton = Skeleton::Create(clip->skeleton.def);
  REACH_FUZZ_CHECK(skeleton.ok(), skeleton.status().ToString());
  CheckChannels(*clip);

  // The first frames and the last.
  std::vector<Pose> poses;
  for (int f = 0; f < clip->num_frames; ++f) {
    if (f >= kMaxPosedFrames - 1 && f != clip->num_frames - 1) continue;
    Pose& pose = poses.emplace_back();
    clip->FramePose(f, &pose);
    REACH_FUZZ_CHECK(static_cast<int>(pose.local.size()) ==
                         skeleton->num_joints(),
                     "pose size");
    for (size_t j = 0; j < pose.local.size(); ++j) {
      const Transform& t = pose.local[j];
      REACH_FUZZ_CHECK(t.rotation.coeffs().allFinite() &&
                           std::abs(t.rotation.norm() - 1.0) < 1e-9 &&
                           t.translation.allFinite(),
                       absl::StrCat("frame ", f, " joint ", j));
    }
  }

  const absl::StatusOr<std::string> written =
      import::WriteBvh(*skeleton, poses, clip->frame_time);
  REACH_FUZZ_CHECK(written.ok(), written.status().ToString());
  const absl::StatusOr<import::BvhClip> again =
      import::ParseBvh(*written, "written.bvh");
  REACH_FUZZ_CHECK(again.ok(), absl::StrCat(again.status().ToString(), "\n",
                                            *written));
  REACH_FUZZ_CHECK(again->num_frames == static_cast<int>(poses.size()),
                   "frames written");
  REACH_FUZZ_CHECK(
      std::abs(again->frame_time - clip->frame_time) <=
          1e-6 * clip->frame_time + 1e-7,
      absl::StrCat("frame time ", clip->frame_time, " written as ",
                   again->frame_time));
}

}  // namespace
}  // namespace reach::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  reach::fuzz::ImportAndWriteBack(
      absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
