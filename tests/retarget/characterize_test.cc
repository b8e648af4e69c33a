// Characterisation of the rigs users have, on real files: every role's
// joint is written out here by hand from each file's hierarchy (README of
// tests/data/rigs, the clips' own headers), not computed.
#include "retarget/characterize.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <tuple>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "importers/bvh.h"
#include "importers/gltf.h"
#include "tests/testing/full_body.h"
#include "tests/testing/models.h"
#include "tests/testing/sweep.h"

namespace reach::retarget {
namespace {

using ::testing::HasSubstr;

std::string Data(const std::string& path) {
  return absl::StrCat(REACH_TEST_DATA, "/", path);
}

Skeleton FromBvh(const std::string& path) {
  absl::StatusOr<import::BvhClip> clip = import::ImportBvh(Data(path));
  EXPECT_TRUE(clip.ok()) << clip.status();
  absl::StatusOr<Skeleton> s = Skeleton::Create(clip->skeleton.def);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

Skeleton FromGltf(const std::string& path) {
  absl::StatusOr<import::ImportedSkeleton> imported = import::ImportGltf(path);
  EXPECT_TRUE(imported.ok()) << imported.status();
  absl::StatusOr<Skeleton> s = Skeleton::Create(imported->def);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

Skeleton FromJson(const std::string& path) {
  absl::StatusOr<SkeletonDef> def = testing::LoadSkeletonJson(path);
  EXPECT_TRUE(def.ok()) << def.status();
  absl::StatusOr<Skeleton> s = Skeleton::Create(*def);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

// role -> joint name, as the characterisation found them: the body's
// roles (fingers apart: FingerRoles).
bool IsFingerRole(const std::string& role) {
  return std::count(role.begin(), role.end(), '.') == 2;  // SIDE.FINGER.I
}

// role -> joint name of the roles that are (`fingers`) or are not finger
// roles, as the characterisation found them.
std::map<std::string, std::string> RolesWhere(const Skeleton& skeleton,
                                              const Characterization& c,
                                              bool fingers) {
  std::map<std::string, std::string> out;
  for (const RoleAssignment& r : c.roles) {
    if (IsFingerRole(r.role) == fingers) {
      out[r.role] = skeleton.joint(r.joint).name;
    }
  }
  return out;
}
std::map<std::string, std::string> Roles(const Skeleton& skeleton,
                                         const Characterization& c) {
  return RolesWhere(skeleton, c, /*fingers=*/false);
}
std::map<std::string, std::string> FingerRoles(const Skeleton& skeleton,
                                               const Characterization& c) {
  return RolesWhere(skeleton, c, /*fingers=*/true);
}

struct Expected {
  std::map<std::string, std::string> roles;
};

// The arm and leg roles of one side, from their joint names.
void Limbs(std::map<std::string, std::string>& m, const std::string& side,
           std::vector<std::string> arm, std::vector<std::string> leg) {
  const char* arm_roles[] = {"clavicle", "upper_arm", "forearm", "hand"};
  const char* leg_roles[] = {"thigh", "shin", "foot", "toe"};
  for (size_t i = 0; i < arm.size(); ++i) {
    if (!arm[i].empty()) m[side + "." + arm_roles[i]] = arm[i];
  }
  for (size_t i = 0; i < leg.size(); ++i) {
    if (!leg[i].empty()) m[side + "." + leg_roles[i]] = leg[i];
  }
}

void ExpectRoles(const Skeleton& skeleton,
                 const std::map<std::string, std::string>& want) {
  const absl::StatusOr<Characterization> c = Characterize(skeleton);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(Roles(skeleton, *c), want) << FormatCharacterization(skeleton, *c);
  // Every joint is either in a role or listed as unmapped, once.
  std::vector<int> seen(skeleton.num_joints(), 0);
  for (const RoleAssignment& r : c->roles) ++seen[r.joint];
  for (int j : c->unmapped) ++seen[j];
  for (int j = 0; j < skeleton.num_joints(); ++j) {
    EXPECT_EQ(seen[j], 1) << skeleton.joint(j).name;
  }
}

TEST(CharacterizeTest, CmuMotionBuilderNames) {
  std::map<std::string, std::string> m = {
      {"pelvis", "Hips"},   {"spine.0", "LowerBack"}, {"spine.1", "Spine"},
      {"spine.2", "Spine1"}, {"neck.0", "Neck"},      {"neck.1", "Neck1"},
      {"head", "Head"}};
  Limbs(m, "left", {"LeftShoulder", "LeftArm", "LeftForeArm", "LeftHand"},
        {"LeftUpLeg", "LeftLeg", "LeftFoot", "LeftToeBase"});
  Limbs(m, "right", {"RightShoulder", "RightArm", "RightForeArm", "RightHand"},
        {"RightUpLeg", "RightLeg", "RightFoot", "RightToeBase"});
  ExpectRoles(FromBvh("mocap/cmu_02_01_walk.bvh"), m);
  ExpectRoles(FromBvh("mocap/cmu_01_01_jump.bvh"), m);
  ExpectRoles(FromBvh("mocap/cmu_141_16_wave.bvh"), m);
}

TEST(CharacterizeTest, Cmu3dsMaxNames) {
  std::map<std::string, std::string> m = {
      {"pelvis", "Hips"},    {"spine.0", "lowerback"}, {"spine.1", "Chest"},
      {"spine.2", "Chest2"}, {"neck.0", "lowerneck"},  {"neck.1", "Neck"},
      {"head", "Head"}};
  Limbs(m, "left", {"LeftCollar", "LeftShoulder", "LeftElbow", "LeftWrist"},
        {"LeftHip", "LeftKnee", "LeftAnkle", "LeftToe"});
  Limbs(m, "right", {"RightCollar", "RightShoulder", "RightElbow", "RightWrist"},
        {"RightHip", "RightKnee", "RightAnkle", "RightToe"});
  ExpectRoles(FromBvh("mocap/cmu_131_03_hop.bvh"), m);
}

// The Boxing rig's LeftShoulder is the upper arm (its clavicle is
// LeftCollar): the name could mean either, its neighbours decide.
TEST(CharacterizeTest, BoxingShoulderIsTheUpperArm) {
  std::map<std::string, std::string> m = {
      {"pelvis", "Hips"}, {"spine.0", "Ab"}, {"spine.1", "Chest"},
      {"neck.0", "Neck"}, {"head", "Head"}};
  Limbs(m, "left", {"LeftCollar", "LeftShoulder", "LeftElbow", "LeftWrist"},
        {"LeftHip", "LeftKnee", "LeftAnkle", "LeftToes"});
  Limbs(m, "right", {"RightCollar", "RightShoulder", "RightElbow", "RightWrist"},
        {"RightHip", "RightKnee", "RightAnkle", "RightToes"});
  const Skeleton boxing = FromBvh("rigs/Boxing_Toes.bvh");
  ExpectRoles(boxing, m);
  const absl::StatusOr<Characterization> c = Characterize(boxing);
  ASSERT_TRUE(c.ok());
  for (const RoleAssignment& r : c->roles) {
    if (r.role == "left.upper_arm") {
      EXPECT_EQ(r.how, Decided::kNameOrder);
    }
  }
  EXPECT_TRUE(c->sides_from_names);
}

TEST(CharacterizeTest, CharacterCreatorNames) {
  std::map<std::string, std::string> m = {
      {"pelvis", "CC_Base_Hip"},        {"spine.0", "CC_Base_Waist"},
      {"spine.1", "CC_Base_Spine01"},   {"spine.2", "CC_Base_Spine02"},
      {"neck.0", "CC_Base_NeckTwist01"}, {"neck.1", "CC_Base_NeckTwist02"},
      {"head", "CC_Base_Head"}};
  Limbs(m, "left",
        {"CC_Base_L_Clavicle", "CC_Base_L_Upperarm", "CC_Base_L_Forearm",
         "CC_Base_L_Hand"},
        {"CC_Base_L_Thigh", "CC_Base_L_Calf", "CC_Base_L_Foot",
         "CC_Base_L_ToeBase"});
  Limbs(m, "right",
        {"CC_Base_R_Clavicle", "CC_Base_R_Upperarm", "CC_Base_R_Forearm",
         "CC_Base_R_Hand"},
        {"CC_Base_R_Thigh", "CC_Base_R_Calf", "CC_Base_R_Foot",
         "CC_Base_R_ToeBase"});
  const Skeleton cc = FromBvh("mocap/cmu_06_15_shoot_ccrig.bvh");
  ExpectRoles(cc, m);
  const absl::StatusOr<Characterization> c = Characterize(cc);
  ASSERT_TRUE(c.ok());
  // Twist, share, toe, face and breast bones and the End Sites stay
  // unmapped: 100 joints and 41 End Sites, 23 body roles and 30 finger
  // joints (five fingers of three joints a hand).
  EXPECT_EQ(Roles(cc, *c).size(), 23u);
  EXPECT_EQ(FingerRoles(cc, *c).size(), 30u);
  EXPECT_EQ(c->unmapped.size(), 141u - 53u);
}

// The BCN rig's legs hang off B_LowerPelvis and its spine off
// B_Root_Pelvis_T, siblings under the root; its head bone (the one the
// face bones hang from) is called B_Neck.
TEST(CharacterizeTest, BcnRigFromItsGlb) {
  std::map<std::string, std::string> m = {
      {"pelvis", "B_Root_Pelvis_L"}, {"spine.0", "B_Root_Pelvis_T"},
      {"spine.1", "B_Spine1"},       {"spine.2", "B_Spine2"},
      {"spine.3", "B_Spine3"},       {"spine.4", "B_Spine4"},
      {"neck.0", "B_Root_Neck_T"},   {"neck.1", "B_Root_Neck_H"},
      {"head", "B_Neck"}};
  Limbs(m, "left",
        {"B_Clavicle_Left", "B_UpperArm_Left", "B_ForeArm_Left", "B_Hand_Left"},
        {"B_Hip_Left", "B_Knee_Left", "B_Ankle_Left", "B_Toe_Left"});
  Limbs(m, "right",
        {"B_Clavicle_Right", "B_UpperArm_Right", "B_ForeArm_Right",
         "B_Hand_Right"},
        {"B_Hip_Right", "B_Knee_Right", "B_Ankle_Right", "B_Toe_Right"});
  ExpectRoles(FromGltf(Data("rigs/BCN_Epileptic.glb")), m);
}

TEST(CharacterizeTest, HumanoidExamples) {
  std::map<std::string, std::string> m = {
      {"pelvis", "hips"},  {"spine.0", "spine0"}, {"spine.1", "spine1"},
      {"spine.2", "spine2"}, {"neck.0", "neck"},  {"neck.1", "neck1"},
      {"head", "head"}};
  Limbs(m, "left", {"l_clavicle", "l_shoulder", "l_elbow", "l_wrist"},
        {"l_hip", "l_knee", "l_ankle"});
  Limbs(m, "right", {"r_clavicle", "r_shoulder", "r_elbow", "r_wrist"},
        {"r_hip", "r_knee", "r_ankle"});
  // The limited humanoid's toes are fixed tips: nothing to turn, no role.
  ExpectRoles(FromJson(testing::ExamplePath("humanoid_limited.skeleton.json")),
              m);
  m["left.toe"] = "l_toe";
  m["right.toe"] = "r_toe";
  ExpectRoles(FromJson(testing::ExamplePath("humanoid.skeleton.json")), m);
}

// Khronos' RiggedFigure names no joint (node_N): everything by shape. It
// faces +Z (glTF's convention), so its own left is +X.
TEST(CharacterizeTest, UnnamedRiggedFigureByShape) {
  const Skeleton figure = FromGltf(Data("gltf/RiggedFigure.glb"));
  const absl::StatusOr<Characterization> c = Characterize(figure);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string report = FormatCharacterization(figure, *c);
  std::map<std::string, std::string> m = {
      {"pelvis", "node_2"}, {"spine.0", "node_11"}, {"spine.1", "node_12"},
      {"neck.0", "node_19"}, {"head", "node_20"}};
  Limbs(m, "left", {"", "node_16", "node_17", "node_18"},
        {"node_7", "node_8", "node_9", "node_10"});
  Limbs(m, "right", {"", "node_13", "node_14", "node_15"},
        {"node_3", "node_4", "node_5", "node_6"});
  EXPECT_EQ(Roles(figure, *c), m) << report;
  EXPECT_FALSE(c->sides_from_names);
  for (const RoleAssignment& r : c->roles) {
    EXPECT_EQ(r.how, Decided::kShape) << r.role;
  }
  EXPECT_GT(c->up.y(), 0.99) << report;
  EXPECT_GT(c->forward.z(), 0.99) << report;
  // By a forward kinematics of the test's own: the left hand and foot
  // are at +X of the right ones.
  const testing::IndependentGlobals rest =
      testing::IndependentFk(figure, RestPose(figure));
  EXPECT_GT(rest.position[c->arms[kLeft].hand].x(),
            rest.position[c->arms[kRight].hand].x() + 0.5);
  EXPECT_GT(rest.position[c->legs[kLeft].foot].x(),
            rest.position[c->legs[kRight].foot].x() + 0.1);
}

// Head against neck by topology and position: a glTF rig's end joint at
// the head's top (Mixamo's "HeadTop_End", a joint like any other there,
// here unnamed above RiggedFigure's head) is not the head: the head is the
// joint below it, the neck keeps its joint. An end only a little above
// the shoulders (the skull's base on a rig without a head-top joint) stays
// the head.
TEST(CharacterizeTest, AHeadTopEndIsNotTheHead) {
  absl::StatusOr<import::ImportedSkeleton> imported =
      import::ImportGltf(Data("gltf/RiggedFigure.glb"));
  ASSERT_TRUE(imported.ok()) << imported.status();
  const Skeleton plain = *Skeleton::Create(imported->def);
  const testing::IndependentGlobals rest =
      testing::IndependentFk(plain, RestPose(plain));
  const int head = plain.FindJoint("node_20");
  ASSERT_GE(head, 0);
  // The arm's length (upper arm and forearm), the test's own.
  const double arm = (rest.position[plain.FindJoint("node_17")] -
                      rest.position[plain.FindJoint("node_16")])
                         .norm() +
                     (rest.position[plain.FindJoint("node_18")] -
                      rest.position[plain.FindJoint("node_17")])
                         .norm();
  // A leaf 0.35 arm lengths above the head (the head's top, about 0.6
  // above the shoulders), along the head's own frame's up.
  SkeletonDef def = imported->def;
  JointDef top;
  top.name = "node_99";
  top.parent = head;
  top.rest.translation = rest.rotation[head].conjugate() *
                         Eigen::Vector3d(0.0, 0.35 * arm, 0.0);
  def.joints.push_back(top);
  const Skeleton topped = *Skeleton::Create(def);
  const absl::StatusOr<Characterization> c = Characterize(topped);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string report = FormatCharacterization(topped, *c);
  EXPECT_EQ(topped.joint(c->head).name, "node_20") << report;
  ASSERT_EQ(c->neck.size(), 1u) << report;
  EXPECT_EQ(topped.joint(c->neck[0]).name, "node_19") << report;
  EXPECT_THAT(c->unmapped, ::testing::ElementsAre(topped.FindJoint("node_99")))
      << report;
  // Without it the head is the end itself, as before.
  const absl::StatusOr<Characterization> p = Characterize(plain);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->head, head);
}

// With every name replaced by node_N, the CMU skeleton maps the same
// joints to the same roles: the shape alone finds them, sides included.
TEST(CharacterizeTest, ShapeAloneMatchesTheNamesOnCmu) {
  for (const char* clip : {"mocap/cmu_02_01_walk.bvh",
                           "mocap/cmu_131_03_hop.bvh",
                           "mocap/cmu_06_15_shoot_ccrig.bvh",
                           "rigs/Boxing_Toes.bvh"}) {
    absl::StatusOr<import::BvhClip> bvh = import::ImportBvh(Data(clip));
    ASSERT_TRUE(bvh.ok()) << bvh.status();
    SkeletonDef def = bvh->skeleton.def;
    const absl::StatusOr<Skeleton> named = Skeleton::Create(def);
    ASSERT_TRUE(named.ok());
    for (size_t j = 0; j < def.joints.size(); ++j) {
      def.joints[j].name = absl::StrCat("node_", j);
    }
    def.chains.clear();
    const absl::StatusOr<Skeleton> unnamed = Skeleton::Create(def);
    ASSERT_TRUE(unnamed.ok()) << unnamed.status();
    // The CC rig's rest is no stance (every bone along its parent's
    // local axis, legs up): its first frame of motion serves.
    Pose first;
    bvh->FramePose(1, &first);
    const Pose* reference =
        std::string(clip).find("ccrig") != std::string::npos ? &first
                                                             : nullptr;
    const absl::StatusOr<Characterization> by_name =
        Characterize(*named, {}, reference);
    const absl::StatusOr<Characterization> by_shape =
        Characterize(*unnamed, {}, reference);
    ASSERT_TRUE(by_name.ok() && by_shape.ok()) << clip;
    // Fingers: the same joints and thumbs (the others are named by their
    // place when the names say nothing).
    std::map<std::string, int> a, b;
    std::set<int> fingers_a, fingers_b;
    for (const auto& [c, roles, fingers] :
         {std::tuple{&*by_name, &a, &fingers_a},
          std::tuple{&*by_shape, &b, &fingers_b}}) {
      for (const RoleAssignment& r : c->roles) {
        const bool finger = IsFingerRole(r.role);
        if (finger) fingers->insert(r.joint);
        if (!finger || r.role.find(".thumb.") != std::string::npos) {
          (*roles)[r.role] = r.joint;
        }
      }
    }
    EXPECT_EQ(fingers_a, fingers_b) << clip;
    // The head of a rig whose head has face bones is found by its name;
    // by shape, it is the joint they fork from.
    if (std::string(clip).find("ccrig") != std::string::npos) {
      a.erase("head");
      b.erase("head");
      a.erase("neck.0"), a.erase("neck.1");
      b.erase("neck.0"), b.erase("neck.1"), b.erase("neck.2");
    }
    EXPECT_EQ(a, b) << clip << "\n"
                    << FormatCharacterization(*unnamed, *by_shape);
    EXPECT_FALSE(by_shape->sides_from_names);
  }
}

// The naming schemes of Mixamo, the UE4/UE5 Mannequin, Blender Rigify
// and the Godot/VRM humanoid profile, put on the CMU walk's skeleton
// (whose shape is known): the same joints get the same roles, by name.
TEST(CharacterizeTest, NamingSchemesOfOtherRigs) {
  struct Scheme {
    const char* name;
    std::map<std::string, std::string> rename;  // CMU name -> scheme's.
  };
  auto sided = [](std::map<std::string, std::string> left_names,
                  const std::string& l, const std::string& r) {
    std::map<std::string, std::string> out;
    for (const auto& [cmu, name] : left_names) {
      out[cmu] = name;
      std::string right_cmu = cmu, right_name = name;
      right_cmu.replace(0, 4, "Right");
      const size_t at = right_name.find(l);
      right_name.replace(at, l.size(), r);
      out[right_cmu] = right_name;
    }
    return out;
  };
  auto with = [](std::map<std::string, std::string> a,
                 const std::map<std::string, std::string>& b) {
    a.insert(b.begin(), b.end());
    return a;
  };
  const Scheme schemes[] = {
      {"Mixamo",
       with(sided({{"LeftUpLeg", "mixamorig:LeftUpLeg"},
                   {"LeftLeg", "mixamorig:LeftLeg"},
                   {"LeftFoot", "mixamorig:LeftFoot"},
                   {"LeftToeBase", "mixamorig:LeftToeBase"},
                   {"LeftShoulder", "mixamorig:LeftShoulder"},
                   {"LeftArm", "mixamorig:LeftArm"},
                   {"LeftForeArm", "mixamorig:LeftForeArm"},
                   {"LeftHand", "mixamorig:LeftHand"}},
                  "Left", "Right"),
            {{"Hips", "mixamorig:Hips"},
             {"LowerBack", "mixamorig:Spine"},
             {"Spine", "mixamorig:Spine1"},
             {"Spine1", "mixamorig:Spine2"},
             {"Neck", "mixamorig:Neck"},
             {"Head", "mixamorig:Head"}})},
      {"UE Mannequin",
       with(sided({{"LeftUpLeg", "thigh_l"},
                   {"LeftLeg", "calf_l"},
                   {"LeftFoot", "foot_l"},
                   {"LeftToeBase", "ball_l"},
                   {"LeftShoulder", "clavicle_l"},
                   {"LeftArm", "upperarm_l"},
                   {"LeftForeArm", "lowerarm_l"},
                   {"LeftHand", "hand_l"}},
                  "_l", "_r"),
            {{"Hips", "pelvis"},
             {"LowerBack", "spine_01"},
             {"Spine", "spine_02"},
             {"Spine1", "spine_03"},
             {"Neck", "neck_01"},
             {"Head", "head"}})},
      {"Rigify",
       with(sided({{"LeftUpLeg", "DEF-thigh.L"},
                   {"LeftLeg", "DEF-shin.L"},
                   {"LeftFoot", "DEF-foot.L"},
                   {"LeftToeBase", "DEF-toe.L"},
                   {"LeftShoulder", "DEF-shoulder.L"},
                   {"LeftArm", "DEF-upper_arm.L"},
                   {"LeftForeArm", "DEF-forearm.L"},
                   {"LeftHand", "DEF-hand.L"}},
                  ".L", ".R"),
            {{"LowerBack", "DEF-spine.001"},
             {"Spine", "DEF-spine.002"},
             {"Spine1", "DEF-spine.003"},
             {"Neck", "DEF-spine.004"},
             {"Head", "DEF-spine.006"}})},
      {"Godot/VRM humanoid",
       with(sided({{"LeftUpLeg", "LeftUpperLeg"},
                   {"LeftLeg", "LeftLowerLeg"},
                   {"LeftFoot", "LeftFoot"},
                   {"LeftToeBase", "LeftToes"},
                   {"LeftShoulder", "LeftShoulder"},
                   {"LeftArm", "LeftUpperArm"},
                   {"LeftForeArm", "LeftLowerArm"},
                   {"LeftHand", "LeftHand"}},
                  "Left", "Right"),
            {{"Hips", "Hips"},
             {"LowerBack", "Spine"},
             {"Spine", "Chest"},
             {"Spine1", "UpperChest"},
             {"Neck", "Neck"},
             {"Head", "Head"}})},
  };
  absl::StatusOr<import::BvhClip> bvh =
      import::ImportBvh(Data("mocap/cmu_02_01_walk.bvh"));
  ASSERT_TRUE(bvh.ok());
  const Skeleton cmu = *Skeleton::Create(bvh->skeleton.def);
  const absl::StatusOr<Characterization> want = Characterize(cmu);
  ASSERT_TRUE(want.ok());
  for (const Scheme& scheme : schemes) {
    SCOPED_TRACE(scheme.name);
    SkeletonDef def = bvh->skeleton.def;
    def.chains.clear();
    for (JointDef& j : def.joints) {
      const auto it = scheme.rename.find(j.name);
      if (it != scheme.rename.end()) j.name = it->second;
    }
    const absl::StatusOr<Skeleton> renamed = Skeleton::Create(def);
    ASSERT_TRUE(renamed.ok()) << renamed.status();
    const absl::StatusOr<Characterization> got = Characterize(*renamed);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->roles.size(), want->roles.size())
        << FormatCharacterization(*renamed, *got);
    for (size_t i = 0; i < got->roles.size(); ++i) {
      EXPECT_EQ(got->roles[i].role, want->roles[i].role);
      EXPECT_EQ(got->roles[i].joint, want->roles[i].joint)
          << got->roles[i].role << "\n" << FormatCharacterization(*renamed, *got);
      // Every renamed limb joint was placed by its name.
      const bool limb = got->roles[i].role.find('.') != std::string::npos &&
                        got->roles[i].role.rfind("spine", 0) != 0 &&
                        got->roles[i].role.rfind("neck", 0) != 0;
      if (limb) {
        EXPECT_NE(got->roles[i].how, Decided::kShape) << got->roles[i].role;
      }
    }
    EXPECT_TRUE(got->sides_from_names);
  }
}

TEST(CharacterizeTest, AReferencePoseMustFitTheSkeleton) {
  const Skeleton walk = FromBvh("mocap/cmu_02_01_walk.bvh");
  Pose bad = RestPose(walk);
  bad.local.pop_back();
  const absl::StatusOr<Characterization> c = Characterize(walk, {}, &bad);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("reference pose"));
}

TEST(CharacterizeTest, OverridesReplaceRolesAndNameTheirErrors) {
  const Skeleton walk = FromBvh("mocap/cmu_02_01_walk.bvh");
  const std::vector<RoleOverride> overrides = {
      {"left.hand", "LeftHandIndex1"}, {"head", "Neck1"}};
  const absl::StatusOr<Characterization> c = Characterize(walk, overrides);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::map<std::string, std::string> roles = Roles(walk, *c);
  EXPECT_EQ(roles.at("left.hand"), "LeftHandIndex1");
  EXPECT_EQ(roles.at("head"), "Neck1");
  // Neck1 left the neck; Head and LeftHand lost their roles.
  EXPECT_EQ(roles.count("neck.1"), 0u);
  EXPECT_EQ(RoleOf(*c, walk.FindJoint("Head")), "");
  EXPECT_EQ(RoleOf(*c, walk.FindJoint("LeftHand")), "");
  EXPECT_THAT(c->unmapped, ::testing::Contains(walk.FindJoint("Head")));
  EXPECT_EQ(c->arms[kLeft].hand, walk.FindJoint("LeftHandIndex1"));
  for (const RoleAssignment& r : c->roles) {
    if (r.role == "left.hand" || r.role == "head") {
      EXPECT_EQ(r.how, Decided::kOverride);
    }
  }

  const std::vector<RoleOverride> bad_joint = {{"head", "Head"},
                                               {"left.hand", "NoSuchJoint"}};
  EXPECT_THAT(Characterize(walk, bad_joint).status().message(),
              HasSubstr("overrides[1].joint"));
  const std::vector<RoleOverride> bad_role = {{"left.elbow", "LeftForeArm"}};
  EXPECT_THAT(Characterize(walk, bad_role).status().message(),
              HasSubstr("overrides[0].role"));
}

TEST(CharacterizeTest, ANonHumanoidIsRefusedWithTheReason) {
  // The Panda-like arm of the test models: one chain, no mirrored limbs.
  absl::StatusOr<SkeletonDef> def = testing::LoadSkeletonJson(
      testing::ExamplePath("humanoid.skeleton.json"));
  ASSERT_TRUE(def.ok());
  // Keep only the hips and the left leg.
  SkeletonDef leg;
  for (const JointDef& j : def->joints) {
    if (j.name == "hips" || j.name.rfind("l_", 0) == 0) {
      if (j.name.find("clavicle") != std::string::npos ||
          j.name.find("shoulder") != std::string::npos ||
          j.name.find("elbow") != std::string::npos ||
          j.name.find("wrist") != std::string::npos ||
          j.name.find("finger") != std::string::npos ||
          j.name.find("thumb") != std::string::npos) {
        continue;
      }
      JointDef copy = j;
      copy.parent = leg.joints.empty() ? -1 : static_cast<int>(leg.joints.size()) - 1;
      leg.joints.push_back(copy);
    }
  }
  const absl::StatusOr<Skeleton> s = Skeleton::Create(leg);
  ASSERT_TRUE(s.ok()) << s.status();
  const absl::StatusOr<Characterization> c = Characterize(*s);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("not a humanoid"));
}

// Real clips are asymmetric below the hands and feet and carry helper
// bones: a CMU clip whose left finger bones are 60% longer than its right
// (one exercise clip differs by 22%), a helper bone on one forearm only, a
// second toe on one foot. Each is accepted with the roles of the clean
// clip and a warning naming what differs. (Before: "not a humanoid".)
TEST(CharacterizeTest, AsymmetricFingersAndHelperBonesAreAcceptedWithAWarning) {
  absl::StatusOr<import::BvhClip> clip =
      import::ImportBvh(Data("mocap/cmu_02_01_walk.bvh"));
  ASSERT_TRUE(clip.ok()) << clip.status();
  const SkeletonDef clean = clip->skeleton.def;
  const Skeleton clean_skeleton = *Skeleton::Create(clean);
  const absl::StatusOr<Characterization> want = Characterize(clean_skeleton);
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_THAT(want->warnings, ::testing::IsEmpty());
  auto index = [&clean](const std::string& name) {
    for (size_t j = 0; j < clean.joints.size(); ++j) {
      if (clean.joints[j].name == name) return static_cast<int>(j);
    }
    ADD_FAILURE() << "no joint " << name;
    return 0;
  };
  struct Edit {
    const char* what;
    std::function<void(SkeletonDef*)> apply;
    const char* warned;  // A joint name the warning must contain.
  };
  const std::vector<Edit> edits = {
      {"longer left fingers",
       [&](SkeletonDef* def) {
         for (size_t j = 0; j < def->joints.size(); ++j) {
           for (int a = def->joints[j].parent; a >= 0;
                a = def->joints[a].parent) {
             if (a == index("LeftHand")) {
               def->joints[j].rest.translation *= 1.6;
               break;
             }
           }
         }
       },
       "LeftHand"},
      {"a helper bone on the left forearm",
       [&](SkeletonDef* def) {
         JointDef helper;
         helper.name = "LeftForeArmRoll";
         helper.parent = index("LeftForeArm");
         helper.rest.translation =
             0.5 * def->joints[index("LeftHand")].rest.translation;
         def->joints.push_back(helper);
       },
       "LeftForeArmRoll"},
      {"a second toe on the right foot",
       [&](SkeletonDef* def) {
         JointDef toe = def->joints[index("RightToeBase")];
         toe.name = "RightToe2";
         toe.rest.translation =
             0.6 * toe.rest.translation + Eigen::Vector3d(0.3, 0.0, 0.0);
         def->joints.push_back(toe);
       },
       "RightToe2"},
  };
  for (const Edit& edit : edits) {
    SCOPED_TRACE(edit.what);
    SkeletonDef def = clean;
    edit.apply(&def);
    absl::StatusOr<Skeleton> skeleton = Skeleton::Create(def);
    ASSERT_TRUE(skeleton.ok()) << skeleton.status();
    const absl::StatusOr<Characterization> got = Characterize(*skeleton);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(Roles(*skeleton, *got), Roles(clean_skeleton, *want));
    ASSERT_THAT(got->warnings, ::testing::Not(::testing::IsEmpty()));
    EXPECT_THAT(absl::StrJoin(got->warnings, "\n"), HasSubstr(edit.warned));
    EXPECT_THAT(FormatCharacterization(*skeleton, *got),
                HasSubstr(got->warnings[0]));
  }
}

// Fingers by role, written out by hand from each file's hierarchy: the
// thumb by name or set apart by shape, the others by name or their place,
// each joint by its order along the finger.
TEST(CharacterizeTest, FingersByRole) {
  const Skeleton cmu = FromBvh("mocap/cmu_02_01_walk.bvh");
  const absl::StatusOr<Characterization> c = Characterize(cmu);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(FingerRoles(cmu, *c),
            (std::map<std::string, std::string>{
                {"left.thumb.0", "LThumb"},
                {"left.index.0", "LeftFingerBase"},
                {"left.index.1", "LeftHandIndex1"},
                {"right.thumb.0", "RThumb"},
                {"right.index.0", "RightFingerBase"},
                {"right.index.1", "RightHandIndex1"}}));
  const Skeleton bcn = FromGltf(Data("rigs/BCN_Epileptic.glb"));
  const absl::StatusOr<Characterization> b = Characterize(bcn);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(FingerRoles(bcn, *b),
            (std::map<std::string, std::string>{
                {"left.thumb.0", "B_Thumb1_Left"},
                {"left.thumb.1", "B_Thumb2_Left"},
                {"left.finger1.0", "B_Finger1_Left"},
                {"left.finger1.1", "B_Finger2_Left"},
                {"left.finger1.2", "B_Finger3_Left"},
                {"right.thumb.0", "B_Thumb1_Right"},
                {"right.thumb.1", "B_Thumb2_Right"},
                {"right.finger1.0", "B_Finger1_Right"},
                {"right.finger1.1", "B_Finger2_Right"},
                {"right.finger1.2", "B_Finger3_Right"}}));
  // Unnamed: a hand with five two-joint fingers fanned out in its plane
  // and the thumb off to the side: the thumb by shape, the rest in order
  // from it.
  SkeletonDef def = testing::HumanoidDef();
  const int hand = [&def] {
    for (size_t j = 0; j < def.joints.size(); ++j) {
      if (def.joints[j].name == "l_wrist") return static_cast<int>(j);
    }
    return -1;
  }();
  ASSERT_GE(hand, 0);
  // HumanoidDef's own finger joints below the wrist go; five fingers come.
  std::vector<JointDef> kept;
  std::vector<int> index_of(def.joints.size(), -1);
  for (size_t j = 0; j < def.joints.size(); ++j) {
    const int p = def.joints[j].parent;
    bool below = false;
    for (int a = p; a >= 0; a = def.joints[a].parent) below |= a == hand;
    if (below) continue;
    index_of[j] = static_cast<int>(kept.size());
    kept.push_back(def.joints[j]);
    if (p >= 0) kept.back().parent = index_of[p];
  }
  def.joints = kept;
  const int new_hand = index_of[hand];
  const Eigen::Vector3d out = def.joints[new_hand].rest.translation.normalized();
  const Eigen::Vector3d forward(0, 0, 1);
  for (int f = 0; f < 5; ++f) {
    const Eigen::Vector3d dir =
        f == 0 ? Eigen::Vector3d(forward + 0.3 * out).normalized()
               : Eigen::Vector3d(out + 0.12 * (f - 2) * forward).normalized();
    int parent = new_hand;
    for (int i = 0; i < 2; ++i) {
      JointDef joint;
      joint.name = absl::StrCat("n", f, "_", i);
      joint.parent = parent;
      joint.rest.translation = 0.03 * dir;
      parent = static_cast<int>(def.joints.size());
      def.joints.push_back(joint);
    }
  }
  absl::StatusOr<Skeleton> fan = Skeleton::Create(def);
  ASSERT_TRUE(fan.ok()) << fan.status();
  const absl::StatusOr<Characterization> h = Characterize(*fan);
  ASSERT_TRUE(h.ok()) << h.status();
  const std::map<std::string, std::string> roles = FingerRoles(*fan, *h);
  EXPECT_EQ(roles.at("left.thumb.0"), "n0_0");
  EXPECT_EQ(roles.at("left.thumb.1"), "n0_1");
  // Nearest the thumb first.
  EXPECT_EQ(roles.at("left.finger1.0"), "n4_0");
  EXPECT_EQ(roles.at("left.finger4.1"), "n1_1");
}

}  // namespace
}  // namespace reach::retarget
