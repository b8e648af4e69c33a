#include "wire/convert.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "solvers/limits.h"
#include "tests/testing/models.h"

namespace reach {
namespace {

using ::testing::HasSubstr;

TEST(ConvertTest, SkeletonRoundTripsThroughTheWire) {
  const SkeletonDef panda = testing::PandaDef();
  v1::Skeleton wire;
  ToProto(panda, &wire);
  SkeletonDef back;
  ASSERT_TRUE(FromProto(wire, &back).ok());
  ASSERT_EQ(back.joints.size(), panda.joints.size());
  for (size_t i = 0; i < panda.joints.size(); ++i) {
    const JointDef& a = panda.joints[i];
    const JointDef& b = back.joints[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.parent, b.parent);
    EXPECT_EQ(a.type, b.type);
    EXPECT_EQ(a.min_angle_rad, b.min_angle_rad);
    EXPECT_EQ(a.max_angle_rad, b.max_angle_rad);
    EXPECT_EQ(a.max_swing_rad, b.max_swing_rad);
    EXPECT_TRUE(a.rest.translation == b.rest.translation);
    EXPECT_TRUE(a.rest.rotation.coeffs() == b.rest.rotation.coeffs());
  }
  EXPECT_EQ(back.chains.size(), panda.chains.size());
}

TEST(ConvertTest, UnsetFieldsMeanTheDocumentedDefaults) {
  v1::Skeleton wire;
  v1::Joint* joint = wire.add_joints();
  joint->set_name("root");
  joint->set_parent(-1);
  SkeletonDef def;
  ASSERT_TRUE(FromProto(wire, &def).ok());
  const JointDef& j = def.joints[0];
  EXPECT_EQ(j.type, JointType::kBall);
  EXPECT_TRUE(j.rest.rotation.coeffs() ==
              Eigen::Quaterniond::Identity().coeffs());
  EXPECT_EQ(j.rest.scale, 1.0);
  // Unlimited is infinity, never a finite sentinel.
  EXPECT_EQ(j.min_angle_rad, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(j.max_angle_rad, std::numeric_limits<double>::infinity());
  EXPECT_EQ(j.max_swing_rad, std::numeric_limits<double>::infinity());

  const Skeleton skeleton = *Skeleton::Create(testing::TwoBoneLegDef());
  google::protobuf::RepeatedPtrField<v1::Goal> goals;
  v1::Goal* goal = goals.Add();
  goal->set_chain("leg");
  goal->mutable_target();
  std::vector<Goal> out;
  ASSERT_TRUE(FromProto(skeleton, goals, &out).ok());
  EXPECT_EQ(out[0].weight, 1.0);
  EXPECT_FALSE(out[0].pole.has_value());
  EXPECT_FALSE(out[0].target_orientation.has_value());
  EXPECT_EQ(out[0].solver, SolverKind::kAuto);
}

TEST(ConvertTest, StiffnessRoundTripsAndStaysUnsetAtItsDefault) {
  SkeletonDef def = testing::HumanoidDef();
  def.joints[0].stiffness = 0.8;
  def.joints[11].stiffness = 0.25;
  v1::Skeleton wire;
  ToProto(def, &wire);
  EXPECT_TRUE(wire.joints(0).has_stiffness());
  EXPECT_EQ(wire.joints(0).stiffness(), 0.8);
  EXPECT_EQ(wire.joints(11).stiffness(), 0.25);
  // Joints at the default carry nothing, so their bytes (and a skeleton's
  // content-hash id) are what they were before the field existed.
  EXPECT_FALSE(wire.joints(1).has_stiffness());
  SkeletonDef back;
  ASSERT_TRUE(FromProto(wire, &back).ok());
  for (size_t i = 0; i < def.joints.size(); ++i) {
    EXPECT_EQ(back.joints[i].stiffness, def.joints[i].stiffness) << i;
  }
  // Out of range reaches Skeleton::Create, which names the joint.
  wire.mutable_joints(3)->set_stiffness(1.5);
  ASSERT_TRUE(FromProto(wire, &back).ok());
  const absl::StatusOr<Skeleton> bad = Skeleton::Create(back);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("joints[3].stiffness"));
}

TEST(ConvertTest, FullBodyGoalNamesItsEffectorByTipJoint) {
  const Skeleton skeleton = *Skeleton::Create(testing::HumanoidDef());
  google::protobuf::RepeatedPtrField<v1::Goal> goals;
  v1::Goal* look = goals.Add();
  look->set_solver(v1::SOLVER_FULL_BODY);
  look->set_tip_joint("head");
  ToProto(Eigen::Vector3d(0, 1.7, 2), look->mutable_target());
  ToProto(Eigen::Vector3d(0, 0, 2), look->mutable_aim_axis());
  look->set_priority(2);
  v1::Goal* hand = goals.Add();
  hand->set_solver(v1::SOLVER_FULL_BODY);
  hand->set_chain("l_arm");
  ToProto(Eigen::Vector3d(0.3, 1.2, 0.3), hand->mutable_target());
  hand->set_priority(1);
  std::vector<Goal> out;
  ASSERT_TRUE(FromProto(skeleton, goals, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].solver, SolverKind::kFullBody);
  EXPECT_EQ(out[0].chain, -1);
  EXPECT_EQ(out[0].tip_joint, skeleton.FindJoint("head"));
  EXPECT_EQ(out[0].root_joint, -1);  // Optional for a full-body goal.
  ASSERT_TRUE(out[0].aim_axis.has_value());
  EXPECT_TRUE(*out[0].aim_axis == Eigen::Vector3d(0, 0, 2));
  EXPECT_EQ(out[0].priority, 2);
  EXPECT_EQ(out[1].chain, skeleton.FindChain("l_arm"));
  EXPECT_FALSE(out[1].aim_axis.has_value());
  EXPECT_EQ(out[1].priority, 1);

  // root_joint, when given, names the limb the pole turns.
  look->set_root_joint("neck");
  ASSERT_TRUE(FromProto(skeleton, goals, &out).ok());
  EXPECT_EQ(out[0].root_joint, skeleton.FindJoint("neck"));
  look->set_root_joint("tail");
  absl::Status status = FromProto(skeleton, goals, &out);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("goals[0].root_joint"));
  look->clear_root_joint();

  // Without a chain the effector is required.
  look->clear_tip_joint();
  status = FromProto(skeleton, goals, &out);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("goals[0].tip_joint"));
  look->set_tip_joint("nose");
  status = FromProto(skeleton, goals, &out);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("goals[0].tip_joint"));

  // Any other solver still needs a chain or both joints.
  look->set_tip_joint("head");
  look->set_solver(v1::SOLVER_JACOBIAN_DLS);
  status = FromProto(skeleton, goals, &out);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("goals[0].chain"));
}

TEST(ConvertTest, FullBodyOptionsResolveTheRootAndRejectUnknownValues) {
  const Skeleton skeleton = *Skeleton::Create(testing::HumanoidDef());
  FullBodyOptions out;
  out.root_joint = 5;
  out.max_iterations = 9;
  // Unset: every default.
  ASSERT_TRUE(FromProto(skeleton, v1::FullBodyOptions(), &out).ok());
  EXPECT_EQ(out.root_joint, -1);
  EXPECT_EQ(out.root_mode, RootMode::kFree);
  EXPECT_EQ(out.root_translation_stiffness, 0.0);
  EXPECT_EQ(out.max_iterations, 0);
  EXPECT_EQ(out.time_budget_ms, 0.0);
  EXPECT_EQ(out.body, BodyMode::kHuman);
  EXPECT_FALSE(out.plant_feet);

  v1::FullBodyOptions in;
  in.set_root_joint("spine0");
  in.set_root_translation_stiffness(0.5);
  in.set_max_iterations(200);
  in.set_time_budget_ms(3.5);
  const std::pair<v1::RootMode, RootMode> modes[] = {
      {v1::ROOT_MODE_FREE, RootMode::kFree},
      {v1::ROOT_MODE_PINNED, RootMode::kPinned},
      {v1::ROOT_MODE_PRE_PULL, RootMode::kPrePull}};
  for (const auto& [wire, mode] : modes) {
    in.set_root_mode(wire);
    ASSERT_TRUE(FromProto(skeleton, in, &out).ok());
    EXPECT_EQ(out.root_mode, mode);
  }
  EXPECT_EQ(out.root_joint, skeleton.FindJoint("spine0"));
  EXPECT_EQ(out.root_translation_stiffness, 0.5);
  EXPECT_EQ(out.max_iterations, 200);
  EXPECT_EQ(out.time_budget_ms, 3.5);

  in.set_body(v1::BODY_MODEL_NONE);
  in.set_plant_feet(true);
  ASSERT_TRUE(FromProto(skeleton, in, &out).ok());
  EXPECT_EQ(out.body, BodyMode::kNone);
  EXPECT_TRUE(out.plant_feet);
  EXPECT_TRUE(std::isnan(out.plant_height));  // Unset: no floor.
  in.set_plant_height(0.08);
  ASSERT_TRUE(FromProto(skeleton, in, &out).ok());
  EXPECT_EQ(out.plant_height, 0.08);
  in.set_plant_height(std::numeric_limits<double>::quiet_NaN());
  absl::Status floor_status = FromProto(skeleton, in, &out);
  EXPECT_EQ(floor_status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(floor_status.message(), HasSubstr("full_body.plant_height"));
  in.clear_plant_height();
  in.set_plant_feet(false);
  in.set_body(static_cast<v1::BodyModel>(9));
  absl::Status body_status = FromProto(skeleton, in, &out);
  EXPECT_EQ(body_status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(body_status.message(), HasSubstr("full_body.body"));
  in.set_body(v1::BODY_MODEL_HUMAN);

  in.set_root_mode(static_cast<v1::RootMode>(7));
  absl::Status status = FromProto(skeleton, in, &out);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("full_body.root_mode"));
  in.set_root_mode(v1::ROOT_MODE_FREE);
  in.set_root_joint("pelvis");
  status = FromProto(skeleton, in, &out);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("full_body.root_joint"));
  EXPECT_THAT(status.message(), HasSubstr("pelvis"));
}

TEST(ConvertTest, ResponseListsOnlyChangedJoints) {
  const Skeleton skeleton =
      *Skeleton::Create(testing::StraightChainDef(/*joints=*/4));
  Pose start;
  start.local.resize(4);
  Pose solved = start;
  solved.local[2].rotation =
      Eigen::Quaterniond(Eigen::AngleAxisd(0.3, Eigen::Vector3d::UnitZ()));
  solved.local[3].translation = Eigen::Vector3d(0, -0.5, 0);
  v1::SolveResponse response;
  ToProto(skeleton, start, solved, {}, &response);
  EXPECT_EQ(response.hinge_joints_size(), 0);  // Ball joints.
  EXPECT_EQ(response.hinge_angles_rad_size(), 0);
  ASSERT_EQ(response.rotated_joints_size(), 1);
  EXPECT_EQ(response.rotated_joints(0), 2u);
  ASSERT_EQ(response.rotations_size(), 4);
  const Eigen::Quaterniond& q = solved.local[2].rotation;
  EXPECT_EQ(response.rotations(0), q.w());
  EXPECT_EQ(response.rotations(1), q.x());
  EXPECT_EQ(response.rotations(2), q.y());
  EXPECT_EQ(response.rotations(3), q.z());
  ASSERT_EQ(response.translated_joints_size(), 1);
  EXPECT_EQ(response.translated_joints(0), 3u);
  ASSERT_EQ(response.translations_size(), 3);
  EXPECT_EQ(response.translations(1), -0.5);

  // Applied to the start pose, the response gives back the solved pose.
  Pose applied = start;
  ASSERT_TRUE(ApplyResponse(response, &applied).ok());
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(applied.local[i].rotation.coeffs(),
              solved.local[i].rotation.coeffs()) << i;
    EXPECT_EQ(applied.local[i].translation, solved.local[i].translation) << i;
  }
}

// A hinge's angle is reported inside its range exactly, and its rotation
// regenerated from that angle: a rotation a few ulp past a bound reports
// the bound; an unlimited hinge's angle is in [-pi, pi].
TEST(ConvertTest, ResponseCarriesHingeAnglesWithinLimits) {
  SkeletonDef def = testing::StraightChainDef(/*joints=*/4);
  for (int k : {1, 2}) {
    def.joints[k].type = JointType::kHinge;
    def.joints[k].axis = Eigen::Vector3d(0.2, 0.3, 1.0);
    def.joints[k].rest.rotation =
        AxisAngle(Eigen::Vector3d(1, -2, 0.5).normalized(), 0.8);
  }
  def.joints[1].min_angle_rad = -0.5;
  def.joints[1].max_angle_rad = 1.0;
  const Skeleton skeleton = *Skeleton::Create(def);
  const Joint& limited = skeleton.joint(1);
  const Joint& free = skeleton.joint(2);
  const Pose start = RestPose(skeleton);
  Pose solved = start;
  // Past the bound by rounding: HingeAngle would read it outside [-0.5, 1].
  double past = 1.0;
  for (int u = 0; u < 3; ++u) past = std::nextafter(past, 2.0);
  solved.local[1].rotation = HingeRotation(limited, past);
  solved.local[2].rotation = HingeRotation(free, 4.0);  // = 4 - 2pi.
  solved.local[0].rotation = AxisAngle(Eigen::Vector3d::UnitX(), 0.2);  // Ball.

  v1::SolveResponse response;
  ToProto(skeleton, start, solved, {}, &response);
  ASSERT_EQ(response.rotated_joints_size(), 3);
  ASSERT_EQ(response.hinge_joints_size(), 2);
  ASSERT_EQ(response.hinge_angles_rad_size(), 2);
  EXPECT_EQ(response.hinge_joints(0), 1u);
  EXPECT_EQ(response.hinge_joints(1), 2u);
  EXPECT_EQ(response.hinge_angles_rad(0), 1.0);
  EXPECT_NEAR(response.hinge_angles_rad(1), 4.0 - 2 * M_PI, 1e-14);
  for (int h = 0; h < 2; ++h) {
    const Joint& joint = skeleton.joint(response.hinge_joints(h));
    const Eigen::Quaterniond want =
        HingeRotation(joint, response.hinge_angles_rad(h));
    const double* q = response.rotations().data() + 4 * (h + 1);
    EXPECT_EQ(q[0], want.w()) << h;
    EXPECT_EQ(q[1], want.x()) << h;
    EXPECT_EQ(q[2], want.y()) << h;
    EXPECT_EQ(q[3], want.z()) << h;
  }
  // The ball joint's rotation goes out as solved.
  EXPECT_EQ(response.rotations(0), solved.local[0].rotation.w());
  EXPECT_EQ(response.rotations(1), solved.local[0].rotation.x());
}

TEST(ConvertTest, ApplyResponseRejectsMismatchedArrays) {
  Pose pose;
  pose.local.resize(4);
  v1::SolveResponse response;
  response.add_rotated_joints(1);
  for (int i = 0; i < 3; ++i) response.add_rotations(0.5);
  EXPECT_THAT(ApplyResponse(response, &pose).message(),
              HasSubstr("rotations: has 3 numbers"));
  response.add_rotations(0.5);
  response.add_translated_joints(2);
  EXPECT_THAT(ApplyResponse(response, &pose).message(),
              HasSubstr("translations: has 0 numbers"));
  for (int i = 0; i < 3; ++i) response.add_translations(0.0);
  response.set_rotated_joints(0, 4);
  EXPECT_THAT(ApplyResponse(response, &pose).message(),
              HasSubstr("rotated_joints[0]: 4 is not below 4"));
  response.set_rotated_joints(0, 1);
  response.set_translated_joints(0, 9);
  EXPECT_THAT(ApplyResponse(response, &pose).message(),
              HasSubstr("translated_joints[0]: 9 is not below 4"));
  response.set_translated_joints(0, 2);
  EXPECT_TRUE(ApplyResponse(response, &pose).ok());
}

TEST(ConvertTest, StatusCodesCarryOver) {
  EXPECT_EQ(ToGrpcStatus(absl::NotFoundError("x")).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(ToGrpcStatus(absl::InvalidArgumentError("x")).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(ToGrpcStatus(absl::ResourceExhaustedError("m")).error_message(),
            "m");
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  v1::Error error;
  ToProto(absl::InvalidArgumentError("goals[0].target"), &error);
  EXPECT_EQ(error.code(), 3);
  EXPECT_THAT(error.message(), HasSubstr("goals[0]"));
}

}  // namespace
}  // namespace reach
