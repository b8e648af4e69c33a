#include "server/convert.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
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

TEST(ConvertTest, ResponseListsOnlyChangedJoints) {
  Pose start;
  start.local.resize(4);
  Pose solved = start;
  solved.local[2].rotation =
      Eigen::Quaterniond(Eigen::AngleAxisd(0.3, Eigen::Vector3d::UnitZ()));
  solved.local[3].translation = Eigen::Vector3d(0, -0.5, 0);
  v1::SolveResponse response;
  ToProto(start, solved, {}, &response);
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
