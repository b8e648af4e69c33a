// The client library against a real server on loopback.
#include "client/reach_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "wire/convert.h"
#include "tests/testing/models.h"
#include "tests/testing/service.h"

namespace reach::client {
namespace {

using ::testing::HasSubstr;
using testing::TestServer;

std::string DataPath(const std::string& name) {
  return absl::StrCat(REACH_TEST_DATA, "/", name);
}

class ClientTest : public ::testing::Test {
 protected:
  TestServer server_;
  ReachClient client_{server_.channel};
};

TEST_F(ClientTest, RegistryRoundTrip) {
  absl::StatusOr<v1::RegisterSkeletonResponse> walk =
      client_.RegisterFile(DataPath("mocap/cmu_02_01_walk.bvh"));
  ASSERT_TRUE(walk.ok()) << walk.status();
  EXPECT_TRUE(walk->created());
  absl::StatusOr<v1::RegisterSkeletonResponse> again =
      client_.RegisterFile(DataPath("mocap/cmu_02_01_walk.bvh"));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created());
  EXPECT_EQ(again->skeleton_id(), walk->skeleton_id());
  absl::StatusOr<v1::RegisterSkeletonResponse> humanoid = client_.RegisterFile(
      DataPath("../../examples/humanoid.skeleton.json"));
  ASSERT_TRUE(humanoid.ok()) << humanoid.status();

  absl::StatusOr<v1::GetSkeletonResponse> got =
      client_.GetSkeleton(walk->skeleton_id());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->skeleton().name(), "cmu_02_01_walk");
  EXPECT_EQ(got->skeleton().joints_size(), 38);

  absl::StatusOr<v1::ListSkeletonsResponse> page = client_.ListSkeletons(1);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->skeletons_size(), 1);
  ASSERT_FALSE(page->next_page_token().empty());
  absl::StatusOr<v1::ListSkeletonsResponse> rest =
      client_.ListSkeletons(10, page->next_page_token());
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(rest->skeletons_size(), 1);

  ASSERT_TRUE(client_.DeleteSkeleton(walk->skeleton_id()).ok());
  absl::StatusOr<v1::GetSkeletonResponse> gone =
      client_.GetSkeleton(walk->skeleton_id());
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(gone.status().message(), HasSubstr("GetSkeleton: "));
}

TEST_F(ClientTest, RegisterFileReportsImportErrors) {
  absl::StatusOr<v1::RegisterSkeletonResponse> missing =
      client_.RegisterFile("/nonexistent/robot.urdf");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/robot.urdf"));
}

TEST_F(ClientTest, SolveAndBatchLandOnTheTarget) {
  const SkeletonDef def = testing::TwoBoneLegDef();
  const std::string id = testing::MustRegister(
      server_.stub.operator*(), testing::ToWire(def, "leg"));
  absl::StatusOr<Skeleton> skeleton = Skeleton::Create(def);
  ASSERT_TRUE(skeleton.ok());
  const Eigen::Vector3d target(0.3, 0.4, 0.2);
  v1::SolveRequest request;
  request.set_skeleton_id(id);
  *request.add_goals() =
      testing::MakeGoal(skeleton->chain(0).name, target);
  absl::StatusOr<v1::SolveResponse> response = client_.Solve(request);
  ASSERT_TRUE(response.ok()) << response.status();
  Pose pose = RestPose(*skeleton);
  ASSERT_TRUE(ApplyResponse(*response, &pose).ok());
  EXPECT_LT((testing::PositionOf(*skeleton, pose,
                                 skeleton->chain(0).joints.back()) -
             target)
                .norm(),
            1e-9);

  v1::SolveBatchRequest batch;
  for (int i = 0; i < 10; ++i) *batch.add_items() = request;
  absl::StatusOr<v1::SolveBatchResponse> answers = client_.SolveBatch(batch);
  ASSERT_TRUE(answers.ok()) << answers.status();
  ASSERT_EQ(answers->items_size(), 10);
  for (const v1::SolveResponse& item : answers->items()) {
    EXPECT_TRUE(item.results(0).reached());
  }

  request.set_skeleton_id("unknown");
  absl::StatusOr<v1::SolveResponse> bad = client_.Solve(request);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(bad.status().message(), HasSubstr("Solve: "));
}

// A server that never answers: a loopback port that accepts connections
// (the kernel completes them into its backlog) and never speaks. Without a
// deadline a call to it would wait for ever. (A 1 ns deadline on a real
// server is no test: an in-process answer can beat the deadline's timer,
// and did, about 1 run in 100 on a loaded machine.)
TEST(ClientDeadlineTest, EveryCallCarriesTheDeadline) {
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  const absl::Cleanup closed = [listener] { close(listener); };
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(listener, 16), 0);
  socklen_t size = sizeof(address);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&address), &size), 0);
  ReachClient hurried(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", ntohs(address.sin_port)),
                          grpc::InsecureChannelCredentials()),
      ClientOptions{absl::Milliseconds(200), ""});
  EXPECT_EQ(hurried.ListSkeletons().status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(hurried.Health().status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(ClientTest, HealthFollowsTheServer) {
  auto serving = client_.Health();
  ASSERT_TRUE(serving.ok()) << serving.status();
  EXPECT_EQ(*serving, grpc::health::v1::HealthCheckResponse::SERVING);
  server_.server->SetServing(false);
  auto not_serving = client_.Health();
  ASSERT_TRUE(not_serving.ok());
  EXPECT_EQ(*not_serving, grpc::health::v1::HealthCheckResponse::NOT_SERVING);
}

TEST_F(ClientTest, StreamKeepsAtMostTheWindowInFlightAndAnswersInOrder) {
  const SkeletonDef def = testing::TwoBoneLegDef();
  const std::string id = testing::MustRegister(
      server_.stub.operator*(), testing::ToWire(def, "leg"));
  absl::StatusOr<Skeleton> skeleton = Skeleton::Create(def);
  ASSERT_TRUE(skeleton.ok());
  constexpr int kWindow = 3;
  constexpr int kFrames = 500;
  std::unique_ptr<SolveStream> stream =
      client_.OpenStream(absl::Seconds(60), kWindow);
  v1::SolveRequest frame;
  frame.set_skeleton_id(id);
  *frame.add_goals() = testing::MakeGoal(skeleton->chain(0).name,
                                         Eigen::Vector3d(0.3, 0.4, 0.2));
  int received = 0;
  int max_in_flight = 0;
  StreamResult result;
  const auto take = [&] {
    EXPECT_EQ(result.response.sequence(), static_cast<uint64_t>(received));
    EXPECT_GT(result.latency, absl::ZeroDuration());
    EXPECT_FALSE(result.response.has_error());
    ++received;
  };
  for (int i = 0; i < kFrames; ++i) {
    frame.set_sequence(i);
    ASSERT_TRUE(stream->Send(frame));
    max_in_flight = std::max(max_in_flight, stream->in_flight());
    if (i % 7 == 0) {
      while (stream->TryReceive(&result)) take();
    }
  }
  while (stream->Receive(&result)) take();
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(received, kFrames);
  EXPECT_LE(max_in_flight, kWindow);
  EXPECT_GE(max_in_flight, 1);
}

TEST_F(ClientTest, StreamToAStoppedServerFailsCleanly) {
  std::unique_ptr<SolveStream> stream =
      client_.OpenStream(absl::Seconds(10), 4);
  server_.server->Shutdown();
  v1::SolveRequest frame;
  frame.set_skeleton_id("x");
  // Sends may or may not be accepted before the failure is seen; Finish
  // reports it, and nothing hangs.
  for (int i = 0; i < 10 && stream->Send(frame); ++i) {
  }
  StreamResult result;
  while (stream->Receive(&result)) {
  }
  EXPECT_FALSE(stream->Finish().ok());
}

}  // namespace
}  // namespace reach::client
