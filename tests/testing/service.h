// Helpers for service tests and benchmarks: a real ReachServer on a loopback
// port, stubs on a real channel, wire skeletons and request builders, and
// an independent check of a response (forward kinematics of the returned
// pose, computed here, not taken from the server).
#ifndef REACH_TESTS_TESTING_SERVICE_H_
#define REACH_TESTS_TESTING_SERVICE_H_

#include <memory>
#include <string>

#include "grpcpp/grpcpp.h"
#include "reach/v1/ik_service.grpc.pb.h"
#include "server/server.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"

namespace reach::testing {

// In-memory store, a port picked by the kernel, no metrics endpoint.
ServerOptions TestServerOptions();

struct TestServer {
  explicit TestServer(const ServerOptions& options = TestServerOptions());
  std::string address() const;
  std::unique_ptr<v1::IkService::Stub> NewStub() const;

  std::unique_ptr<ReachServer> server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::IkService::Stub> stub;
};

// A context with a deadline `seconds` from now.
std::unique_ptr<grpc::ClientContext> Context(double seconds = 30);

// SkeletonDef -> wire, with a name.
v1::Skeleton ToWire(const SkeletonDef& def, const std::string& name);

// Registers (CHECK-style: aborts the test binary on failure) and returns
// the id.
std::string MustRegister(v1::IkService::Stub& stub, const v1::Skeleton& skeleton);

// Imports the file at `path` (its bytes, named by its base name) with
// ImportSkeleton; aborts the test binary on failure. `motion`: the clip's
// frames too.
v1::ImportSkeletonResponse MustImport(v1::IkService::Stub& stub,
                                      const std::string& path, bool motion);

// A goal on `chain` towards `target`.
v1::Goal MakeGoal(const std::string& chain, const Eigen::Vector3d& target,
                  v1::Solver solver = v1::SOLVER_AUTO);

// The most expensive request within the server's default limits, for a
// skeleton holding StraightChainDef(32) (chain "chain"): 64 goals on
// targets out of reach, each with a time budget of 60 s of restarts of up
// to 100000 iterations (restarts run until the budget is spent while the
// goal is unreached): 64 minutes of CPU without --max_solve_ms.
v1::SolveRequest ExpensiveSolveRequest(const std::string& skeleton_id);

// `start` with the response's joints applied.
Pose ApplyResponse(const Pose& start, const v1::SolveResponse& response);

// Model-space position of `joint` under `pose`.
Eigen::Vector3d PositionOf(const Skeleton& skeleton, const Pose& pose,
                           int joint);

}  // namespace reach::testing

#endif  // REACH_TESTS_TESTING_SERVICE_H_
