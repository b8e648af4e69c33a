#include "tests/testing/service.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "wire/convert.h"

namespace reach::testing {

ServerOptions TestServerOptions() {
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  // No metrics endpoint: stopping prometheus-cpp's HTTP server costs ~2 s,
  // and the process tests cover /metrics.
  options.metrics_address = "";
  options.in_memory_store = true;
  options.shutdown_grace = absl::Seconds(5);
  return options;
}

TestServer::TestServer(const ServerOptions& options) {
  absl::StatusOr<std::unique_ptr<ReachServer>> started =
      ReachServer::Start(options);
  if (!started.ok()) {
    std::fprintf(stderr, "TestServer: %s\n",
                 started.status().ToString().c_str());
    std::abort();
  }
  server = *std::move(started);
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  channel = grpc::CreateCustomChannel(
      address(), grpc::InsecureChannelCredentials(), args);
  stub = v1::IkService::NewStub(channel);
}

std::string TestServer::address() const {
  return absl::StrCat("127.0.0.1:", server->port());
}

std::unique_ptr<v1::IkService::Stub> TestServer::NewStub() const {
  return v1::IkService::NewStub(channel);
}

std::unique_ptr<grpc::ClientContext> Context(double seconds) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(
      std::chrono::system_clock::now() +
      std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6)));
  return context;
}

v1::Skeleton ToWire(const SkeletonDef& def, const std::string& name) {
  v1::Skeleton skeleton;
  ToProto(def, &skeleton);
  skeleton.set_name(name);
  return skeleton;
}

std::string MustRegister(v1::IkService::Stub& stub,
                         const v1::Skeleton& skeleton) {
  v1::RegisterSkeletonRequest request;
  *request.mutable_skeleton() = skeleton;
  v1::RegisterSkeletonResponse response;
  const grpc::Status status =
      stub.RegisterSkeleton(Context().get(), request, &response);
  if (!status.ok()) {
    std::fprintf(stderr, "MustRegister: %s\n", status.error_message().c_str());
    std::abort();
  }
  return response.skeleton_id();
}

v1::ImportSkeletonResponse MustImport(v1::IkService::Stub& stub,
                                      const std::string& path, bool motion) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  v1::ImportSkeletonRequest request;
  request.set_data(bytes.str());
  request.set_file_name(path.substr(path.rfind('/') + 1));
  request.set_return_motion(motion);
  v1::ImportSkeletonResponse response;
  const grpc::Status status =
      stub.ImportSkeleton(Context().get(), request, &response);
  if (!in || !status.ok()) {
    std::fprintf(stderr, "MustImport %s: %s\n", path.c_str(),
                 in ? status.error_message().c_str() : "cannot read");
    std::abort();
  }
  return response;
}

v1::Goal MakeGoal(const std::string& chain, const Eigen::Vector3d& target,
                  v1::Solver solver) {
  v1::Goal goal;
  goal.set_chain(chain);
  goal.set_solver(solver);
  ToProto(target, goal.mutable_target());
  return goal;
}

Pose ApplyResponse(const Pose& start, const v1::SolveResponse& response) {
  Pose pose = start;
  const absl::Status status = reach::ApplyResponse(response, &pose);
  if (!status.ok()) {
    std::fprintf(stderr, "ApplyResponse: %s\n", status.ToString().c_str());
    std::abort();
  }
  return pose;
}

Eigen::Vector3d PositionOf(const Skeleton& skeleton, const Pose& pose,
                           int joint) {
  std::vector<Transform> globals(skeleton.num_joints());
  ComputeGlobals(skeleton, pose, absl::MakeSpan(globals));
  return globals[joint].translation;
}

v1::SolveRequest ExpensiveSolveRequest(const std::string& skeleton_id) {
  v1::SolveRequest request;
  request.set_skeleton_id(skeleton_id);
  for (int i = 0; i < 64; ++i) {
    v1::Goal goal = MakeGoal("chain", Eigen::Vector3d(5.0, 5.0 + 0.01 * i, 5.0),
                             v1::SOLVER_JACOBIAN_DLS);
    goal.mutable_options()->set_max_iterations(100000);
    goal.mutable_options()->set_time_budget_ms(60000);
    *request.add_goals() = goal;
  }
  return request;
}

}  // namespace reach::testing
