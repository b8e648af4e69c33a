// SolveStream against the real server: order, in-band errors, warm start,
// latest wins, the stream limit.
#include <cmath>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "wire/convert.h"
#include "tests/testing/models.h"
#include "tests/testing/service.h"

namespace reach {
namespace {

using ::reach::testing::Context;
using ::reach::testing::MakeGoal;
using ::reach::testing::MustRegister;
using ::reach::testing::TestServer;
using ::reach::testing::TestServerOptions;
using ::reach::testing::ToWire;
using ::testing::HasSubstr;

using Stream = grpc::ClientReaderWriter<v1::SolveRequest, v1::SolveResponse>;

// Writes every request on its own thread, then half-closes; returns every
// response read on this thread.
std::vector<v1::SolveResponse> RunStream(
    v1::IkService::Stub& stub, const std::vector<v1::SolveRequest>& requests,
    grpc::Status* status) {
  auto context = Context(120);
  std::unique_ptr<Stream> stream = stub.SolveStream(context.get());
  std::thread writer([&] {
    for (const v1::SolveRequest& request : requests) {
      if (!stream->Write(request)) break;
    }
    stream->WritesDone();
  });
  std::vector<v1::SolveResponse> responses;
  v1::SolveResponse response;
  while (stream->Read(&response)) responses.push_back(response);
  writer.join();
  *status = stream->Finish();
  return responses;
}

class StreamTest : public ::testing::Test {
 protected:
  StreamTest()
      : leg_(*Skeleton::Create(testing::TwoBoneLegDef())),
        leg_id_(MustRegister(*server_.stub,
                             ToWire(testing::TwoBoneLegDef(), "leg"))) {}

  // A smooth foot trajectory, one frame per sequence number.
  static Eigen::Vector3d FootTarget(int frame) {
    const double t = 0.01 * frame;
    // Relative to TwoBoneLegDef's hip at (0.1, 1.0, 0).
    return Eigen::Vector3d(0.1 + 0.25 * std::sin(t),
                           0.4 + 0.15 * std::cos(2 * t), 0.2 * std::sin(0.5 * t));
  }
  v1::SolveRequest LegFrame(int frame) {
    v1::SolveRequest request;
    request.set_skeleton_id(leg_id_);
    request.set_sequence(frame);
    *request.add_goals() = MakeGoal("leg", FootTarget(frame));
    return request;
  }

  TestServer server_;
  Skeleton leg_;
  std::string leg_id_;
};

TEST_F(StreamTest, TenThousandFramesAnsweredOnceEachInOrder) {
  constexpr int kFrames = 10000;
  std::vector<v1::SolveRequest> requests;
  for (int i = 0; i < kFrames; ++i) requests.push_back(LegFrame(i));
  grpc::Status status;
  const std::vector<v1::SolveResponse> responses =
      RunStream(*server_.stub, requests, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(responses.size(), static_cast<size_t>(kFrames));
  // Each frame's pose is its start (the previous solution) plus its joints.
  Pose pose = RestPose(leg_);
  for (int i = 0; i < kFrames; ++i) {
    const v1::SolveResponse& r = responses[i];
    ASSERT_EQ(r.sequence(), static_cast<uint64_t>(i));
    ASSERT_FALSE(r.has_error()) << r.error().message();
    ASSERT_TRUE(r.results(0).reached()) << "frame " << i;
    pose = testing::ApplyResponse(pose, r);
    ASSERT_LT((testing::PositionOf(leg_, pose, 2) - FootTarget(i)).norm(), 1e-6)
        << "frame " << i;
  }
}

TEST_F(StreamTest, BadFramesGetInBandErrorsAndTheStreamGoesOn) {
  std::vector<v1::SolveRequest> requests;
  for (int i = 0; i < 10; ++i) requests.push_back(LegFrame(i));
  requests[3].mutable_goals(0)->set_chain("tail");
  requests[5].mutable_goals(0)->mutable_target()->set_x(
      std::numeric_limits<double>::quiet_NaN());
  requests[7].set_skeleton_id("unknown");
  grpc::Status status;
  const std::vector<v1::SolveResponse> responses =
      RunStream(*server_.stub, requests, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(responses.size(), 10u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(responses[i].sequence(), static_cast<uint64_t>(i));
    const bool bad = i == 3 || i == 5 || i == 7;
    EXPECT_EQ(responses[i].has_error(), bad) << "frame " << i;
    if (!bad) {
      EXPECT_TRUE(responses[i].results(0).reached());
    }
  }
  EXPECT_EQ(responses[3].error().code(),
            static_cast<int>(grpc::StatusCode::NOT_FOUND));
  EXPECT_THAT(responses[3].error().message(), HasSubstr("goals[0].chain"));
  EXPECT_EQ(responses[5].error().code(),
            static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_THAT(responses[5].error().message(), HasSubstr("goals[0].target"));
  EXPECT_EQ(responses[7].error().code(),
            static_cast<int>(grpc::StatusCode::NOT_FOUND));
  EXPECT_THAT(responses[7].error().message(), HasSubstr("skeleton_id"));
}

// The same smooth trajectory solved by FABRIK on a 10-joint chain, warm
// (frames without a start pose continue from the previous solution) and
// cold (every frame from the rest pose).
TEST(StreamWarmStartTest, WarmStartNeedsFewerIterationsAndDoesNotFlip) {
  TestServer server;
  const SkeletonDef def = testing::StraightChainDef(10);
  const Skeleton skeleton = *Skeleton::Create(def);
  const std::string id = MustRegister(*server.stub, ToWire(def, "chain"));
  constexpr int kFrames = 200;
  std::vector<v1::SolveRequest> warm, cold;
  for (int i = 0; i < kFrames; ++i) {
    const double t = 0.02 * i;
    // Off the rest line: FABRIK converges slowly for a straight chain with
    // the target on its own line (a known solver weakness, not this test).
    const Eigen::Vector3d target(0.5 + 0.2 * std::cos(t), 0.1 + 0.3 * std::sin(t),
                                 0.2 * std::sin(2 * t));
    v1::SolveRequest request;
    request.set_skeleton_id(id);
    request.set_sequence(i);
    *request.add_goals() = MakeGoal("chain", target, v1::SOLVER_FABRIK);
    warm.push_back(request);
    for (int j = 0; j < skeleton.num_joints(); ++j) {
      ToProto(Eigen::Quaterniond::Identity(),
              request.mutable_start_pose()->add_rotations());
    }
    cold.push_back(request);
  }
  grpc::Status status;
  const auto warm_responses = RunStream(*server.stub, warm, &status);
  ASSERT_TRUE(status.ok());
  const auto cold_responses = RunStream(*server.stub, cold, &status);
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(warm_responses.size(), static_cast<size_t>(kFrames));
  ASSERT_EQ(cold_responses.size(), static_cast<size_t>(kFrames));

  int warm_iterations = 0, cold_iterations = 0;
  double largest_step_rad = 0.0;
  Pose pose = RestPose(skeleton);
  for (int i = 0; i < kFrames; ++i) {
    ASSERT_TRUE(warm_responses[i].results(0).reached())
        << "frame " << i << ": " << warm_responses[i].DebugString();
    ASSERT_TRUE(cold_responses[i].results(0).reached())
        << "frame " << i << ": " << cold_responses[i].DebugString();
    warm_iterations += warm_responses[i].results(0).iterations();
    cold_iterations += cold_responses[i].results(0).iterations();
    const Pose next = testing::ApplyResponse(pose, warm_responses[i]);
    if (i > 0) {
      for (int j = 0; j < skeleton.num_joints(); ++j) {
        largest_step_rad =
            std::max(largest_step_rad, next.local[j].rotation.angularDistance(
                                           pose.local[j].rotation));
      }
    }
    pose = next;
  }
  std::printf("iterations over %d frames: warm %d, cold %d; largest joint "
              "step between warm frames %.4f rad\n",
              kFrames, warm_iterations, cold_iterations, largest_step_rad);
  EXPECT_LT(warm_iterations, cold_iterations);
  // The target moves ~0.02 model units per frame; no joint should swing
  // anywhere near a flip.
  EXPECT_LT(largest_step_rad, 0.3);
}

TEST(StreamLatestWinsTest, BacklogCollapsesToTheNewestFrame) {
  ServerOptions options = TestServerOptions();
  options.solver_threads = 1;
  TestServer server(options);
  const SkeletonDef def = testing::StraightChainDef(10);
  const std::string id = MustRegister(*server.stub, ToWire(def, "chain"));
  // Slow frames (unreachable target, many restarts): a backlog builds up.
  constexpr int kFrames = 40;
  std::vector<v1::SolveRequest> requests;
  for (int i = 0; i < kFrames; ++i) {
    v1::SolveRequest request;
    request.set_skeleton_id(id);
    request.set_sequence(i);
    request.set_latest_wins(true);
    v1::Goal goal = MakeGoal("chain", Eigen::Vector3d(3, 0, 0),
                             v1::SOLVER_JACOBIAN_DLS);
    goal.mutable_options()->set_max_restarts(200);
    *request.add_goals() = goal;
    requests.push_back(request);
  }
  grpc::Status status;
  const auto responses = RunStream(*server.stub, requests, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(responses.size(), static_cast<size_t>(kFrames));
  int skipped = 0;
  for (int i = 0; i < kFrames; ++i) {
    EXPECT_EQ(responses[i].sequence(), static_cast<uint64_t>(i));
    EXPECT_FALSE(responses[i].has_error());
    if (responses[i].skipped()) {
      ++skipped;
      EXPECT_EQ(responses[i].results_size(), 0);
    } else {
      EXPECT_EQ(responses[i].results_size(), 1);
    }
  }
  std::printf("latest wins: %d of %d frames skipped\n", skipped, kFrames);
  EXPECT_GT(skipped, 0);
  EXPECT_FALSE(responses.back().skipped());  // The newest is always solved.
}

TEST(StreamLimitsTest, MaxStreamsIsEnforced) {
  ServerOptions options = TestServerOptions();
  options.service.max_streams = 1;
  TestServer server(options);
  const std::string id =
      MustRegister(*server.stub, ToWire(testing::TwoBoneLegDef(), "leg"));
  v1::SolveRequest request;
  request.set_skeleton_id(id);
  *request.add_goals() = MakeGoal("leg", Eigen::Vector3d(0.1, -0.5, 0.2));

  auto first_context = Context();
  std::unique_ptr<Stream> first = server.stub->SolveStream(first_context.get());
  ASSERT_TRUE(first->Write(request));
  v1::SolveResponse response;
  ASSERT_TRUE(first->Read(&response));  // The first stream is open.

  auto second_context = Context();
  std::unique_ptr<Stream> second =
      server.stub->SolveStream(second_context.get());
  second->Write(request);
  EXPECT_FALSE(second->Read(&response));
  const grpc::Status refused = second->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("max_streams"));

  first->WritesDone();
  EXPECT_TRUE(first->Finish().ok());
}

TEST_F(StreamTest, ClientDeadlineEndsTheStream) {
  auto context = Context(0.5);
  std::unique_ptr<Stream> stream = server_.stub->SolveStream(context.get());
  ASSERT_TRUE(stream->Write(LegFrame(0)));
  v1::SolveResponse response;
  ASSERT_TRUE(stream->Read(&response));
  // Never half-close: the deadline must end the call.
  while (stream->Read(&response)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

}  // namespace
}  // namespace reach
