// wire/api_json.h: the HTTP API's JSON, both ways.
#include "wire/api_json.h"

#include <cmath>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "reach/v1/ik_service.pb.h"
#include "reach/v1/retarget.pb.h"

namespace reach {
namespace {

using ::testing::HasSubstr;

TEST(ApiJsonTest, ReadsVectorsAndRotationsAsArrays) {
  v1::SolveRequest request;
  ASSERT_TRUE(ApiJsonToMessage(
                  R"({"skeleton_id": "abc", "sequence": 7,
                      "goals": [{"chain": "arm", "target": [1, 2, 3],
                                 "target_orientation": [0.1, 0.2, 0.3, 0.9]}],
                      "start_pose": {"rotations": [[0, 0, 0, 1]],
                                     "root_translation": [4, 5, 6]}})",
                  &request)
                  .ok());
  EXPECT_EQ(request.skeleton_id(), "abc");
  EXPECT_EQ(request.sequence(), 7u);
  const v1::Goal& goal = request.goals(0);
  EXPECT_EQ(goal.target().x(), 1);
  EXPECT_EQ(goal.target().y(), 2);
  EXPECT_EQ(goal.target().z(), 3);
  // [x, y, z, w]: w last.
  EXPECT_EQ(goal.target_orientation().x(), 0.1);
  EXPECT_EQ(goal.target_orientation().w(), 0.9);
  EXPECT_EQ(request.start_pose().rotations(0).w(), 1);
  EXPECT_EQ(request.start_pose().root_translation().z(), 6);
}

TEST(ApiJsonTest, ReadsProtobufObjectsAndCamelCaseToo) {
  v1::SolveRequest request;
  ASSERT_TRUE(ApiJsonToMessage(
                  R"({"skeletonId": "abc",
                      "goals": [{"chain": "arm", "target": {"x": 1, "z": 3}}]})",
                  &request)
                  .ok());
  EXPECT_EQ(request.skeleton_id(), "abc");
  EXPECT_EQ(request.goals(0).target().z(), 3);
}

TEST(ApiJsonTest, NamesTheFieldOfAWrongArray) {
  v1::SolveRequest request;
  absl::Status status =
      ApiJsonToMessage(R"({"goals": [{}, {"target": [1, 2]}]})", &request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("goals[1].target: [x, y, z] needs 3"));
  status = ApiJsonToMessage(
      R"({"start_pose": {"rotations": [[0, 0, 0, 1], [0, true, 0, 1]]}})",
      &request);
  EXPECT_THAT(status.message(),
              HasSubstr("start_pose.rotations[1][1] (y) is not a number"));
  EXPECT_THAT(ApiJsonToMessage("[1, 2]", &request).message(),
              HasSubstr("not a JSON object"));
  EXPECT_THAT(ApiJsonToMessage("{", &request).message(), HasSubstr("not JSON"));
  EXPECT_FALSE(ApiJsonToMessage(R"({"nope": 1})", &request).ok());
}

TEST(ApiJsonTest, BareNanReachesTheField) {
  v1::SolveRequest request;
  ASSERT_TRUE(ApiJsonToMessage(
                  R"({"goals": [{"target": [NaN, 1, -Infinity]}]})", &request)
                  .ok());
  EXPECT_TRUE(std::isnan(request.goals(0).target().x()));
  EXPECT_EQ(request.goals(0).target().z(), -INFINITY);
}

TEST(ApiJsonTest, WritesArraysNumbersAndEveryField) {
  v1::SolveResponse response;
  response.set_sequence(12);
  response.add_rotated_joints(3);
  // (w, x, y, z) on the wire.
  for (double v : {0.5, 0.1, 0.2, 0.3}) response.add_rotations(v);
  response.add_translated_joints(0);
  for (double v : {1.0, 2.0, 3.0}) response.add_translations(v);
  v1::Transform* global = response.add_globals();
  global->mutable_translation()->set_y(2);
  global->mutable_rotation()->set_w(1);
  response.add_results()->set_reached(true);
  const absl::StatusOr<std::string> json = MessageToApiJson(response);
  ASSERT_TRUE(json.ok());
  EXPECT_THAT(*json, HasSubstr(R"("sequence":12)"));
  EXPECT_THAT(*json, HasSubstr(R"("rotations":[[0.1,0.2,0.3,0.5]])"));
  EXPECT_THAT(*json, HasSubstr(R"("translations":[[1,2,3]])"));
  EXPECT_THAT(*json, HasSubstr(R"("translation":[0,2,0])"));
  EXPECT_THAT(*json, HasSubstr(R"("rotation":[0,0,0,1])"));
  EXPECT_THAT(*json, HasSubstr(R"("skipped":false)"));
  EXPECT_THAT(*json, HasSubstr(R"("position_error":0)"));
  EXPECT_THAT(*json, HasSubstr(R"("hinge_joints":[])"));
}

TEST(ApiJsonTest, RoundTripsARetargetProfile) {
  v1::GetRetargetProfileResponse in;
  in.mutable_profile()->set_profile_id("p");
  in.mutable_profile()->set_version(int64_t{1} << 40);
  in.mutable_profile()->mutable_source()->mutable_up()->set_y(1);
  v1::Joint* joint = in.mutable_source_skeleton()->add_joints();
  joint->set_name("hips");
  joint->mutable_rest()->mutable_rotation()->set_x(1);
  joint->set_min_angle_rad(-0.5);
  const absl::StatusOr<std::string> json = MessageToApiJson(in);
  ASSERT_TRUE(json.ok());
  EXPECT_THAT(*json, HasSubstr(R"("version":1099511627776)"));
  EXPECT_THAT(*json, HasSubstr(R"("up":[0,1,0])"));
  v1::GetRetargetProfileResponse out;
  ASSERT_TRUE(ApiJsonToMessage(*json, &out).ok());
  EXPECT_EQ(out.SerializeAsString(), in.SerializeAsString());
}

}  // namespace
}  // namespace reach
