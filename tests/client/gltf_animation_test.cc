// Writing poses into a copy of a .glb (importers/gltf_animation.h), read
// back by the project's own importer: each key baked into its nodes
// (tests/testing/gltf_bake.h) and the file imported again gives the pose
// written, joint by joint, by forward kinematics written in the tests. On
// BCN_Epileptic.glb (assimp's, a -90 degree root), Khronos' RiggedFigure (a
// root under a matrix node and an empty node) and the hand-written arm (a
// 0.01-scaled, turned armature: root translations in the file's units; a
// joint under a node that is no joint; a joint written as a matrix).
#include "importers/gltf_animation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "importers/gltf.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"
#include "tests/testing/gltf_bake.h"
#include "tests/testing/sweep.h"
#include "tiny_gltf.h"

namespace reach::import {
namespace {

using ::testing::HasSubstr;

std::string DataPath(absl::string_view name) {
  return absl::StrCat(REACH_TEST_DATA, "/", name);
}

std::string Read(const std::string& path) {
  std::string contents;
  EXPECT_TRUE(ReadFile(path, &contents).ok()) << path;
  return contents;
}

// A .glb of a .gltf whose buffers are embedded: its JSON chunk alone.
std::string GlbOfJson(std::string json) {
  while (json.size() % 4 != 0) json += ' ';
  std::string out = "glTF";
  const auto word = [&out](uint32_t w) {
    out.append(reinterpret_cast<const char*>(&w), 4);
  };
  word(2);
  word(static_cast<uint32_t>(20 + json.size()));
  word(static_cast<uint32_t>(json.size()));
  word(0x4E4F534A);
  return out + json;
}

// `frames` poses that turn every joint and move the roots, differently per
// frame and joint.
std::vector<Pose> Wave(const Skeleton& skeleton, int frames, double height) {
  std::vector<Pose> poses;
  for (int f = 0; f < frames; ++f) {
    Pose pose = RestPose(skeleton);
    for (int j = 0; j < skeleton.num_joints(); ++j) {
      const Eigen::Vector3d axis =
          Eigen::Vector3d(std::sin(j + 1.0), std::cos(2.0 * j), 0.5)
              .normalized();
      pose.local[j].rotation =
          pose.local[j].rotation * Eigen::Quaterniond(Eigen::AngleAxisd(
                                       0.3 * std::sin(0.7 * f + j), axis));
      if (skeleton.joint(j).parent < 0) {
        pose.local[j].translation +=
            height * Eigen::Vector3d(0.1 * f, 0.02 * std::sin(f), -0.05 * f);
      }
    }
    poses.push_back(pose);
  }
  return poses;
}

double Height(const Skeleton& skeleton) {
  const testing::IndependentGlobals g =
      testing::IndependentFk(skeleton, RestPose(skeleton));
  Eigen::Vector3d lo = g.position[0], hi = g.position[0];
  for (const Eigen::Vector3d& p : g.position) {
    lo = lo.cwiseMin(p);
    hi = hi.cwiseMax(p);
  }
  return (hi - lo).maxCoeff();
}

// Writes Wave onto skin 0 of `glb` (named `file`) and reads every key back:
// the baked file's skeleton is the pose, joint by joint; returns the
// written file.
std::string RoundTrip(const std::string& glb, const std::string& file) {
  absl::StatusOr<ImportedSkeleton> imported = ParseGltf(glb, file);
  EXPECT_TRUE(imported.ok()) << imported.status();
  if (!imported.ok()) return "";
  absl::StatusOr<Skeleton> skeleton = Skeleton::Create(imported->def);
  EXPECT_TRUE(skeleton.ok()) << skeleton.status();
  const double height = Height(*skeleton);
  constexpr int kFrames = 6;
  const std::vector<Pose> poses = Wave(*skeleton, kFrames, height);
  GltfAnimationOptions options;
  options.name = "wave";
  absl::StatusOr<std::string> written =
      WriteGltfAnimation(glb, file, *skeleton, poses, 1.0 / 30, options);
  EXPECT_TRUE(written.ok()) << written.status();
  if (!written.ok()) return "";
  std::string name;
  absl::StatusOr<int> keys = testing::GlbAnimationKeys(*written, -1, &name);
  EXPECT_TRUE(keys.ok()) << keys.status();
  EXPECT_EQ(*keys, kFrames);
  EXPECT_EQ(name, "wave");

  double worst_angle = 0, worst_translation = 0, worst_position = 0;
  for (int f = 0; f < kFrames; ++f) {
    absl::StatusOr<std::string> baked =
        testing::BakeGlbAnimationKey(*written, -1, f);
    EXPECT_TRUE(baked.ok()) << baked.status();
    if (!baked.ok()) return "";
    absl::StatusOr<ImportedSkeleton> back = ParseGltf(*baked, file);
    EXPECT_TRUE(back.ok()) << back.status();
    if (!back.ok()) return "";
    absl::StatusOr<Skeleton> read = Skeleton::Create(back->def);
    EXPECT_TRUE(read.ok());
    EXPECT_EQ(read->num_joints(), skeleton->num_joints());
    const testing::IndependentGlobals want =
        testing::IndependentFk(*skeleton, poses[f]);
    const testing::IndependentGlobals got =
        testing::IndependentFk(*read, RestPose(*read));
    for (int j = 0; j < skeleton->num_joints(); ++j) {
      const int k = read->FindJoint(skeleton->joint(j).name);
      EXPECT_GE(k, 0) << skeleton->joint(j).name;
      if (k < 0) continue;
      worst_angle =
          std::max(worst_angle, AngleBetween(read->joint(k).rest.rotation,
                                             poses[f].local[j].rotation));
      worst_translation = std::max(
          worst_translation,
          (read->joint(k).rest.translation - poses[f].local[j].translation)
                  .norm() /
              height);
      worst_position = std::max(
          worst_position, (got.position[k] - want.position[j]).norm() / height);
    }
  }
  EXPECT_LT(worst_angle, 1e-6) << file;
  EXPECT_LT(worst_translation, 1e-6) << file;
  EXPECT_LT(worst_position, 1e-6) << file;
  std::printf(
      "%s: %d joints, worst over %d keys: rotation %.3g rad, "
      "translation %.3g, position %.3g of the height\n",
      file.c_str(), skeleton->num_joints(), kFrames, worst_angle,
      worst_translation, worst_position);

  // tinygltf reads the copy without complaint, with all it had.
  tinygltf::TinyGLTF loader;
  tinygltf::Model before, after;
  std::string err_before, err, warn;
  EXPECT_TRUE(loader.LoadBinaryFromMemory(
      &before, &err_before, &warn,
      reinterpret_cast<const unsigned char*>(glb.data()),
      static_cast<unsigned int>(glb.size())))
      << err_before;
  EXPECT_TRUE(loader.LoadBinaryFromMemory(
      &after, &err, &warn,
      reinterpret_cast<const unsigned char*>(written->data()),
      static_cast<unsigned int>(written->size())))
      << err;
  EXPECT_EQ(err, err_before);  // The arm has no inverse bind matrices.
  EXPECT_EQ(after.nodes.size(), before.nodes.size());
  EXPECT_EQ(after.meshes.size(), before.meshes.size());
  EXPECT_EQ(after.skins.size(), before.skins.size());
  EXPECT_EQ(after.materials.size(), before.materials.size());
  EXPECT_EQ(after.animations.size(), before.animations.size() + 1);
  EXPECT_EQ(after.accessors.size() - before.accessors.size(),
            after.animations.back().samplers.size() + 1);
  for (size_t b = 0; b < before.buffers.size(); ++b) {
    EXPECT_GE(after.buffers[b].data.size(), before.buffers[b].data.size());
    if (after.buffers[b].data.size() < before.buffers[b].data.size()) continue;
    EXPECT_TRUE(std::equal(before.buffers[b].data.begin(),
                           before.buffers[b].data.end(),
                           after.buffers[b].data.begin()))
        << "buffer " << b;
  }
  for (const tinygltf::AnimationSampler& s : after.animations.back().samplers) {
    EXPECT_EQ(s.interpolation, "LINEAR");
  }
  // Every joint turns: a rotation channel each, and a translation channel
  // for each root.
  int roots = 0;
  for (int j = 0; j < skeleton->num_joints(); ++j) {
    roots += skeleton->joint(j).parent < 0;
  }
  int rotations = 0, translations = 0;
  for (const tinygltf::AnimationChannel& c : after.animations.back().channels) {
    rotations += c.target_path == "rotation";
    translations += c.target_path == "translation";
  }
  EXPECT_EQ(rotations, skeleton->num_joints());
  EXPECT_EQ(translations, roots);
  return *written;
}

TEST(GltfAnimationTest, BcnEpilepticReadsBackAsWritten) {
  const std::string file = DataPath("rigs/BCN_Epileptic.glb");
  RoundTrip(Read(file), file);
}

TEST(GltfAnimationTest, RiggedFigureReadsBackAsWritten) {
  const std::string file = DataPath("gltf/RiggedFigure.glb");
  RoundTrip(Read(file), file);
}

// The arm: a root under a turned armature scaled by 0.01, a joint under a
// node that is not one, a joint written as a matrix (scale 2), and no
// buffers at all (the keys make the BIN chunk).
TEST(GltfAnimationTest, ArmUndoesFoldedNodesScalesAndMatrices) {
  const std::string glb = GlbOfJson(Read(DataPath("gltf/arm.gltf")));
  const std::string written = RoundTrip(glb, "arm.glb");
  ASSERT_FALSE(written.empty());
  // The matrix became translation, rotation and scale.
  EXPECT_THAT(written, ::testing::Not(HasSubstr("\"matrix\"")));
  // The hips' translation keys are in the file's units (centimetres under
  // the 0.01 armature): the rest's [0, 100, 0] plus the wave's.
  tinygltf::TinyGLTF loader;
  tinygltf::Model model;
  std::string err, warn;
  ASSERT_TRUE(loader.LoadBinaryFromMemory(
      &model, &err, &warn,
      reinterpret_cast<const unsigned char*>(written.data()),
      static_cast<unsigned int>(written.size())))
      << err;
  const tinygltf::Animation& a = model.animations.back();
  bool hips = false;
  for (const tinygltf::AnimationChannel& c : a.channels) {
    if (c.target_path != "translation") continue;
    EXPECT_EQ(model.nodes[c.target_node].name, "Hips");
    const tinygltf::Accessor& out =
        model.accessors[a.samplers[c.sampler].output];
    const tinygltf::BufferView& view = model.bufferViews[out.bufferView];
    const float* v =
        reinterpret_cast<const float*>(model.buffers[view.buffer].data.data() +
                                       view.byteOffset + out.byteOffset);
    EXPECT_NEAR(v[0], 0, 1e-4);
    EXPECT_NEAR(v[1], 100, 1e-4);
    EXPECT_NEAR(v[2], 0, 1e-4);
    hips = true;
  }
  EXPECT_TRUE(hips);
}

// A file whose buffers are data: URIs keeps them; the keys go in one more.
TEST(GltfAnimationTest, KeysOfAFileWithUriBuffersGoInANewBuffer) {
  std::string json = Read(DataPath("gltf/arm.gltf"));
  const size_t brace = json.rfind('}');
  json.insert(brace,
              ",\"buffers\":[{\"byteLength\":4,\"uri\":"
              "\"data:application/octet-stream;base64,AQIDBA==\"}]");
  const std::string glb = GlbOfJson(json);
  absl::StatusOr<ImportedSkeleton> imported = ParseGltf(glb, "arm.glb");
  ASSERT_TRUE(imported.ok()) << imported.status();
  absl::StatusOr<Skeleton> skeleton = Skeleton::Create(imported->def);
  ASSERT_TRUE(skeleton.ok());
  absl::StatusOr<std::string> written = WriteGltfAnimation(
      glb, "arm.glb", *skeleton, Wave(*skeleton, 3, 1.0), 0.5);
  ASSERT_TRUE(written.ok()) << written.status();
  tinygltf::TinyGLTF loader;
  tinygltf::Model model;
  std::string err, warn;
  ASSERT_TRUE(loader.LoadBinaryFromMemory(
      &model, &err, &warn,
      reinterpret_cast<const unsigned char*>(written->data()),
      static_cast<unsigned int>(written->size())))
      << err;
  ASSERT_EQ(model.buffers.size(), 2u);
  EXPECT_EQ(model.buffers[0].data, std::vector<unsigned char>({1, 2, 3, 4}));
  const tinygltf::Accessor& times =
      model.accessors[model.animations.back().samplers[0].input];
  EXPECT_EQ(model.bufferViews[times.bufferView].buffer, 1);
  EXPECT_EQ(times.count, 3u);
  EXPECT_EQ(times.maxValues, std::vector<double>({1.0}));
}

TEST(GltfAnimationTest, ErrorsNameTheFileAndWhat) {
  const std::string file = DataPath("gltf/RiggedFigure.glb");
  const std::string glb = Read(file);
  absl::StatusOr<ImportedSkeleton> imported = ParseGltf(glb, file);
  ASSERT_TRUE(imported.ok());
  absl::StatusOr<Skeleton> skeleton = Skeleton::Create(imported->def);
  ASSERT_TRUE(skeleton.ok());
  const std::vector<Pose> poses = {RestPose(*skeleton)};

  absl::StatusOr<std::string> gltf =
      WriteGltfAnimation(glb, "figure.gltf", *skeleton, poses, 0.1);
  EXPECT_THAT(gltf.status().message(), HasSubstr("figure.gltf"));
  EXPECT_THAT(gltf.status().message(), HasSubstr(".glb"));

  absl::StatusOr<std::string> no_time =
      WriteGltfAnimation(glb, file, *skeleton, poses, 0);
  EXPECT_THAT(no_time.status().message(), HasSubstr("frame time"));

  absl::StatusOr<std::string> none =
      WriteGltfAnimation(glb, file, *skeleton, {}, 0.1);
  EXPECT_THAT(none.status().message(), HasSubstr("no frames"));

  // A skeleton of another file.
  absl::StatusOr<ImportedSkeleton> bcn =
      ImportGltf(DataPath("rigs/BCN_Epileptic.glb"));
  ASSERT_TRUE(bcn.ok());
  absl::StatusOr<Skeleton> other = Skeleton::Create(bcn->def);
  ASSERT_TRUE(other.ok());
  absl::StatusOr<std::string> wrong = WriteGltfAnimation(
      glb, file, *other, std::vector<Pose>{RestPose(*other)}, 0.1);
  EXPECT_THAT(wrong.status().message(), HasSubstr("has no joint '"));

  absl::StatusOr<std::string> short_pose =
      WriteGltfAnimation(glb, file, *skeleton, std::vector<Pose>{Pose{}}, 0.1);
  EXPECT_THAT(short_pose.status().message(), HasSubstr("poses[0] has 0"));
}

}  // namespace
}  // namespace reach::import
