// service_demo: talks to a running reach-server the way a client would.
// Registers the humanoid in examples/humanoid.skeleton.json (the canonical
// protobuf JSON form of reach.v1.Skeleton), solves both feet and both hands
// in one request, streams a short walk cycle, sends a batch, and lists the
// registry. Every reported error is the server's own measurement; the demo
// also checks the first solve by forward kinematics on its side.
//
//   service_demo [--addr=127.0.0.1:50051] [--skeleton=FILE]
//                [--tls_ca=FILE [--tls_cert=FILE --tls_key=FILE]
//                 [--tls_server_name=NAME]] [--token=TOKEN | $REACH_TOKEN]
//   service_demo --dump_skeleton=FILE   (writes the humanoid JSON and exits)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "client/connect.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "reach/v1/ik_service.grpc.pb.h"
#include "wire/convert.h"
#include "solvers/pose.h"
#include "tests/testing/models.h"

ABSL_FLAG(std::string, addr, "127.0.0.1:50051", "reach-server address");
ABSL_FLAG(std::string, skeleton, "examples/humanoid.skeleton.json",
          "Skeleton JSON file to register");
ABSL_FLAG(std::string, dump_skeleton, "",
          "Write the demo humanoid as skeleton JSON to this file and exit");
ABSL_FLAG(std::string, tls_ca, "",
          "Connect with TLS: PEM file of the CA that signed the server");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM file of a client certificate (mTLS; with --tls_key)");
ABSL_FLAG(std::string, tls_key, "", "PEM file of its private key");
ABSL_FLAG(std::string, tls_server_name, "",
          "Name expected in the server's certificate (default: the host)");
ABSL_FLAG(std::string, token, "",
          "Bearer token for a server with --auth_tokens_file (default: "
          "$REACH_TOKEN)");

namespace reach {
namespace {

// The token every call carries (--token, else $REACH_TOKEN).
std::string& Token() {
  static std::string* const token = new std::string;
  return *token;
}

std::unique_ptr<grpc::ClientContext> Deadline(double seconds = 10) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(int(seconds * 1000)));
  client::AddToken(Token(), context.get());
  return context;
}

int Fail(const char* what, const grpc::Status& status) {
  std::fprintf(stderr, "%s failed: %s (code %d)\n", what,
               status.error_message().c_str(), status.error_code());
  return 1;
}

void PrintResults(const v1::SolveRequest& request,
                  const v1::SolveResponse& response) {
  for (int i = 0; i < response.results_size(); ++i) {
    const v1::GoalResult& r = response.results(i);
    std::printf("  %-6s %-14s reached=%d error=%.2e iterations=%d\n",
                request.goals(i).chain().c_str(),
                v1::Solver_Name(r.solver()).c_str(), r.reached(),
                r.position_error(), r.iterations());
  }
}

int Main() {
  if (!absl::GetFlag(FLAGS_dump_skeleton).empty()) {
    v1::Skeleton skeleton;
    ToProto(testing::HumanoidDef(), &skeleton);
    skeleton.set_name("demo humanoid (CMU joint order, metres)");
    std::string json;
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    (void)google::protobuf::util::MessageToJsonString(skeleton, &json, options);
    std::ofstream(absl::GetFlag(FLAGS_dump_skeleton)) << json;
    return 0;
  }

  std::ifstream file(absl::GetFlag(FLAGS_skeleton));
  std::stringstream text;
  text << file.rdbuf();
  v1::RegisterSkeletonRequest registration;
  const auto parsed = google::protobuf::util::JsonStringToMessage(
      text.str(), registration.mutable_skeleton());
  if (!file || !parsed.ok()) {
    std::fprintf(stderr, "%s: %s\n", absl::GetFlag(FLAGS_skeleton).c_str(),
                 file ? std::string(parsed.message()).c_str()
                      : "cannot read the file");
    return 1;
  }

  Token() = absl::GetFlag(FLAGS_token);
  if (const char* env = std::getenv("REACH_TOKEN");
      Token().empty() && env != nullptr) {
    Token() = env;
  }
  if (!Token().empty()) {
    if (absl::Status s = client::ValidateToken(Token()); !s.ok()) {
      std::fprintf(stderr, "--%s\n", std::string(s.message()).c_str());
      return 2;
    }
  }
  client::ConnectOptions connect;
  connect.address = absl::GetFlag(FLAGS_addr);
  connect.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  connect.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  connect.tls_key = absl::GetFlag(FLAGS_tls_key);
  connect.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> connected =
      client::Connect(connect);
  if (!connected.ok()) {
    std::fprintf(stderr, "--%s\n",
                 std::string(connected.status().message()).c_str());
    return 2;
  }
  std::shared_ptr<grpc::Channel> channel = *std::move(connected);
  std::printf("connected to %s (%s%s)\n", connect.address.c_str(),
              client::UsesTls(connect) ? "TLS" : "plaintext",
              Token().empty() ? "" : ", with a token");
  if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                 std::chrono::seconds(20))) {
    std::fprintf(stderr, "cannot reach %s\n", absl::GetFlag(FLAGS_addr).c_str());
    return 1;
  }
  auto stub = v1::IkService::NewStub(channel);

  // 1. Register (idempotent: a second run gets the same id back).
  v1::RegisterSkeletonResponse registered;
  grpc::Status status =
      stub->RegisterSkeleton(Deadline().get(), registration, &registered);
  if (!status.ok()) return Fail("RegisterSkeleton", status);
  const std::string& id = registered.skeleton_id();
  std::printf("RegisterSkeleton: %s, %d joints -> id %.16s... version %lld "
              "(%s)\n",
              registration.skeleton().name().c_str(),
              registration.skeleton().joints_size(), id.c_str(),
              static_cast<long long>(registered.version()),
              registered.created() ? "new" : "already registered");

  // The skeleton on this side, for targets and an independent FK check.
  SkeletonDef def;
  (void)FromProto(registration.skeleton(), &def);
  const Skeleton skeleton = *Skeleton::Create(def);
  std::vector<Transform> rest(skeleton.num_joints());
  ComputeGlobals(skeleton, RestPose(skeleton), absl::MakeSpan(rest));
  auto tip_of = [&](const char* chain) {
    return skeleton.chain(skeleton.FindChain(chain)).joints.back();
  };

  // 2. Solve: feet forward and up (knees pointing forward), hands reaching.
  v1::SolveRequest request;
  request.set_skeleton_id(id);
  const struct {
    const char* chain;
    Eigen::Vector3d offset;
  } goals[] = {{"l_leg", {0.0, 0.15, 0.2}},
               {"r_leg", {0.0, 0.05, -0.1}},
               {"l_arm", {-0.15, -0.2, 0.25}},
               {"r_arm", {0.15, -0.2, 0.25}}};
  for (const auto& g : goals) {
    v1::Goal* goal = request.add_goals();
    goal->set_chain(g.chain);
    ToProto(rest[tip_of(g.chain)].translation + g.offset,
            goal->mutable_target());
    if (absl::string_view(g.chain).find("leg") != absl::string_view::npos) {
      ToProto(rest[tip_of(g.chain)].translation + Eigen::Vector3d(0, 0.4, 1),
              goal->mutable_pole());
    }
  }
  v1::SolveResponse solved;
  status = stub->Solve(Deadline().get(), request, &solved);
  if (!status.ok()) return Fail("Solve", status);
  std::printf("Solve: 4 goals, %d joints rotated\n",
              solved.rotated_joints_size());
  PrintResults(request, solved);
  Pose pose = RestPose(skeleton);
  if (absl::Status applied = ApplyResponse(solved, &pose); !applied.ok()) {
    std::fprintf(stderr, "ApplyResponse: %s\n", applied.ToString().c_str());
    return 1;
  }
  std::vector<Transform> globals(skeleton.num_joints());
  ComputeGlobals(skeleton, pose, absl::MakeSpan(globals));
  double worst = 0;
  for (int i = 0; i < request.goals_size(); ++i) {
    worst = std::max(worst, (globals[tip_of(goals[i].chain)].translation -
                             FromProto(request.goals(i).target()))
                                .norm());
  }
  std::printf("  forward kinematics on the client: worst tip error %.2e m\n",
              worst);

  // 3. SolveStream: 240 frames of a walking left foot, warm-started.
  grpc::ClientContext stream_context;
  client::AddToken(Token(), &stream_context);
  auto stream = stub->SolveStream(&stream_context);
  const Eigen::Vector3d foot = rest[tip_of("l_leg")].translation;
  constexpr int kFrames = 240;
  int iterations = 0, reached = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kFrames; ++i) {
    const double phase = 2 * M_PI * i / 60.0;
    v1::SolveRequest frame;
    frame.set_skeleton_id(id);
    frame.set_sequence(i);
    v1::Goal* goal = frame.add_goals();
    goal->set_chain("l_leg");
    goal->set_solver(v1::SOLVER_FABRIK);
    // Lifted 8 cm so the stride stays within the leg's reach.
    ToProto(foot + Eigen::Vector3d(
                       0, 0.08 + 0.1 * std::max(0.0, std::sin(phase)),
                       0.2 * std::cos(phase)),
            goal->mutable_target());
    if (!stream->Write(frame)) break;
    v1::SolveResponse response;
    if (!stream->Read(&response)) break;
    if (response.has_error()) {
      std::printf("  frame %d: %s\n", i, response.error().message().c_str());
      continue;
    }
    iterations += response.results(0).iterations();
    reached += response.results(0).reached();
  }
  stream->WritesDone();
  status = stream->Finish();
  if (!status.ok()) return Fail("SolveStream", status);
  const double ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - start)
                        .count();
  std::printf("SolveStream: %d frames one at a time, %d reached, %.1f FABRIK "
              "iterations per frame (warm start), %.3f ms per round trip\n",
              kFrames, reached, double(iterations) / kFrames, ms / kFrames);

  // 4. SolveBatch: 100 characters, each its own pose; one rig, so the batch
  // names the skeleton once and the items leave it out.
  v1::SolveBatchRequest batch;
  batch.set_skeleton_id(request.skeleton_id());
  for (int c = 0; c < 100; ++c) {
    v1::SolveRequest* item = batch.add_items();
    *item = request;
    item->clear_skeleton_id();
    item->set_sequence(c);
    item->mutable_goals(0)->mutable_target()->set_z(
        request.goals(0).target().z() + 0.001 * c);
  }
  v1::SolveBatchResponse batched;
  status = stub->SolveBatch(Deadline().get(), batch, &batched);
  if (!status.ok()) return Fail("SolveBatch", status);
  int batch_reached = 0;
  for (const auto& item : batched.items()) {
    for (const auto& r : item.results()) batch_reached += r.reached();
  }
  std::printf("SolveBatch: %d characters, %d of %d goals reached\n",
              batched.items_size(), batch_reached, 4 * batched.items_size());

  // 5. ListSkeletons.
  v1::ListSkeletonsRequest list;
  v1::ListSkeletonsResponse listed;
  status = stub->ListSkeletons(Deadline().get(), list, &listed);
  if (!status.ok()) return Fail("ListSkeletons", status);
  std::printf("ListSkeletons: %d registered\n", listed.skeletons_size());
  for (const auto& s : listed.skeletons()) {
    std::printf("  %.16s... v%lld %s (%d joints)\n", s.skeleton_id().c_str(),
                static_cast<long long>(s.version()), s.name().c_str(),
                s.joint_count());
  }
  return 0;
}

}  // namespace
}  // namespace reach

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return reach::Main();
}
