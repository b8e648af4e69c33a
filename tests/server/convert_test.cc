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
  ASSERT_EQ(response.joints_size(), 2);
  EXPECT_EQ(response.joints(0).joint(), 2u);
  EXPECT_FALSE(response.joints(0).has_translation());
  EXPECT_EQ(response.joints(1).joint(), 3u);
  EXPECT_TRUE(response.joints(1).has_translation());
  EXPECT_EQ(response.joints(1).translation().y(), -0.5);
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
