// URDF import: the Franka Emika Panda checked joint by joint and by forward
// kinematics against the hand-built PandaDef(), a branching robot with every
// supported joint type, and one malformed document per error the importer
// reports (each must name the file, the line and the joint or link).
#include "importers/urdf.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "solvers/limits.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"
#include "tests/testing/models.h"

namespace reach::import {
namespace {

using Eigen::Quaterniond;
using Eigen::Vector3d;
using ::testing::HasSubstr;

std::string UrdfPath(absl::string_view name) {
  return absl::StrCat(REACH_TEST_DATA, "/urdf/", name);
}

using testing::JointNames;
using testing::JointParents;

std::vector<Transform> Globals(const Skeleton& skeleton, const Pose& pose) {
  std::vector<Transform> globals(skeleton.num_joints());
  ComputeGlobals(skeleton, pose, absl::MakeSpan(globals));
  return globals;
}

// The URDF spec's rpy matrix written out (ROS urdfdom's Rotation::setFromRPY)
// rather than composed from axis rotations as the importer does.
Eigen::Matrix3d RpyMatrix(double roll, double pitch, double yaw) {
  const double cr = std::cos(roll), sr = std::sin(roll);
  const double cp = std::cos(pitch), sp = std::sin(pitch);
  const double cy = std::cos(yaw), sy = std::sin(yaw);
  Eigen::Matrix3d m;
  m << cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr,  //
      sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr,   //
      -sp, cp * sr, cp * cr;
  return m;
}

TEST(UrdfImportTest, PandaHasFrankaJointsLimitsAndOneChain) {
  const absl::StatusOr<ImportedSkeleton> panda =
      ImportUrdf(UrdfPath("panda.urdf"));
  ASSERT_TRUE(panda.ok()) << panda.status();
  EXPECT_EQ(panda->name, "panda");
  const SkeletonDef& def = panda->def;
  EXPECT_EQ(JointNames(def),
            (std::vector<std::string>{
                "panda_link0", "panda_joint1", "panda_joint2", "panda_joint3",
                "panda_joint4", "panda_joint5", "panda_joint6", "panda_joint7",
                "panda_joint8", "panda_hand_joint"}));
  EXPECT_EQ(JointParents(def), (std::vector<int>{-1, 0, 1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(def.joints[0].type, JointType::kFixed);
  for (int i = 1; i <= 7; ++i) {
    SCOPED_TRACE(def.joints[i].name);
    EXPECT_EQ(def.joints[i].type, JointType::kHinge);
    EXPECT_EQ(def.joints[i].axis, Vector3d::UnitZ());
    // Same decimal text as PandaLimits(), so the same doubles.
    EXPECT_EQ(def.joints[i].min_angle_rad, testing::PandaLimits()[i - 1].lo);
    EXPECT_EQ(def.joints[i].max_angle_rad, testing::PandaLimits()[i - 1].hi);
  }
  EXPECT_EQ(def.joints[8].type, JointType::kFixed);
  EXPECT_EQ(def.joints[9].type, JointType::kFixed);
  ASSERT_EQ(def.chains.size(), 1u);
  EXPECT_EQ(def.chains[0].name, "panda_hand_joint");
  EXPECT_EQ(def.chains[0].root, "panda_link0");
  EXPECT_EQ(def.chains[0].tip, "panda_hand_joint");

  const absl::StatusOr<Skeleton> skeleton = Skeleton::Create(def);
  ASSERT_TRUE(skeleton.ok()) << skeleton.status();
  EXPECT_EQ(skeleton->chain(0).joints.size(), 10u);
}

// At q = 0 the Panda stands with its flange at x = 0.088 (joint 7's offset)
// and z = 0.333 + 0.316 + 0.384 - 0.107, pointing down.
TEST(UrdfImportTest, PandaFlangeAtZeroPose) {
  const absl::StatusOr<ImportedSkeleton> panda =
      ImportUrdf(UrdfPath("panda.urdf"));
  ASSERT_TRUE(panda.ok()) << panda.status();
  const absl::StatusOr<Skeleton> skeleton = Skeleton::Create(panda->def);
  ASSERT_TRUE(skeleton.ok()) << skeleton.status();
  const std::vector<Transform> globals =
      Globals(*skeleton, RestPose(*skeleton));
  const Transform& flange = globals[skeleton->FindJoint("panda_joint8")];
  EXPECT_LT((flange.translation - Vector3d(0.088, 0, 0.926)).norm(), 1e-12);
  EXPECT_LT((flange.rotation * Vector3d::UnitZ() - Vector3d(0, 0, -1)).norm(),
            1e-12);
}

// Forward kinematics of the import equals PandaDef()'s on random poses:
// panda_link0 and panda_joint1..7 by name, PandaDef's panda_flange against
// the URDF's panda_joint8 (the flange), and the hand 45 degrees about the
// flange's Z.
TEST(UrdfImportTest, PandaForwardKinematicsMatchesPandaDef) {
  const absl::StatusOr<ImportedSkeleton> panda =
      ImportUrdf(UrdfPath("panda.urdf"));
  ASSERT_TRUE(panda.ok()) << panda.status();
  const absl::StatusOr<Skeleton> imported = Skeleton::Create(panda->def);
  ASSERT_TRUE(imported.ok()) << imported.status();
  const absl::StatusOr<Skeleton> reference =
      Skeleton::Create(testing::PandaDef());
  ASSERT_TRUE(reference.ok()) << reference.status();

  std::vector<std::pair<int, int>> pairs;  // (reference, imported)
  for (int i = 0; i < reference->num_joints(); ++i) {
    const std::string& name = reference->joint(i).name;
    const int j =
        imported->FindJoint(name == "panda_flange" ? "panda_joint8" : name);
    ASSERT_GE(j, 0) << name;
    pairs.emplace_back(i, j);
  }
  ASSERT_EQ(pairs.size(), 9u);
  const int flange = imported->FindJoint("panda_joint8");
  const int hand = imported->FindJoint("panda_hand_joint");
  const std::vector<int> ref_joints = testing::PandaJointIndices(*reference);

  testing::Rng rng(20240611);
  for (int trial = 0; trial < 200; ++trial) {
    SCOPED_TRACE(trial);
    Pose ref_pose = RestPose(*reference);
    Pose imp_pose = RestPose(*imported);
    for (int k = 0; k < 7; ++k) {
      const testing::JointRange& range = testing::PandaLimits()[k];
      const double angle =
          std::uniform_real_distribution<double>(range.lo, range.hi)(rng);
      const int r = ref_joints[k];
      const int m = imported->FindJoint(reference->joint(r).name);
      ref_pose.local[r].rotation = HingeRotation(reference->joint(r), angle);
      imp_pose.local[m].rotation = HingeRotation(imported->joint(m), angle);
    }
    const std::vector<Transform> ref = Globals(*reference, ref_pose);
    const std::vector<Transform> imp = Globals(*imported, imp_pose);
    for (const auto& [r, m] : pairs) {
      SCOPED_TRACE(reference->joint(r).name);
      EXPECT_LT((ref[r].translation - imp[m].translation).norm(), 1e-9);
      EXPECT_LT(AngleBetween(ref[r].rotation, imp[m].rotation), 1e-9);
    }
    EXPECT_LT((imp[hand].translation - imp[flange].translation).norm(), 1e-12);
    EXPECT_LT(AngleBetween(imp[hand].rotation,
                           imp[flange].rotation *
                               AxisAngle(Vector3d::UnitZ(), -M_PI / 4)),
              1e-9);
  }
}

TEST(UrdfImportTest, TurretOrdersTreeAndMapsEveryJointType) {
  const absl::StatusOr<ImportedSkeleton> turret =
      ImportUrdf(UrdfPath("turret.urdf"));
  ASSERT_TRUE(turret.ok()) << turret.status();
  EXPECT_EQ(turret->name, "turret");
  const SkeletonDef& def = turret->def;
  // Depth first from the root link, children in document order; the
  // <transmission>'s <joint name="pan"> is no joint.
  ASSERT_EQ(JointNames(def),
            (std::vector<std::string>{"base_link", "sensor_joint", "pan",
                                      "mount_joint", "tilt", "tilt_mimic"}));
  EXPECT_EQ(JointParents(def), (std::vector<int>{-1, 0, 0, 2, 3, 3}));

  const JointDef& base = def.joints[0];
  EXPECT_EQ(base.type, JointType::kFixed);
  EXPECT_EQ(base.rest.translation, Vector3d::Zero());

  const JointDef& sensor = def.joints[1];
  EXPECT_EQ(sensor.type, JointType::kFixed);
  EXPECT_EQ(sensor.rest.translation, Vector3d(0, 0.2, 0.05));
  EXPECT_EQ(sensor.rest.rotation.coeffs(), Quaterniond::Identity().coeffs());

  const JointDef& pan = def.joints[2];  // continuous
  EXPECT_EQ(pan.type, JointType::kHinge);
  EXPECT_EQ(pan.axis, Vector3d::UnitZ());
  EXPECT_EQ(pan.min_angle_rad, -kInf);
  EXPECT_EQ(pan.max_angle_rad, kInf);
  EXPECT_EQ(pan.rest.translation, Vector3d(0, 0, 0.1));

  const JointDef& mount = def.joints[3];
  EXPECT_EQ(mount.type, JointType::kFixed);
  EXPECT_LT(
      AngleBetween(mount.rest.rotation, AxisAngle(Vector3d::UnitZ(), M_PI / 2)),
      1e-15);

  const JointDef& tilt = def.joints[4];  // revolute without <axis>
  EXPECT_EQ(tilt.type, JointType::kHinge);
  EXPECT_EQ(tilt.axis, Vector3d::UnitX());
  EXPECT_EQ(tilt.min_angle_rad, -0.5);
  EXPECT_EQ(tilt.max_angle_rad, 1.0);
  EXPECT_EQ(tilt.rest.translation, Vector3d(0.1, 0, 0));
  EXPECT_LT((tilt.rest.rotation.toRotationMatrix() - RpyMatrix(0.1, 0.2, 0.3))
                .cwiseAbs()
                .maxCoeff(),
            1e-15);

  // Mimic joints move on their own in Reach; limits of a full turn or more
  // mean unlimited.
  const JointDef& mimic = def.joints[5];
  EXPECT_EQ(mimic.type, JointType::kHinge);
  EXPECT_EQ(mimic.axis, Vector3d(0, 2, 0));
  EXPECT_EQ(mimic.min_angle_rad, -kInf);
  EXPECT_EQ(mimic.max_angle_rad, kInf);

  ASSERT_EQ(def.chains.size(), 3u);
  const std::vector<std::string> tips = {"sensor_joint", "tilt", "tilt_mimic"};
  for (size_t i = 0; i < tips.size(); ++i) {
    EXPECT_EQ(def.chains[i].name, tips[i]);
    EXPECT_EQ(def.chains[i].root, "base_link");
    EXPECT_EQ(def.chains[i].tip, tips[i]);
  }

  const absl::StatusOr<Skeleton> skeleton = Skeleton::Create(def);
  ASSERT_TRUE(skeleton.ok()) << skeleton.status();
  EXPECT_EQ(skeleton->joint(5).axis, Vector3d::UnitY());
  // pan 0.1 up, mount 0.05 up and turned 90 degrees about Z, so tilt's
  // 0.1 along X lands on +Y.
  const std::vector<Transform> globals =
      Globals(*skeleton, RestPose(*skeleton));
  EXPECT_LT((globals[4].translation - Vector3d(0, 0.1, 0.15)).norm(), 1e-15);
  EXPECT_LT((globals[5].translation - Vector3d(0, -0.1, 0.15)).norm(), 1e-15);
}

TEST(UrdfImportTest, SingleLinkRobotIsOnlyItsRootJoint) {
  const absl::StatusOr<ImportedSkeleton> robot =
      ParseUrdf(R"(<robot name="post"><link name="base"/></robot>)", "x.urdf");
  ASSERT_TRUE(robot.ok()) << robot.status();
  EXPECT_EQ(JointNames(robot->def), std::vector<std::string>{"base"});
  EXPECT_TRUE(robot->def.chains.empty());
  EXPECT_TRUE(Skeleton::Create(robot->def).ok());
}

TEST(UrdfImportTest, RevoluteLimitBoundsDefaultToZero) {
  const absl::StatusOr<ImportedSkeleton> robot = ParseUrdf(
      R"(<robot name="r"><link name="a"/><link name="b"/>
  <joint name="j" type="revolute"><parent link="a"/><child link="b"/>
    <limit upper="0.5" effort="1" velocity="1"/></joint></robot>)",
      "x.urdf");
  ASSERT_TRUE(robot.ok()) << robot.status();
  EXPECT_EQ(robot->def.joints[1].min_angle_rad, 0.0);
  EXPECT_EQ(robot->def.joints[1].max_angle_rad, 0.5);
}

// Found by the urdf fuzzer: origins whose sum is beyond what a skeleton may
// span (kMaxSkeletonExtent) made a definition Skeleton::Create refuses; the
// importer refuses it itself, naming the joint.
TEST(UrdfImportTest, OriginsBeyondTheSkeletonExtentAreRejectedNamingTheJoint) {
  const absl::StatusOr<ImportedSkeleton> robot = ParseUrdf(
      R"(<robot name="far"><link name="a"/><link name="b"/><link name="c"/>
  <joint name="j1" type="fixed"><parent link="a"/><child link="b"/>
    <origin xyz="0 0 9e14"/></joint>
  <joint name="j2" type="fixed"><parent link="b"/><child link="c"/>
    <origin xyz="0 0 9e14"/></joint></robot>)",
      "far.urdf");
  ASSERT_FALSE(robot.ok());
  EXPECT_EQ(robot.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(robot.status().message(),
              HasSubstr("far.urdf: robot 'far': joints[2] 'j2'.rest: "));
  EXPECT_THAT(robot.status().message(), HasSubstr("the limit is 1e+15"));
}

// A serial robot of `joints` fixed joints below its root link.
std::string SerialRobot(int joints) {
  std::string text = "<robot name=\"snake\">\n<link name=\"l0\"/>\n";
  for (int i = 1; i <= joints; ++i) {
    absl::StrAppend(&text, "<link name=\"l", i, "\"/><joint name=\"j", i,
                    "\" type=\"fixed\"><parent link=\"l", i - 1,
                    "\"/><child link=\"l", i, "\"/></joint>\n");
  }
  return text + "</robot>\n";
}

// Chains hold at most kMaxChainJoints joints, root included.
TEST(UrdfImportTest, ChainLongerThanReachAllowsIsRejected) {
  const absl::StatusOr<ImportedSkeleton> longest =
      ParseUrdf(SerialRobot(kMaxChainJoints - 1), "snake.urdf");
  ASSERT_TRUE(longest.ok()) << longest.status();
  EXPECT_TRUE(Skeleton::Create(longest->def).ok());

  const absl::StatusOr<ImportedSkeleton> too_long =
      ParseUrdf(SerialRobot(kMaxChainJoints), "snake.urdf");
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      too_long.status().message(),
      absl::StrCat("snake.urdf:", kMaxChainJoints + 2, ": joint 'j",
                   kMaxChainJoints,
                   "': the chain from the root link to this leaf has ",
                   kMaxChainJoints + 1, " joints; a Reach chain has at most ",
                   kMaxChainJoints));
}

TEST(UrdfImportTest, MissingFileIsNotFound) {
  const std::string path = UrdfPath("no_such_robot.urdf");
  const absl::StatusOr<ImportedSkeleton> robot = ImportUrdf(path);
  EXPECT_EQ(robot.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(robot.status().message(), HasSubstr(path));
}

TEST(UrdfImportTest, PrismaticJointInFileNamesPathLineAndJoint) {
  const std::string path = UrdfPath("bad_prismatic.urdf");
  const absl::StatusOr<ImportedSkeleton> robot = ImportUrdf(path);
  EXPECT_EQ(robot.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(robot.status().message(),
            absl::StrCat(path,
                         ":10: joint 'slider': type 'prismatic' is not "
                         "supported (Reach joints rotate; supported: "
                         "revolute, continuous, fixed)"));
}

struct BadUrdf {
  const char* label;
  const char* text;
  int line;             // Expected in "bad.urdf:LINE:".
  const char* element;  // Expected in the message (may be empty).
  const char* detail;   // Expected in the message.
};

// Each document breaks one rule; the first line of each text is line 1.
const BadUrdf kBadUrdfs[] = {
    {"truncated XML",
     R"(<robot name="r">
  <link name="a"/>
  <link name="b"/>
  <joint name="j" type="fixed">
    <parent link="a"/>
    <child link="b"/>)",
     4, "", "malformed XML"},
    {"mismatched tag",
     R"(<robot name="r">
  <link name="a">
  </lnk>
</robot>)",
     2, "", "malformed XML: Error=XML_ERROR_MISMATCHED_ELEMENT"},
    {"prismatic",
     R"(<robot name="r">
  <link name="a"/><link name="b"/>
  <joint name="slider" type="prismatic">
    <parent link="a"/><child link="b"/>
  </joint>
</robot>)",
     3, "joint 'slider'",
     "type 'prismatic' is not supported (Reach joints rotate; supported: "
     "revolute, continuous, fixed)"},
    {"floating",
     R"(<robot name="r">
  <link name="a"/><link name="b"/>
  <joint name="free" type="floating">
    <parent link="a"/><child link="b"/>
  </joint>
</robot>)",
     3, "joint 'free'", "type 'floating' is not supported"},
    {"planar",
     R"(<robot name="r">
  <link name="a"/><link name="b"/>

  <joint name="table" type="planar">
    <parent link="a"/><child link="b"/>
  </joint>
</robot>)",
     4, "joint 'table'", "type 'planar' is not supported"},
    {"unknown type",
     R"(<robot name="r">
  <link name="a"/><link name="b"/>
  <joint name="elbow" type="revolving">
    <parent link="a"/><child link="b"/>
  </joint>
</robot>)",
     3, "joint 'elbow'", "unknown joint type 'revolving'"},
    {"missing type",
     R"(<robot name="r">
  <link name="a"/><link name="b"/>
  <joint name="elbow">
    <parent link="a"/><child link="b"/>
  </joint>
</robot>)",
     3, "joint 'elbow'", "<joint> has no 'type' attribute"},
    {"missing joint name",
     R"(<robot name="r">
  <link name="a"/><link name="b"/>
  <joint type="fixed">
    <parent link="a"/><child link="b"/>
  </joint>
</robot>)",
     3, "joint", "<joint> has no 'name' attribute"},
    {"missing link name",
     R"(<robot name="r">
  <link name="a"/>
  <link/>
</robot>)",
     3, "link", "<link> has no 'name' attribute"},
    {"missing robot name",
     R"(<robot>
  <link name="a"/>
</robot>)",
     1, "robot", "<robot> has no 'name' attribute"},
    {"not a robot", R"(<sdf version="1.6"/>)", 1, "", "not <robot>"},
    {"missing parent",
     R"(<robot name="r">
  <link name="a"/><link name="b"/>
  <joint name="elbow" type="fixed">
    <child link="b"/>
  </joint>
</robot>)",
     3, "joint 'elbow'", "missing <parent link=\"...\"/>"},
    {"revolute without limit",
     R"(<robot name="r">
  <link name="a"/><link name="b"/>
  <joint name="elbow" type="revolute">
    <parent link="a"/><child link="b"/>
    <axis xyz="0 0 1"/>
  </joint>
</robot>)",
     3, "joint 'elbow'", "a revolute joint needs <limit"},
    {"lower above upper",
     R"(<robot name="r">
  <link name="a"/><link name="b"/>
  <joint name="elbow" type="revolute">
    <parent link="a"/><child link="b"/>
    <limit lower="1" upper="-1" effort="1" velocity="1"/>
  </joint>
</robot>)",
     5, "joint 'elbow'", "lower 1 exceeds upper -1"},
    {"limit beyond two pi",
     R"(<robot name="r">
  <link name="a"/><link name="b"/>
  <joint name="elbow" type="revolute">
    <parent link="a"/><child link="b"/>
    <limit lower="6.5" upper="7" effort="1" velocity="1"/>
  </joint>
</robot>)",
     5, "joint 'elbow'", "beyond [-2pi, 2pi]"},
    {"bad number in origin",
     R"(<robot name="r">
  <link name="a"/><link name="b"/>
  <joint name="elbow" type="fixed">
    <parent link="a"/><child link="b"/>
    <origin xyz="1.0 abc 0"/>
  </joint>
</robot>)",
     5, "joint 'elbow'", "<origin xyz=\"1.0 abc 0\">: expected 3 finite"},
    {"two numbers for three",
     R"(<robot name="r">
  <link name="a"/><link name="b"/>
  <joint name="elbow" type="fixed">
    <parent link="a"/><child link="b"/>
    <origin rpy="0 1"/>
  </joint>
</robot>)",
     5, "joint 'elbow'", "<origin rpy=\"0 1\">"},
    {"bad limit number",
     R"(<robot name="r">
  <link name="a"/><link name="b"/>
  <joint name="elbow" type="revolute">
    <parent link="a"/><child link="b"/>
    <limit lower="-1.5rad" upper="1" effort="1" velocity="1"/>
  </joint>
</robot>)",
     5, "joint 'elbow'", "<limit lower=\"-1.5rad\">: expected 1 finite number"},
    {"zero axis",
     R"(<robot name="r">
  <link name="a"/><link name="b"/>
  <joint name="wrist" type="continuous">
    <parent link="a"/><child link="b"/>
    <axis xyz="0 0 0"/>
  </joint>
</robot>)",
     5, "joint 'wrist'", "<axis xyz> is zero"},
    {"cycle",
     R"(<robot name="r">
  <link name="a"/><link name="b"/><link name="c"/>
  <joint name="ab" type="fixed"><parent link="a"/><child link="b"/></joint>
  <joint name="bc" type="fixed"><parent link="b"/><child link="c"/></joint>
  <joint name="ca" type="fixed"><parent link="c"/><child link="a"/></joint>
</robot>)",
     3, "joint 'ab'",
     "the joints form a cycle through links 'a' -> 'b' -> 'c' -> 'a'"},
    {"cycle beside a root",
     R"(<robot name="r">
  <link name="base"/><link name="a"/><link name="b"/>
  <joint name="base_a" type="fixed"><parent link="base"/><child link="a"/></joint>
  <joint name="ab" type="fixed"><parent link="a"/><child link="b"/></joint>
  <joint name="ba" type="fixed"><parent link="b"/><child link="a"/></joint>
</robot>)",
     5, "joint 'ba'", "link 'a' is already the child of joint 'base_a'"},
    {"cycle apart from the root",
     R"(<robot name="r">
  <link name="base"/><link name="a"/><link name="b"/>
  <joint name="ab" type="fixed"><parent link="a"/><child link="b"/></joint>
  <joint name="ba" type="fixed"><parent link="b"/><child link="a"/></joint>
</robot>)",
     3, "joint 'ab'", "cycle through links 'a' -> 'b' -> 'a'"},
    {"joint to itself",
     R"(<robot name="r">
  <link name="a"/>
  <joint name="loop" type="fixed"><parent link="a"/><child link="a"/></joint>
</robot>)",
     3, "joint 'loop'", "connects link 'a' to itself"},
    {"two roots",
     R"(<robot name="r">
  <link name="base"/>
  <link name="arm"/>
  <link name="stray"/>
  <joint name="shoulder" type="fixed">
    <parent link="base"/><child link="arm"/>
  </joint>
</robot>)",
     4, "link 'stray'", "second root link"},
    {"unknown child link",
     R"(<robot name="r">
  <link name="base"/>
  <joint name="shoulder" type="fixed">
    <parent link="base"/><child link="upper_arm"/>
  </joint>
</robot>)",
     3, "joint 'shoulder'", "child link 'upper_arm' is not defined"},
    {"unknown parent link",
     R"(<robot name="r">
  <link name="arm"/>
  <joint name="shoulder" type="fixed">
    <parent link="bsae"/><child link="arm"/>
  </joint>
</robot>)",
     3, "joint 'shoulder'", "parent link 'bsae' is not defined"},
    {"duplicate joint name",
     R"(<robot name="r">
  <link name="a"/><link name="b"/><link name="c"/>
  <joint name="j" type="fixed"><parent link="a"/><child link="b"/></joint>
  <joint name="j" type="fixed"><parent link="b"/><child link="c"/></joint>
</robot>)",
     4, "joint 'j'", "duplicate joint name (first defined at line 3)"},
    {"duplicate link name",
     R"(<robot name="r">
  <link name="a"/>
  <link name="a"/>
</robot>)",
     3, "link 'a'", "duplicate link name (first defined at line 2)"},
    {"two parent joints",
     R"(<robot name="r">
  <link name="a"/><link name="b"/><link name="c"/>
  <joint name="ac" type="fixed"><parent link="a"/><child link="c"/></joint>
  <joint name="bc" type="fixed"><parent link="b"/><child link="c"/></joint>
</robot>)",
     4, "joint 'bc'",
     "link 'c' is already the child of joint 'ac' (line 3); a link has one "
     "parent joint"},
    {"joint named like the root link",
     R"(<robot name="r">
  <link name="base"/><link name="b"/>
  <joint name="base" type="fixed"><parent link="base"/><child link="b"/></joint>
</robot>)",
     3, "joint 'base'", "has the name of the root link"},
    {"no links", R"(<robot name="r">
</robot>)",
     1, "robot 'r'", "has no <link>"},
};

TEST(UrdfImportTest, RejectsMalformedDocumentsNamingFileLineAndElement) {
  for (const BadUrdf& bad : kBadUrdfs) {
    SCOPED_TRACE(bad.label);
    const absl::StatusOr<ImportedSkeleton> robot =
        ParseUrdf(bad.text, "bad.urdf");
    ASSERT_FALSE(robot.ok());
    EXPECT_EQ(robot.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(robot.status().message());
    EXPECT_THAT(message, HasSubstr(absl::StrCat("bad.urdf:", bad.line, ": ")));
    EXPECT_THAT(message, HasSubstr(bad.element));
    EXPECT_THAT(message, HasSubstr(bad.detail));
  }
}

}  // namespace
}  // namespace reach::import
