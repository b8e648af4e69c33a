// Every unary RPC against the real server on a loopback port.
#include "tests/testing/service.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "wire/convert.h"
#include "tests/testing/models.h"

namespace reach {
namespace {

using ::reach::testing::Context;
using ::reach::testing::MakeGoal;
using ::reach::testing::MustRegister;
using ::reach::testing::TestServer;
using ::reach::testing::TestServerOptions;
using ::reach::testing::ToWire;
using ::testing::HasSubstr;

// Where TwoBoneLegDef's hip sits in model space.
const Eigen::Vector3d kHip(0.1, 1.0, 0.0);

class ServiceTest : public ::testing::Test {
 protected:
  ServiceTest()
      : leg_def_(testing::TwoBoneLegDef()),
        leg_(*Skeleton::Create(leg_def_)),
        leg_id_(MustRegister(*server_.stub, ToWire(leg_def_, "leg"))) {}

  v1::SolveRequest LegRequest(const Eigen::Vector3d& target) {
    v1::SolveRequest request;
    request.set_skeleton_id(leg_id_);
    request.set_sequence(7);
    *request.add_goals() = MakeGoal("leg", target);
    return request;
  }

  TestServer server_;
  SkeletonDef leg_def_;
  Skeleton leg_;
  std::string leg_id_;
};

TEST_F(ServiceTest, RegisterIsIdempotentAndContentAddressed) {
  v1::RegisterSkeletonRequest request;
  *request.mutable_skeleton() = ToWire(leg_def_, "leg");
  v1::RegisterSkeletonResponse first, second;
  ASSERT_TRUE(server_.stub->RegisterSkeleton(Context().get(), request, &first)
                  .ok());
  ASSERT_TRUE(server_.stub->RegisterSkeleton(Context().get(), request, &second)
                  .ok());
  EXPECT_EQ(first.skeleton_id(), leg_id_);
  EXPECT_EQ(second.skeleton_id(), leg_id_);
  EXPECT_EQ(first.version(), second.version());
  EXPECT_FALSE(second.created());
  EXPECT_EQ(leg_id_.size(), 64u);  // Hex SHA-256.

  // A different definition gets a different id and the next version.
  request.mutable_skeleton()->set_name("another leg");
  v1::RegisterSkeletonResponse other;
  ASSERT_TRUE(server_.stub->RegisterSkeleton(Context().get(), request, &other)
                  .ok());
  EXPECT_NE(other.skeleton_id(), leg_id_);
  EXPECT_TRUE(other.created());
  EXPECT_EQ(other.version(), first.version() + 1);
}

TEST_F(ServiceTest, RegisterRejectsInvalidSkeletonNamingTheField) {
  v1::RegisterSkeletonRequest request;
  *request.mutable_skeleton() = ToWire(leg_def_, "bad");
  request.mutable_skeleton()->mutable_joints(2)->set_parent(5);
  v1::RegisterSkeletonResponse response;
  grpc::Status status =
      server_.stub->RegisterSkeleton(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("joints[2].parent"));

  *request.mutable_skeleton() = ToWire(leg_def_, "bad");
  request.mutable_skeleton()->mutable_joints(1)->mutable_rest()->mutable_rotation()
      ->set_w(std::numeric_limits<double>::quiet_NaN());
  status = server_.stub->RegisterSkeleton(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("joints[1].rest.rotation"));

  *request.mutable_skeleton() = ToWire(leg_def_, "bad");
  request.mutable_skeleton()->mutable_joints(1)->set_type(
      static_cast<v1::JointType>(42));
  status = server_.stub->RegisterSkeleton(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("joints[1].type"));

  request.clear_skeleton();
  status = server_.stub->RegisterSkeleton(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("skeleton"));
}

TEST(ServiceLimitsTest, MaxJointsIsEnforced) {
  ServerOptions options = TestServerOptions();
  options.max_joints = 3;
  TestServer server(options);
  v1::RegisterSkeletonRequest request;
  *request.mutable_skeleton() = ToWire(testing::HumanoidDef(), "humanoid");
  v1::RegisterSkeletonResponse response;
  const grpc::Status status =
      server.stub->RegisterSkeleton(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("joints"));
  // Exactly at the limit is fine.
  *request.mutable_skeleton() = ToWire(testing::TwoBoneLegDef(), "leg");
  EXPECT_TRUE(
      server.stub->RegisterSkeleton(Context().get(), request, &response).ok());
}

TEST_F(ServiceTest, GetListDelete) {
  v1::GetSkeletonRequest get;
  get.set_skeleton_id(leg_id_);
  v1::GetSkeletonResponse got;
  ASSERT_TRUE(server_.stub->GetSkeleton(Context().get(), get, &got).ok());
  EXPECT_EQ(got.skeleton().SerializeAsString(),
            ToWire(leg_def_, "leg").SerializeAsString());

  // Five more skeletons; list them two at a time.
  for (int i = 0; i < 5; ++i) {
    MustRegister(*server_.stub, ToWire(leg_def_, absl::StrCat("leg ", i)));
  }
  std::vector<std::string> names;
  std::string token;
  int pages = 0;
  do {
    v1::ListSkeletonsRequest list;
    list.set_page_size(2);
    list.set_page_token(token);
    v1::ListSkeletonsResponse page;
    ASSERT_TRUE(server_.stub->ListSkeletons(Context().get(), list, &page).ok());
    EXPECT_LE(page.skeletons_size(), 2);
    for (const auto& s : page.skeletons()) {
      names.push_back(s.name());
      EXPECT_EQ(s.joint_count(), 3);
      EXPECT_THAT(s.chains(), ::testing::ElementsAre("leg"));
    }
    token = page.next_page_token();
    ++pages;
  } while (!token.empty());
  EXPECT_EQ(pages, 3);
  EXPECT_THAT(names, ::testing::ElementsAre("leg", "leg 0", "leg 1", "leg 2",
                                            "leg 3", "leg 4"));

  v1::ListSkeletonsRequest bad_page;
  bad_page.set_page_token("not a token");
  v1::ListSkeletonsResponse unused;
  grpc::Status status =
      server_.stub->ListSkeletons(Context().get(), bad_page, &unused);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("page_token"));
  bad_page.set_page_token("");
  bad_page.set_page_size(100000);
  status = server_.stub->ListSkeletons(Context().get(), bad_page, &unused);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("page_size"));

  v1::DeleteSkeletonRequest del;
  del.set_skeleton_id(leg_id_);
  v1::DeleteSkeletonResponse deleted;
  ASSERT_TRUE(server_.stub->DeleteSkeleton(Context().get(), del, &deleted).ok());
  status = server_.stub->GetSkeleton(Context().get(), get, &got);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("skeleton_id"));
  status = server_.stub->DeleteSkeleton(Context().get(), del, &deleted);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServiceTest, SolveLandsOnTheTargetByIndependentForwardKinematics) {
  const Eigen::Vector3d target = kHip + Eigen::Vector3d(0.2, -0.6, 0.3);
  v1::SolveRequest request = LegRequest(target);
  request.set_return_globals(true);
  v1::SolveResponse response;
  ASSERT_TRUE(server_.stub->Solve(Context().get(), request, &response).ok());
  EXPECT_EQ(response.sequence(), 7u);
  ASSERT_EQ(response.results_size(), 1);
  EXPECT_TRUE(response.results(0).reached());
  EXPECT_EQ(response.results(0).solver(), v1::SOLVER_TWO_BONE);
  EXPECT_FALSE(response.rotated_joints().empty());

  const Pose solved = testing::ApplyResponse(RestPose(leg_), response);
  const Eigen::Vector3d tip = testing::PositionOf(leg_, solved, 2);
  EXPECT_LT((tip - target).norm(), 1e-6);
  EXPECT_NEAR(response.results(0).position_error(), (tip - target).norm(), 1e-9);
  ASSERT_EQ(response.globals_size(), 3);
  EXPECT_NEAR(response.globals(2).translation().x(), tip.x(), 1e-12);
  EXPECT_NEAR(response.globals(2).translation().y(), tip.y(), 1e-12);
}

TEST_F(ServiceTest, SolveFromAStartPoseAndByJointNames) {
  v1::SolveRequest request = LegRequest(kHip + Eigen::Vector3d(0.1, -0.5, 0.2));
  request.mutable_goals(0)->clear_chain();
  request.mutable_goals(0)->set_root_joint("hip");
  request.mutable_goals(0)->set_tip_joint("ankle");
  request.mutable_goals(0)->set_solver(v1::SOLVER_JACOBIAN_DLS);
  Pose start = RestPose(leg_);
  start.local[1].rotation =
      Eigen::Quaterniond(Eigen::AngleAxisd(0.5, Eigen::Vector3d::UnitX()));
  for (const Transform& local : start.local) {
    ToProto(local.rotation, request.mutable_start_pose()->add_rotations());
  }
  v1::SolveResponse response;
  ASSERT_TRUE(server_.stub->Solve(Context().get(), request, &response).ok());
  EXPECT_EQ(response.results(0).solver(), v1::SOLVER_JACOBIAN_DLS);
  EXPECT_TRUE(response.results(0).reached());
  const Pose solved = testing::ApplyResponse(start, response);
  EXPECT_LT((testing::PositionOf(leg_, solved, 2) -
             (kHip + Eigen::Vector3d(0.1, -0.5, 0.2)))
                .norm(),
            response.results(0).tolerance() * 1.0001);
}

// A request without a start pose starts from the rest pose, and lists only
// the joints its goals turned, even where the skeleton's rest rotation is
// unit only to within the accepted 1e-5 (the solve works on it normalised).
TEST_F(ServiceTest, SolveListsOnlyTheJointsItTurned) {
  SkeletonDef def = testing::HumanoidDef();
  const auto index = [&def](const std::string& name) {
    for (size_t j = 0; j < def.joints.size(); ++j) {
      if (def.joints[j].name == name) return static_cast<uint32_t>(j);
    }
    ADD_FAILURE() << name;
    return 0u;
  };
  JointDef& head = def.joints[index("head")];
  head.rest.rotation =
      Eigen::Quaterniond(Eigen::AngleAxisd(0.3, Eigen::Vector3d::UnitX()));
  head.rest.rotation.coeffs() *= 1.0 + 4e-6;
  const std::string id = MustRegister(*server_.stub, ToWire(def, "humanoid"));
  const Skeleton skeleton = *Skeleton::Create(def);
  const Pose rest = RestPose(skeleton);
  const Eigen::Vector3d shoulder =
      testing::PositionOf(skeleton, rest, static_cast<int>(index("l_shoulder")));
  const Eigen::Vector3d wrist =
      testing::PositionOf(skeleton, rest, static_cast<int>(index("l_wrist")));
  v1::SolveRequest request;
  request.set_skeleton_id(id);
  *request.add_goals() = MakeGoal(
      "l_arm", shoulder + 0.8 * (wrist - shoulder) + Eigen::Vector3d(0, 0.1, 0));
  v1::SolveResponse response;
  ASSERT_TRUE(server_.stub->Solve(Context().get(), request, &response).ok());
  EXPECT_TRUE(response.results(0).reached());
  EXPECT_THAT(response.rotated_joints(),
              ::testing::ElementsAre(index("l_shoulder"), index("l_elbow")));
  EXPECT_TRUE(response.translated_joints().empty());
}

// Checks a response's hinge angles against the skeleton: one per rotated
// hinge, strictly inside the range, and the wire rotation is the angle's
// (read back here: rest^-1 q = (cos(a/2), sin(a/2) axis)). Returns how many
// sat exactly at a bound.
int ExpectHingeAnglesWithinLimits(const Skeleton& skeleton,
                                  const v1::SolveResponse& response) {
  std::vector<uint32_t> rotated_hinges;
  for (uint32_t j : response.rotated_joints()) {
    if (skeleton.joint(j).type == JointType::kHinge)
      rotated_hinges.push_back(j);
  }
  EXPECT_THAT(response.hinge_joints(),
              ::testing::ElementsAreArray(rotated_hinges));
  EXPECT_EQ(response.hinge_angles_rad_size(), response.hinge_joints_size());
  int at_bound = 0;
  for (int h = 0;
       h < response.hinge_joints_size() && h < response.hinge_angles_rad_size();
       ++h) {
    const uint32_t j = response.hinge_joints(h);
    const Joint& joint = skeleton.joint(j);
    const double angle = response.hinge_angles_rad(h);
    EXPECT_TRUE(joint.min_angle_rad <= angle && angle <= joint.max_angle_rad)
        << joint.name << ": " << angle;
    at_bound += angle == joint.min_angle_rad || angle == joint.max_angle_rad;
    const int r =
        static_cast<int>(std::find(response.rotated_joints().begin(),
                                   response.rotated_joints().end(), j) -
                         response.rotated_joints().begin());
    const double* q = response.rotations().data() + 4 * r;
    const Eigen::Quaterniond rel = joint.rest.rotation.conjugate() *
                                   Eigen::Quaterniond(q[0], q[1], q[2], q[3]);
    const double along = rel.vec().dot(joint.axis);
    EXPECT_NEAR(2.0 * std::atan2(along, rel.w()), angle, 1e-14) << joint.name;
    EXPECT_LT((rel.vec() - along * joint.axis).norm(), 1e-15) << joint.name;
  }
  return at_bound;
}

// Every call that solves returns the angles of the hinges it moved, inside
// their limits exactly: Solve, SolveBatch (whose items are written straight
// from the solve) and SolveStream.
TEST_F(ServiceTest, ResponsesCarryHingeAnglesWithinLimits) {
  const SkeletonDef def = testing::PandaDef();
  const Skeleton panda = *Skeleton::Create(def);
  const std::string id = MustRegister(*server_.stub, ToWire(def, "panda"));
  testing::Rng rng(21);
  std::vector<v1::SolveRequest> requests;
  for (int i = 0; i < 40; ++i) {
    // Reachable targets, and far ones that stretch the arm into its limits.
    const Eigen::Vector3d target =
        i % 2 ? testing::GlobalOf(panda, testing::RandomPose(panda, rng, M_PI),
                                  panda.chain(0).joints.back())
                    .translation
              : Eigen::Vector3d(0.4 * std::cos(i), 0.4 * std::sin(i), 2.0);
    v1::SolveRequest& request = requests.emplace_back();
    request.set_skeleton_id(id);
    request.set_sequence(i);
    *request.add_goals() = MakeGoal("arm", target, v1::SOLVER_JACOBIAN_DLS);
  }
  int angles = 0, at_bound = 0;
  v1::SolveBatchRequest batch;
  for (const v1::SolveRequest& request : requests) {
    v1::SolveResponse response;
    ASSERT_TRUE(server_.stub->Solve(Context().get(), request, &response).ok());
    at_bound += ExpectHingeAnglesWithinLimits(panda, response);
    angles += response.hinge_angles_rad_size();
    *batch.add_items() = request;
  }
  EXPECT_GT(angles, 200);
  EXPECT_GT(at_bound, 0);  // The far targets clamp joints at their limits.

  v1::SolveBatchResponse batched;
  ASSERT_TRUE(server_.stub->SolveBatch(Context().get(), batch, &batched).ok());
  ASSERT_EQ(batched.items_size(), 40);
  for (const v1::SolveResponse& item : batched.items()) {
    ASSERT_FALSE(item.has_error()) << item.error().message();
    EXPECT_GT(item.hinge_joints_size(), 0);
    ExpectHingeAnglesWithinLimits(panda, item);
  }

  auto context = Context();
  auto stream = server_.stub->SolveStream(context.get());
  ASSERT_TRUE(stream->Write(requests[0]));
  v1::SolveResponse streamed;
  ASSERT_TRUE(stream->Read(&streamed));
  EXPECT_GT(streamed.hinge_joints_size(), 0);
  ExpectHingeAnglesWithinLimits(panda, streamed);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

// One broken field at a time: the code and the field named.
TEST_F(ServiceTest, SolveValidationNamesTheField) {
  struct Case {
    const char* name;
    std::function<void(v1::SolveRequest*)> mutate;
    grpc::StatusCode code;
    const char* field;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<Case> cases = {
      {"unknown skeleton",
       [](v1::SolveRequest* r) { r->set_skeleton_id("feed"); },
       grpc::StatusCode::NOT_FOUND, "skeleton_id"},
      {"no skeleton id", [](v1::SolveRequest* r) { r->clear_skeleton_id(); },
       grpc::StatusCode::INVALID_ARGUMENT, "skeleton_id"},
      {"unknown chain",
       [](v1::SolveRequest* r) { r->mutable_goals(0)->set_chain("arm"); },
       grpc::StatusCode::NOT_FOUND, "goals[0].chain"},
      {"unknown tip joint",
       [](v1::SolveRequest* r) {
         r->mutable_goals(0)->clear_chain();
         r->mutable_goals(0)->set_root_joint("hip");
         r->mutable_goals(0)->set_tip_joint("toe");
       },
       grpc::StatusCode::NOT_FOUND, "goals[0].tip_joint"},
      {"no goals", [](v1::SolveRequest* r) { r->clear_goals(); },
       grpc::StatusCode::INVALID_ARGUMENT, "goals"},
      {"no target",
       [](v1::SolveRequest* r) { r->mutable_goals(0)->clear_target(); },
       grpc::StatusCode::INVALID_ARGUMENT, "goals[0].target"},
      {"NaN target",
       [nan](v1::SolveRequest* r) {
         r->mutable_goals(0)->mutable_target()->set_y(nan);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "goals[0].target"},
      {"infinite pole",
       [](v1::SolveRequest* r) {
         r->mutable_goals(0)->mutable_pole()->set_x(
             std::numeric_limits<double>::infinity());
       },
       grpc::StatusCode::INVALID_ARGUMENT, "goals[0].pole"},
      {"zero orientation",
       [](v1::SolveRequest* r) {
         r->mutable_goals(0)->mutable_target_orientation();
       },
       grpc::StatusCode::INVALID_ARGUMENT, "goals[0].target_orientation"},
      {"unknown solver",
       [](v1::SolveRequest* r) {
         r->mutable_goals(0)->set_solver(static_cast<v1::Solver>(99));
       },
       grpc::StatusCode::INVALID_ARGUMENT, "goals[0].solver"},
      {"weight out of range",
       [](v1::SolveRequest* r) { r->mutable_goals(0)->set_weight(1.5); },
       grpc::StatusCode::INVALID_ARGUMENT, "goals[0].weight"},
      {"negative tolerance",
       [](v1::SolveRequest* r) {
         r->mutable_goals(0)->mutable_options()->set_tolerance(-1);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "goals[0].options.tolerance"},
      {"too many iterations",
       [](v1::SolveRequest* r) {
         r->mutable_goals(0)->mutable_options()->set_max_iterations(1 << 30);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "goals[0].options.max_iterations"},
      {"negative time budget",
       [](v1::SolveRequest* r) {
         r->mutable_goals(0)->mutable_options()->set_time_budget_ms(-1);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "goals[0].options.time_budget_ms"},
      {"time budget over a minute",
       [](v1::SolveRequest* r) {
         r->mutable_goals(0)->mutable_options()->set_time_budget_ms(60001);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "goals[0].options.time_budget_ms"},
      {"start pose too short",
       [](v1::SolveRequest* r) {
         r->mutable_start_pose()->add_rotations()->set_w(1);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "start_pose.rotations"},
      {"start pose zero quaternion",
       [](v1::SolveRequest* r) {
         for (int i = 0; i < 3; ++i) r->mutable_start_pose()->add_rotations();
         r->mutable_start_pose()->mutable_rotations(0)->set_w(1);
         r->mutable_start_pose()->mutable_rotations(1)->set_w(1);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "start_pose.rotations[2]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    v1::SolveRequest request = LegRequest(kHip + Eigen::Vector3d(0.1, -0.5, 0.2));
    c.mutate(&request);
    v1::SolveResponse response;
    const grpc::Status status =
        server_.stub->Solve(Context().get(), request, &response);
    EXPECT_EQ(status.error_code(), c.code) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(c.field));
  }
}

// Issue 46: an unknown chain is refused naming the field and listing the
// chains there are, in a message bounded however many chains (and however
// long their names) the skeleton has; batch items say the same in band.
TEST_F(ServiceTest, AnUnknownChainIsRefusedListingTheChains) {
  v1::SolveRequest request = LegRequest(kHip + Eigen::Vector3d(0.1, -0.5, 0.2));
  request.mutable_goals(0)->set_chain("arm");
  v1::SolveResponse response;
  grpc::Status status =
      server_.stub->Solve(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(),
            "goals[0].chain: no chain \"arm\"; chains: leg");

  // 250 chains of 100-byte names on a straight chain.
  SkeletonDef many = testing::StraightChainDef(4);
  many.chains.clear();
  for (int c = 0; c < 250; ++c) {
    many.chains.push_back({absl::StrCat("chain_", c, "_", std::string(90, 'x')),
                           many.joints[0].name, many.joints[3].name});
  }
  const std::string many_id =
      MustRegister(*server_.stub, ToWire(many, "many chains"));
  request.set_skeleton_id(many_id);
  request.mutable_goals(0)->set_chain(std::string(5000, 'q'));
  status = server_.stub->Solve(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(),
              HasSubstr("; chains: chain_0_xxxxxxxxxx"));
  EXPECT_THAT(status.error_message(), HasSubstr(" more)"));
  EXPECT_LT(status.error_message().size(), 1000u) << status.error_message();

  v1::SolveBatchRequest batch;
  *batch.add_items() = LegRequest(kHip + Eigen::Vector3d(0.1, -0.5, 0.2));
  batch.mutable_items(0)->mutable_goals(0)->set_chain("tail");
  v1::SolveBatchResponse answers;
  ASSERT_TRUE(server_.stub->SolveBatch(Context().get(), batch, &answers).ok());
  ASSERT_EQ(answers.items_size(), 1);
  EXPECT_EQ(answers.items(0).error().message(),
            "goals[0].chain: no chain \"tail\"; chains: leg");
}

// A goal's time budget reaches the solver: the Panda from its all-zero
// pose (straight up, a singularity where DLS stalls) gets to this low
// target only by restarting, which a budget turns on without max_restarts
// (the second start from its joints' bounds is not enough).
TEST_F(ServiceTest, TimeBudgetRestartsUntilReached) {
  const std::string id =
      MustRegister(*server_.stub, ToWire(testing::PandaDef(), "panda"));
  v1::SolveRequest request;
  request.set_skeleton_id(id);
  *request.add_goals() =
      MakeGoal("arm", Eigen::Vector3d(0.5, 0.2, 0.1), v1::SOLVER_JACOBIAN_DLS);
  v1::SolveResponse once;
  ASSERT_TRUE(server_.stub->Solve(Context().get(), request, &once).ok());
  ASSERT_FALSE(once.results(0).reached());
  request.mutable_goals(0)->mutable_options()->set_time_budget_ms(60000);
  v1::SolveResponse budgeted;
  ASSERT_TRUE(server_.stub->Solve(Context().get(), request, &budgeted).ok());
  EXPECT_TRUE(budgeted.results(0).reached());
  EXPECT_GT(budgeted.results(0).iterations(), once.results(0).iterations());
}

// The call's deadline bounds the solve: a goal that would restart for a
// minute (unreachable, with a 60 s budget) stops when its call's 300 ms
// deadline passes, so the server's only solver thread is free for the next
// call, which would otherwise wait out the minute past its own deadline.
// The short call itself ends DEADLINE_EXCEEDED, or, when the server's
// answer (the best pose, not reached) beats the client's clock, OK.
TEST(ServiceDeadlineTest, CallDeadlineBoundsTheSolve) {
  ServerOptions options = TestServerOptions();
  options.solver_threads = 1;
  TestServer server(options);
  const std::string id =
      MustRegister(*server.stub, ToWire(testing::PandaDef(), "panda"));
  for (const char* rpc : {"Solve", "SolveBatch", "SolveStream"}) {
    SCOPED_TRACE(rpc);
    v1::SolveRequest endless;
    endless.set_skeleton_id(id);
    *endless.add_goals() =
        MakeGoal("arm", Eigen::Vector3d(5, 5, 5), v1::SOLVER_JACOBIAN_DLS);
    endless.mutable_goals(0)->mutable_options()->set_time_budget_ms(60000);
    auto short_call = Context(0.3);
    grpc::Status status;
    v1::SolveResponse answer;
    if (std::string(rpc) == "Solve") {
      status = server.stub->Solve(short_call.get(), endless, &answer);
    } else if (std::string(rpc) == "SolveBatch") {
      v1::SolveBatchRequest batch;
      *batch.add_items() = endless;
      v1::SolveBatchResponse response;
      status = server.stub->SolveBatch(short_call.get(), batch, &response);
      if (status.ok() && response.items_size() == 1) answer = response.items(0);
    } else {
      // The stream stays open until its deadline ends it.
      auto stream = server.stub->SolveStream(short_call.get());
      stream->Write(endless);
      stream->Read(&answer);
      status = stream->Finish();
    }
    if (status.ok()) {
      ASSERT_EQ(answer.results_size(), 1);
      EXPECT_FALSE(answer.results(0).reached());
    } else {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    }

    v1::SolveRequest quick;
    quick.set_skeleton_id(id);
    *quick.add_goals() = MakeGoal("arm", Eigen::Vector3d(0.3, 0.1, 0.6),
                                  v1::SOLVER_JACOBIAN_DLS);
    v1::SolveResponse response;
    EXPECT_TRUE(server.stub->Solve(Context(20).get(), quick, &response).ok());
  }
}

TEST(ServiceLimitsTest, MaxGoalsIsEnforced) {
  ServerOptions options = TestServerOptions();
  options.service.solve_limits.max_goals = 2;
  TestServer server(options);
  const std::string id =
      MustRegister(*server.stub, ToWire(testing::TwoBoneLegDef(), "leg"));
  v1::SolveRequest request;
  request.set_skeleton_id(id);
  for (int i = 0; i < 3; ++i) {
    *request.add_goals() = MakeGoal("leg", Eigen::Vector3d(0.1, -0.5, 0.2));
  }
  v1::SolveResponse response;
  grpc::Status status = server.stub->Solve(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("max_goals"));
  request.mutable_goals()->RemoveLast();
  EXPECT_TRUE(server.stub->Solve(Context().get(), request, &response).ok());
}

TEST(ServiceLimitsTest, MaxMessageBytesIsEnforced) {
  ServerOptions options = TestServerOptions();
  options.max_message_bytes = 1024;
  TestServer server(options);
  v1::RegisterSkeletonRequest request;
  *request.mutable_skeleton() = ToWire(testing::HumanoidDef(), "humanoid");
  ASSERT_GT(request.ByteSizeLong(), 1024u);
  v1::RegisterSkeletonResponse response;
  const grpc::Status status =
      server.stub->RegisterSkeleton(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST_F(ServiceTest, ExpiredDeadlineIsDeadlineExceeded) {
  v1::SolveRequest request = LegRequest(kHip + Eigen::Vector3d(0.1, -0.5, 0.2));
  v1::SolveResponse response;
  auto context = Context(-1);
  const grpc::Status status =
      server_.stub->Solve(context.get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

TEST_F(ServiceTest, BatchSolvesEveryItemAndReportsBadItemsInBand) {
  v1::SolveBatchRequest batch;
  std::vector<Eigen::Vector3d> targets;
  for (int i = 0; i < 200; ++i) {
    const double a = 0.01 * i;
    targets.push_back(kHip + Eigen::Vector3d(0.3 * std::sin(a),
                                             -0.5 - 0.2 * std::cos(a),
                                             0.1 * std::cos(3 * a)));
    v1::SolveRequest* item = batch.add_items();
    *item = LegRequest(targets.back());
    item->set_sequence(i);
  }
  batch.mutable_items(17)->mutable_goals(0)->set_chain("tail");
  batch.mutable_items(42)->set_skeleton_id("0000");
  v1::SolveBatchResponse response;
  ASSERT_TRUE(server_.stub->SolveBatch(Context().get(), batch, &response).ok());
  ASSERT_EQ(response.items_size(), 200);
  for (int i = 0; i < 200; ++i) {
    const v1::SolveResponse& item = response.items(i);
    EXPECT_EQ(item.sequence(), static_cast<uint64_t>(i));
    if (i == 17) {
      EXPECT_EQ(item.error().code(), static_cast<int>(absl::StatusCode::kNotFound));
      EXPECT_THAT(item.error().message(), HasSubstr("goals[0].chain"));
      continue;
    }
    if (i == 42) {
      EXPECT_EQ(item.error().code(), static_cast<int>(absl::StatusCode::kNotFound));
      EXPECT_THAT(item.error().message(), HasSubstr("skeleton_id"));
      continue;
    }
    ASSERT_FALSE(item.has_error()) << item.error().message();
    const Pose solved = testing::ApplyResponse(RestPose(leg_), item);
    EXPECT_LT((testing::PositionOf(leg_, solved, 2) - targets[i]).norm(), 1e-6)
        << "item " << i;
  }
}

TEST_F(ServiceTest, BatchSkeletonIdServesItemsThatNameNone) {
  const Eigen::Vector3d target = kHip + Eigen::Vector3d(0.1, -0.6, 0.1);
  v1::SolveBatchRequest batch;
  batch.set_skeleton_id(leg_id_);
  for (int i = 0; i < 3; ++i) {
    v1::SolveRequest* item = batch.add_items();
    *item = LegRequest(target);
    item->set_sequence(i);
    item->clear_skeleton_id();
  }
  batch.mutable_items(2)->set_skeleton_id("0000");  // Its own id wins.
  v1::SolveBatchResponse response;
  ASSERT_TRUE(server_.stub->SolveBatch(Context().get(), batch, &response).ok());
  ASSERT_EQ(response.items_size(), 3);
  for (int i : {0, 1}) {
    ASSERT_FALSE(response.items(i).has_error())
        << response.items(i).error().message();
    const Pose solved = testing::ApplyResponse(RestPose(leg_), response.items(i));
    EXPECT_LT((testing::PositionOf(leg_, solved, 2) - target).norm(), 1e-6);
  }
  EXPECT_EQ(response.items(2).error().code(),
            static_cast<int>(absl::StatusCode::kNotFound));
  EXPECT_THAT(response.items(2).error().message(), HasSubstr("'0000'"));

  // Without the batch's id, an item that names none is told so.
  batch.clear_skeleton_id();
  ASSERT_TRUE(server_.stub->SolveBatch(Context().get(), batch, &response).ok());
  EXPECT_THAT(response.items(0).error().message(),
              HasSubstr("skeleton_id: required"));

  // The id is checked before use: bytes that are not an id are refused.
  batch.set_skeleton_id(std::string("\x01\x02", 2));
  const grpc::Status status =
      server_.stub->SolveBatch(Context().get(), batch, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("skeleton_id"));
}

// SolveBatch's bytes as a client could send them: each item is parsed by
// the worker that solves it, so an unparseable item is answered in band
// and a malformed request as a whole is INVALID_ARGUMENT.
grpc::Status RawSolveBatch(TestServer& server, const std::string& bytes,
                           v1::SolveBatchResponse* response) {
  grpc::GenericStub stub(server.channel);
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), reply;
  grpc::Status result;
  absl::Notification done;
  auto context = Context();
  stub.UnaryCall(context.get(), "/reach.v1.IkService/SolveBatch",
                 grpc::StubOptions(), &request, &reply,
                 [&](grpc::Status status) {
                   result = std::move(status);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (result.ok()) {
    grpc::Slice joined;
    EXPECT_TRUE(reply.DumpToSingleSlice(&joined).ok());
    EXPECT_TRUE(response->ParseFromArray(joined.begin(),
                                         static_cast<int>(joined.size())));
  }
  return result;
}

TEST_F(ServiceTest, BatchAnswersAnUnparseableItemInBand) {
  v1::SolveBatchRequest batch;
  for (int i = 0; i < 3; ++i) {
    *batch.add_items() = LegRequest(kHip + Eigen::Vector3d(0.1, -0.6, 0.1));
    batch.mutable_items(i)->set_sequence(i);
  }
  // Item 1 replaced by bytes that frame correctly but do not parse.
  std::string bytes;
  for (int i = 0; i < 3; ++i) {
    const std::string item = i == 1 ? std::string("\x0a\x7f", 2)
                                     : batch.items(i).SerializeAsString();
    bytes += '\x0a';
    bytes += static_cast<char>(item.size());  // All below 128 bytes.
    bytes += item;
  }
  v1::SolveBatchResponse response;
  ASSERT_TRUE(RawSolveBatch(server_, bytes, &response).ok());
  ASSERT_EQ(response.items_size(), 3);
  EXPECT_EQ(response.items(1).error().code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(response.items(1).error().message(),
              HasSubstr("items[1]: not a valid SolveRequest"));
  for (int i : {0, 2}) {
    EXPECT_FALSE(response.items(i).has_error()) << i;
    EXPECT_EQ(response.items(i).sequence(), static_cast<uint64_t>(i));
    EXPECT_TRUE(response.items(i).results(0).reached()) << i;
  }

  // Cut short: the request itself is malformed.
  const grpc::Status status =
      RawSolveBatch(server_, bytes.substr(0, bytes.size() - 4), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("malformed at byte"));
}

TEST(ServiceLimitsTest, MaxBatchIsEnforced) {
  ServerOptions options = TestServerOptions();
  options.service.max_batch = 3;
  TestServer server(options);
  const std::string id =
      MustRegister(*server.stub, ToWire(testing::TwoBoneLegDef(), "leg"));
  v1::SolveBatchRequest batch;
  v1::SolveBatchResponse response;
  grpc::Status status =
      server.stub->SolveBatch(Context().get(), batch, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  for (int i = 0; i < 4; ++i) {
    v1::SolveRequest* item = batch.add_items();
    item->set_skeleton_id(id);
    *item->add_goals() = MakeGoal("leg", Eigen::Vector3d(0.1, -0.5, 0.2));
  }
  status = server.stub->SolveBatch(Context().get(), batch, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("max_batch"));
  batch.mutable_items()->RemoveLast();
  EXPECT_TRUE(server.stub->SolveBatch(Context().get(), batch, &response).ok());
  EXPECT_EQ(response.items_size(), 3);
}

// One solver thread, a queue of one, slow solves: a burst of concurrent
// calls must be refused with RESOURCE_EXHAUSTED rather than queued.
TEST(ServiceLimitsTest, FloodedQueueAnswersResourceExhausted) {
  ServerOptions options = TestServerOptions();
  options.solver_threads = 1;
  options.queue_capacity = 1;
  TestServer server(options);
  const std::string id = MustRegister(
      *server.stub, ToWire(testing::StraightChainDef(12), "chain"));
  v1::SolveRequest request;
  request.set_skeleton_id(id);
  // Unreachable, so DLS runs all its restarts: a slow solve.
  v1::Goal goal = MakeGoal("chain", Eigen::Vector3d(5, 5, 5),
                           v1::SOLVER_JACOBIAN_DLS);
  goal.mutable_options()->set_max_restarts(1000);
  *request.add_goals() = goal;

  constexpr int kCalls = 24;
  std::vector<v1::SolveResponse> responses(kCalls);
  std::vector<grpc::ClientContext> contexts(kCalls);
  std::vector<grpc::Status> statuses(kCalls);
  std::atomic<int> done{0};
  absl::Notification all_done;
  for (int i = 0; i < kCalls; ++i) {
    contexts[i].set_deadline(std::chrono::system_clock::now() +
                             std::chrono::seconds(120));
    server.stub->async()->Solve(&contexts[i], &request, &responses[i],
                                [&, i](grpc::Status status) {
                                  statuses[i] = std::move(status);
                                  if (++done == kCalls) all_done.Notify();
                                });
  }
  all_done.WaitForNotification();
  int ok = 0, exhausted = 0;
  for (const grpc::Status& status : statuses) {
    if (status.ok()) ++ok;
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++exhausted;
      EXPECT_THAT(status.error_message(), HasSubstr("queue is full"));
    }
  }
  EXPECT_GE(ok, 1);
  EXPECT_GE(exhausted, 1);
  EXPECT_EQ(ok + exhausted, kCalls);
}

TEST_F(ServiceTest, HealthIsServing) {
  auto health = grpc::health::v1::Health::NewStub(server_.channel);
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(health->Check(Context().get(), request, &response).ok());
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

}  // namespace
}  // namespace reach
