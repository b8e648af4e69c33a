// glTF import: Khronos's RiggedFigure sample (.gltf and the .glb packed from
// it) and a hand-written arm exercising folded ancestors, matrices, skin
// order, names and a second skin; rest poses are checked against the node
// hierarchy's world matrices computed here with plain 4x4 products, and
// against the inverse bind matrices. One file per error the importer
// reports. And the benchmark rig made from a real 54-joint skin with this
// importer (bench/data/).
#include "importers/gltf.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "importers/skeleton_file.h"
#include "wire/convert.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"
#include "tests/testing/models.h"
#include "tiny_gltf.h"

namespace reach::import {
namespace {

using Eigen::Matrix4d;
using Eigen::Quaterniond;
using Eigen::Vector3d;
using ::testing::HasSubstr;

std::string GltfPath(absl::string_view name) {
  return absl::StrCat(REACH_TEST_DATA, "/gltf/", name);
}

using testing::JointNames;
using testing::JointParents;

// The file as tinygltf reads it, for the expectations below.
tinygltf::Model LoadModel(const std::string& path) {
  tinygltf::TinyGLTF loader;
  tinygltf::Model model;
  std::string err, warn;
  EXPECT_TRUE(loader.LoadASCIIFromFile(&model, &err, &warn, path)) << err;
  return model;
}

// A node's local matrix, T * R * S with any scale, or its matrix.
Matrix4d LocalMatrix(const tinygltf::Node& node) {
  if (!node.matrix.empty())
    return Eigen::Map<const Matrix4d>(node.matrix.data());
  Eigen::Affine3d m = Eigen::Affine3d::Identity();
  if (!node.translation.empty()) {
    m.translate(Vector3d(node.translation.data()));
  }
  if (!node.rotation.empty()) {
    m.rotate(Quaterniond(node.rotation[3], node.rotation[0], node.rotation[1],
                         node.rotation[2]));
  }
  if (!node.scale.empty()) m.scale(Vector3d(node.scale.data()));
  return m.matrix();
}

// World matrix of every node: products of local matrices up the hierarchy.
std::vector<Matrix4d> NodeWorlds(const tinygltf::Model& model) {
  const int n = static_cast<int>(model.nodes.size());
  std::vector<int> parent(n, -1);
  for (int i = 0; i < n; ++i) {
    for (int c : model.nodes[i].children) parent[c] = i;
  }
  std::vector<Matrix4d> worlds(n);
  for (int i = 0; i < n; ++i) {
    worlds[i] = LocalMatrix(model.nodes[i]);
    for (int a = parent[i]; a >= 0; a = parent[a]) {
      worlds[i] = LocalMatrix(model.nodes[a]) * worlds[i];
    }
  }
  return worlds;
}

// The rotation of a matrix whose columns have (nearly) equal lengths.
Quaterniond RotationOf(const Matrix4d& m) {
  const Eigen::Matrix3d r = m.topLeftCorner<3, 3>().colwise().normalized();
  return Quaterniond(r).normalized();
}

std::vector<Transform> RestGlobals(const Skeleton& skeleton) {
  std::vector<Transform> globals(skeleton.num_joints());
  ComputeGlobals(skeleton, RestPose(skeleton), absl::MakeSpan(globals));
  return globals;
}

TEST(GltfImportTest, RiggedFigureImportsItsNineteenJointsAsBalls) {
  const absl::StatusOr<ImportedSkeleton> figure =
      ImportGltf(GltfPath("RiggedFigure.gltf"));
  ASSERT_TRUE(figure.ok()) << figure.status();
  // Its skin is Blender's default "Armature": named after the file.
  EXPECT_EQ(figure->name, "RiggedFigure");
  // The skin's order is already parent-before-child and is kept; the nodes
  // are unnamed.
  EXPECT_EQ(JointNames(figure->def),
            (std::vector<std::string>{
                "node_2", "node_11", "node_12", "node_19", "node_20", "node_16",
                "node_13", "node_17", "node_14", "node_18", "node_15", "node_7",
                "node_3", "node_8", "node_4", "node_9", "node_5", "node_10",
                "node_6"}));
  EXPECT_EQ(JointParents(figure->def),
            (std::vector<int>{-1, 0, 1, 2, 3, 2, 2, 5, 6, 7, 8, 0, 0, 11, 12,
                              13, 14, 15, 16}));
  for (const JointDef& joint : figure->def.joints) {
    EXPECT_EQ(joint.type, JointType::kBall) << joint.name;
  }
  EXPECT_TRUE(figure->def.chains.empty());  // No limb names to guess from.
  const absl::StatusOr<Skeleton> skeleton = Skeleton::Create(figure->def);
  EXPECT_TRUE(skeleton.ok()) << skeleton.status();
}

// The rest pose is the node hierarchy's: the root joint carries the scene
// root's Z-up-to-Y-up matrix, and every joint lands on its node's world
// position and rotation. In this file the rest pose is also the bind pose,
// so inverse(inverseBindMatrix) gives the same positions (to float
// precision).
TEST(GltfImportTest, RiggedFigureRestPoseIsItsNodeHierarchyAndBindPose) {
  const std::string path = GltfPath("RiggedFigure.gltf");
  const absl::StatusOr<ImportedSkeleton> figure = ImportGltf(path);
  ASSERT_TRUE(figure.ok()) << figure.status();
  const absl::StatusOr<Skeleton> skeleton = Skeleton::Create(figure->def);
  ASSERT_TRUE(skeleton.ok()) << skeleton.status();
  const std::vector<Transform> globals = RestGlobals(*skeleton);

  const tinygltf::Model model = LoadModel(path);
  const std::vector<Matrix4d> worlds = NodeWorlds(model);
  const tinygltf::Skin& skin = model.skins[0];
  ASSERT_EQ(skin.joints.size(), 19u);

  // Inverse bind matrices: float MAT4, column-major, one per skin joint;
  // they map the skinned mesh node's space to each joint's.
  const tinygltf::Accessor& accessor =
      model.accessors[skin.inverseBindMatrices];
  ASSERT_EQ(accessor.componentType, TINYGLTF_COMPONENT_TYPE_FLOAT);
  ASSERT_EQ(accessor.type, TINYGLTF_TYPE_MAT4);
  const tinygltf::BufferView& view = model.bufferViews[accessor.bufferView];
  const unsigned char* data = model.buffers[view.buffer].data.data() +
                              view.byteOffset + accessor.byteOffset;
  int mesh_node = -1;
  for (size_t i = 0; i < model.nodes.size(); ++i) {
    if (model.nodes[i].skin == 0) mesh_node = static_cast<int>(i);
  }
  ASSERT_GE(mesh_node, 0);

  EXPECT_LT((globals[0].translation - Vector3d(0, 0.686, 0)).norm(), 1e-6);
  for (size_t k = 0; k < skin.joints.size(); ++k) {
    const int node = skin.joints[k];
    const int j = skeleton->FindJoint(absl::StrCat("node_", node));
    ASSERT_GE(j, 0) << node;
    SCOPED_TRACE(skeleton->joint(j).name);
    const Vector3d world = worlds[node].topRightCorner<3, 1>();
    EXPECT_LT((globals[j].translation - world).norm(), 1e-6);
    EXPECT_LT(AngleBetween(globals[j].rotation, RotationOf(worlds[node])),
              1e-6);
    EXPECT_NEAR(globals[j].scale, 1.0, 2e-6);

    float ibm[16];
    std::memcpy(ibm, data + 64 * k, sizeof(ibm));
    const Matrix4d bind =
        worlds[mesh_node] *
        Eigen::Map<Eigen::Matrix4f>(ibm).cast<double>().inverse();
    EXPECT_LT((globals[j].translation - bind.topRightCorner<3, 1>()).norm(),
              1e-6);
  }
}

// The .glb was packed from the .gltf by make_glb.py: the same skeleton.
TEST(GltfImportTest, RiggedFigureGlbMatchesGltf) {
  const absl::StatusOr<ImportedSkeleton> gltf =
      ImportGltf(GltfPath("RiggedFigure.gltf"));
  const absl::StatusOr<ImportedSkeleton> glb =
      ImportGltf(GltfPath("RiggedFigure.glb"));
  ASSERT_TRUE(gltf.ok()) << gltf.status();
  ASSERT_TRUE(glb.ok()) << glb.status();
  EXPECT_EQ(glb->name, gltf->name);
  ASSERT_EQ(JointNames(glb->def), JointNames(gltf->def));
  EXPECT_EQ(JointParents(glb->def), JointParents(gltf->def));
  for (size_t i = 0; i < gltf->def.joints.size(); ++i) {
    const Transform& a = gltf->def.joints[i].rest;
    const Transform& b = glb->def.joints[i].rest;
    EXPECT_EQ(a.translation, b.translation);
    EXPECT_EQ(a.rotation.coeffs(), b.rotation.coeffs());
    EXPECT_EQ(a.scale, b.scale);
  }
}

// ParseGltf reads the same files from memory: .gltf without external
// buffers and .glb alike, to the same skeletons; an external buffer is an
// error naming it, since nothing else is read.
TEST(GltfImportTest, ParseGltfFromMemoryMatchesImportGltf) {
  for (const auto& [file, skin] : {std::pair<const char*, int>{"arm.gltf", 0},
                                   {"arm.gltf", 1},
                                   {"RiggedFigure.glb", 0}}) {
    SCOPED_TRACE(absl::StrCat(file, " skin ", skin));
    const std::string path = GltfPath(file);
    std::string contents;
    ASSERT_TRUE(ReadFile(path, &contents).ok());
    const absl::StatusOr<ImportedSkeleton> from_file = ImportGltf(path, skin);
    const absl::StatusOr<ImportedSkeleton> from_memory =
        ParseGltf(contents, path, skin);
    ASSERT_TRUE(from_file.ok()) << from_file.status();
    ASSERT_TRUE(from_memory.ok()) << from_memory.status();
    EXPECT_EQ(from_memory->name, from_file->name);
    ASSERT_EQ(JointNames(from_memory->def), JointNames(from_file->def));
    EXPECT_EQ(JointParents(from_memory->def), JointParents(from_file->def));
    for (size_t i = 0; i < from_file->def.joints.size(); ++i) {
      const Transform& a = from_file->def.joints[i].rest;
      const Transform& b = from_memory->def.joints[i].rest;
      EXPECT_EQ(a.translation, b.translation);
      EXPECT_EQ(a.rotation.coeffs(), b.rotation.coeffs());
      EXPECT_EQ(a.scale, b.scale);
    }
  }

  const std::string path = GltfPath("RiggedFigure.gltf");
  std::string contents;
  ASSERT_TRUE(ReadFile(path, &contents).ok());
  const absl::StatusOr<ImportedSkeleton> external = ParseGltf(contents, path);
  EXPECT_EQ(external.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(external.status().message()),
              HasSubstr(absl::StrCat(path, ": cannot load glTF: ")));
  EXPECT_THAT(std::string(external.status().message()),
              HasSubstr("RiggedFigure0.bin"));
  EXPECT_THAT(std::string(ParseGltf(contents, "figure.fbx").status().message()),
              HasSubstr("figure.fbx: unknown extension"));
}

// arm.gltf: skin 0 lists LeftHand first; a scaled, rotated, translated
// "Armature" node above the root and "ShoulderOffset" between Spine and
// LeftArm are not joints; LeftForeArm is a matrix with scale 2; LeftHand's
// scale is uniform to 1e-6; node 7 is unnamed and node 8 repeats "Spine".
TEST(GltfImportTest, ArmFoldsNonJointNodesOrdersAndNamesJoints) {
  const std::string path = GltfPath("arm.gltf");
  const absl::StatusOr<ImportedSkeleton> arm = ImportGltf(path);
  ASSERT_TRUE(arm.ok()) << arm.status();
  EXPECT_EQ(arm->name, "ArmRig");
  const SkeletonDef& def = arm->def;
  EXPECT_EQ(JointNames(def),
            (std::vector<std::string>{"Hips", "Spine", "LeftArm", "LeftForeArm",
                                      "LeftHand", "node_7", "node_8"}));
  EXPECT_EQ(JointParents(def), (std::vector<int>{-1, 0, 1, 2, 3, 4, 1}));

  // Hips = Armature * Hips: (0, 0, 1) + 0.01 * Ry(90) * (0, 100, 0).
  const Transform& hips = def.joints[0].rest;
  EXPECT_LT((hips.translation - Vector3d(0, 1, 1)).norm(), 1e-15);
  EXPECT_LT(AngleBetween(hips.rotation, AxisAngle(Vector3d::UnitY(), M_PI / 2)),
            1e-15);
  EXPECT_NEAR(hips.scale, 0.01, 1e-18);
  // LeftArm = ShoulderOffset * LeftArm: (5, 30, 0) + Rz(30) * (10, 0, 0).
  const Transform& left_arm = def.joints[2].rest;
  EXPECT_LT((left_arm.translation - Vector3d(5 + 10 * std::cos(M_PI / 6),
                                             30 + 10 * std::sin(M_PI / 6), 0))
                .norm(),
            1e-13);
  EXPECT_LT(
      AngleBetween(left_arm.rotation, AxisAngle(Vector3d::UnitZ(), M_PI / 6)),
      1e-15);
  const Transform& fore_arm = def.joints[3].rest;  // The matrix.
  EXPECT_EQ(fore_arm.translation, Vector3d(25, 0, 0));
  EXPECT_NEAR(fore_arm.scale, 2.0, 1e-15);
  EXPECT_LT(
      AngleBetween(fore_arm.rotation, AxisAngle(Vector3d::UnitZ(), M_PI / 4)),
      1e-15);
  EXPECT_NEAR(def.joints[4].rest.scale, (1.0000004 + 1 + 0.9999998) / 3, 1e-15);
  EXPECT_EQ(def.joints[1].type, JointType::kBall);

  ASSERT_EQ(def.chains.size(), 1u);
  EXPECT_EQ(def.chains[0].name, "left_arm");
  EXPECT_EQ(def.chains[0].root, "LeftArm");
  EXPECT_EQ(def.chains[0].tip, "LeftHand");

  const absl::StatusOr<Skeleton> skeleton = Skeleton::Create(def);
  ASSERT_TRUE(skeleton.ok()) << skeleton.status();
  const std::vector<Transform> globals = RestGlobals(*skeleton);
  EXPECT_LT((globals[1].translation - Vector3d(0, 1.2, 1)).norm(), 1e-15);
  EXPECT_LT((globals[6].translation - Vector3d(0, 1.6, 1)).norm(), 1e-15);
  const tinygltf::Model model = LoadModel(path);
  const std::vector<Matrix4d> worlds = NodeWorlds(model);
  const int nodes[] = {1, 2, 4, 5, 6, 7, 8};
  for (int j = 0; j < 7; ++j) {
    SCOPED_TRACE(def.joints[j].name);
    const Matrix4d& world = worlds[nodes[j]];
    // Node 7 sits 4 units along LeftHand's slightly non-uniform X, scaled
    // by 0.02: the mean scale moves it by ~3e-8.
    EXPECT_LT((globals[j].translation - world.topRightCorner<3, 1>()).norm(),
              1e-7);
    EXPECT_LT(AngleBetween(globals[j].rotation, RotationOf(world)), 1e-12);
    EXPECT_NEAR(globals[j].scale, world.col(0).head<3>().norm(), 1e-8);
  }
}

TEST(GltfImportTest, SecondSkinIsChosenByIndexAndNamedAfterTheFile) {
  const absl::StatusOr<ImportedSkeleton> arm =
      ImportGltf(GltfPath("arm.gltf"), 1);
  ASSERT_TRUE(arm.ok()) << arm.status();
  EXPECT_EQ(arm->name, "arm");  // Skin 1 has no name.
  EXPECT_EQ(JointNames(arm->def),
            (std::vector<std::string>{"Spine", "node_8"}));
  EXPECT_EQ(JointParents(arm->def), (std::vector<int>{-1, 0}));
  // Armature and Hips are folded into the root.
  EXPECT_LT((arm->def.joints[0].rest.translation - Vector3d(0, 1.2, 1)).norm(),
            1e-15);
  EXPECT_NEAR(arm->def.joints[0].rest.scale, 0.01, 1e-18);
  EXPECT_TRUE(Skeleton::Create(arm->def).ok());
}

// A skin named as exporters name every skin ("skin", assimp's) is listed
// by the file's name; a telling name is kept (issue 46).
TEST(GltfImportTest, AGenericSkinNameGivesWayToTheFilesStem) {
  const absl::StatusOr<ImportedSkeleton> bcn = ImportGltf(
      absl::StrCat(REACH_TEST_DATA, "/rigs/BCN_Epileptic.glb"));
  ASSERT_TRUE(bcn.ok()) << bcn.status();
  EXPECT_EQ(bcn->name, "BCN_Epileptic");  // Its skin is "skin".

  std::string arm;
  ASSERT_TRUE(ReadFile(GltfPath("arm.gltf"), &arm).ok());
  const auto named = [&](const std::string& skin_name) {
    std::string text = arm;
    const std::string from = "\"name\": \"ArmRig\"";
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos);
    text.replace(at, from.size(), "\"name\": \"" + skin_name + "\"");
    const absl::StatusOr<ImportedSkeleton> imported =
        ParseGltf(text, "dir/left_arm_rig.gltf");
    EXPECT_TRUE(imported.ok()) << imported.status();
    return imported.ok() ? imported->name : "";
  };
  for (const char* generic : {"skin", "Skin", "skin0", "Skin_1", "Armature",
                              "Armature.001", "skeleton", "rig", " "}) {
    EXPECT_EQ(named(generic), "left_arm_rig") << generic;
  }
  for (const char* telling : {"ArmRig", "Mannequin", "skinny", "Armature Bob"}) {
    EXPECT_EQ(named(telling), telling);
  }
}

TEST(GltfImportTest, MissingFileIsNotFound) {
  const std::string path = GltfPath("no_such_figure.gltf");
  const absl::StatusOr<ImportedSkeleton> result = ImportGltf(path);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(result.status().message()), HasSubstr(path));
}

// One file (or skin index) per error, and the exact text expected after
// the file's path.
struct BadGltf {
  const char* file;
  int skin_index;
  const char* message;
};

TEST(GltfImportTest, RejectsBadFilesNamingFileAndElement) {
  const BadGltf cases[] = {
      // nlohmann's parse error carries the JSON line, which leads the text.
      {"bad_truncated.gltf", 0,
       ":16: cannot load glTF: [json.exception.parse_error.101] parse error "
       "at line 16, column 23"},
      {"bad_truncated.glb", 0, ": cannot load glTF: "},
      {"bad_no_skins.gltf", 0,
       ": has no skins; a skeleton is imported from a skin"},
      {"arm.gltf", 2, ": skin 2: does not exist: the file has 2 skins"},
      {"arm.gltf", -1, ": skin -1: does not exist: the file has 2 skins"},
      {"bad_nonuniform_scale.gltf", 0,
       ": node 1 'LeftArm': scale [1, 2, 1] is not uniform; Reach supports "
       "uniform scale only"},
      {"bad_nonuniform_matrix.gltf", 0,
       ": node 0 'Armature': scale [1, 1, 3] is not uniform; Reach supports "
       "uniform scale only"},
      {"bad_two_parents.gltf", 0,
       ": node 2 'Spine': is a child of both node 0 and node 1; glTF nodes "
       "form a tree"},
      {"bad_joint_index.gltf", 0,
       ": skin 0 'Rig': joints[2] = 7 is not a node (the file has 2 nodes)"},
      {"bad_child_index.gltf", 0,
       ": node 0 'Hips': child 5 is not a node (the file has 2 nodes)"},
      {"bad_cycle.gltf", 0,
       ": node 0 'Hips': is its own ancestor; glTF nodes form a tree"},
      {"figure.fbx", 0,
       ": unknown extension; a glTF file ends in .gltf (JSON) or .glb "
       "(binary)"},
  };
  for (const BadGltf& bad : cases) {
    SCOPED_TRACE(absl::StrCat(bad.file, " skin ", bad.skin_index));
    const std::string path = GltfPath(bad.file);
    const absl::StatusOr<ImportedSkeleton> result =
        ImportGltf(path, bad.skin_index);
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(result.status().message()),
                HasSubstr(absl::StrCat(path, bad.message)));
  }
}

// bench/data/bcn_epileptic.skeleton.json, made from BCN_Epileptic.glb by
// this importer (bench/data/make_bcn_epileptic), is a valid skeleton of
// the skin's 54 joints, one root, with the four limb chains and the rig's
// own proportions (shins longer than thighs).
TEST(GltfImportTest, BenchRigBcnEpilepticLoadsWithItsLimbChains) {
  const absl::StatusOr<v1::Skeleton> wire = LoadSkeletonFile(absl::StrCat(
      REACH_TEST_DATA, "/../../bench/data/bcn_epileptic.skeleton.json"));
  ASSERT_TRUE(wire.ok()) << wire.status();
  SkeletonDef def;
  ASSERT_TRUE(FromProto(*wire, &def).ok());
  const absl::StatusOr<Skeleton> skeleton = Skeleton::Create(def);
  ASSERT_TRUE(skeleton.ok()) << skeleton.status();
  ASSERT_EQ(skeleton->num_joints(), 54);
  int roots = 0;
  for (const Joint& j : skeleton->joints()) {
    roots += j.parent < 0;
    EXPECT_EQ(j.type, JointType::kBall) << j.name;
  }
  EXPECT_EQ(roots, 1);
  EXPECT_EQ(skeleton->joint(0).name, "B_Root_Pelvis_L");
  const std::vector<std::pair<std::string, std::vector<std::string>>> chains =
      {{"left_leg", {"B_Hip_Left", "B_Knee_Left", "B_Ankle_Left"}},
       {"right_leg", {"B_Hip_Right", "B_Knee_Right", "B_Ankle_Right"}},
       {"left_arm", {"B_UpperArm_Left", "B_ForeArm_Left", "B_Hand_Left"}},
       {"right_arm", {"B_UpperArm_Right", "B_ForeArm_Right", "B_Hand_Right"}}};
  ASSERT_EQ(skeleton->num_chains(), 4);
  for (const auto& [name, joints] : chains) {
    const int c = skeleton->FindChain(name);
    ASSERT_GE(c, 0) << name;
    std::vector<std::string> names;
    for (int j : skeleton->chain(c).joints) {
      names.push_back(skeleton->joint(j).name);
    }
    EXPECT_EQ(names, joints) << name;
  }
  const auto& rest = skeleton->rest_globals();
  const auto at = [&](const char* name) {
    return rest[skeleton->FindJoint(name)].translation;
  };
  EXPECT_NEAR((at("B_Knee_Left") - at("B_Hip_Left")).norm(), 0.3875, 1e-3);
  EXPECT_NEAR((at("B_Ankle_Left") - at("B_Knee_Left")).norm(), 0.438, 1e-3);
}

}  // namespace
}  // namespace reach::import
