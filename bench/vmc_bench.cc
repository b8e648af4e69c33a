// The VMC bridge's latency (`reach vmc`, client/vmc_bridge.h): UDP in to
// UDP out on loopback, through a RetargetStream onto BCN_Epileptic.glb.
//
// Per configuration (rate x performers), each performer has its own bridge
// and its own sender and receiver sockets: the sender sends a VMC frame
// bundle (OK, T, Root/Pos, a Bone/Pos per bone of the default humanoid;
// a walking-like procedural motion) at the rate, the receiver takes the
// bridge's output and matches it to its frame by /VMC/Ext/T. Latency: from
// just before sendto to just after recv. Printed: frames sent, out and
// superseded (latest wins), latency p50/p99/max over all performers.
//
// --trackers: tracker mode instead (`reach vmc --trackers`), an HMD and two
// controllers onto the limited humanoid through SolveStream.
//
// Run: scripts/bench-vmc (or build/bench/vmc_bench --help). --addr
// measures a running reach-server instead of one started in this process.
#include <arpa/inet.h>
#include <lo/lo.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/osc.h"
#include "client/reach_client.h"
#include "client/vmc_bridge.h"
#include "google/protobuf/util/json_util.h"
#include "tests/testing/service.h"

ABSL_FLAG(std::string, addr, "",
          "A running reach-server (default: one in this process)");
ABSL_FLAG(double, seconds, 10, "Length of each configuration's run");
ABSL_FLAG(std::string, rates, "60,120", "Frame rates to run (Hz)");
ABSL_FLAG(std::string, performers, "1,4", "Performer counts to run");
ABSL_FLAG(std::string, target,
          REACH_SOURCE_DIR "/tests/data/rigs/BCN_Epileptic.glb",
          "The target rig");
ABSL_FLAG(bool, trackers, false,
          "Tracker mode (`reach vmc --trackers`): an HMD and two "
          "controllers drive --tracker_target through SolveStream");
ABSL_FLAG(std::string, tracker_target,
          REACH_SOURCE_DIR "/examples/humanoid_limited.skeleton.json",
          "The target rig of tracker mode");
ABSL_FLAG(int, parse_iterations, 200000,
          "Decodes of one frame bundle by Reach's decoder and by liblo's "
          "(0: skip that comparison)");
ABSL_FLAG(bool, send_from_receive_thread, true,
          "VmcBridgeOptions::send_from_receive_thread (false: every frame "
          "handed to the bridge's send thread, as before)");
ABSL_FLAG(bool, channel_per_performer, true,
          "Each performer's bridge on its own gRPC channel and connection, "
          "as separate `reach vmc` processes are (false: all on one)");
ABSL_FLAG(int, solver_threads, 0,
          "In-process server's solver threads; 0: hardware");

namespace reach {
namespace {

int UdpSocket(int* port) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  const int buffer = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
  socklen_t length = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &length);
  *port = ntohs(a.sin_port);
  return fd;
}

struct Bone {
  std::string name;
  Eigen::Vector3d offset;
};

// Frame `i` at `rate` of a procedural walk, as a VMC bundle.
void WriteFrame(const std::vector<Bone>& bones, int i, double rate,
                osc::Writer* w) {
  const double t = i / rate;
  const double phase = 2 * M_PI * t;  // One stride a second.
  w->Clear();
  w->OpenBundle();
  w->Message("/VMC/Ext/OK").Int(1);
  w->Message("/VMC/Ext/T").Float(static_cast<float>(t));
  w->Message("/VMC/Ext/Root/Pos").String("root");
  for (const float v : {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 1.f}) w->Float(v);
  for (const Bone& b : bones) {
    double angle = 0;
    Eigen::Vector3d axis = Eigen::Vector3d::UnitX();
    if (b.name == "LeftUpperLeg") angle = 0.5 * std::sin(phase);
    if (b.name == "RightUpperLeg") angle = -0.5 * std::sin(phase);
    if (b.name == "LeftLowerLeg") angle = 0.6 * (1 + std::sin(phase + 1));
    if (b.name == "RightLowerLeg") angle = 0.6 * (1 - std::sin(phase + 1));
    if (b.name == "LeftUpperArm" || b.name == "RightUpperArm") {
      axis = Eigen::Vector3d::UnitZ();
      angle = (b.name == "LeftUpperArm" ? -1 : 1) * 1.2;
    }
    if (b.name == "LeftLowerArm") angle = -0.4 * std::sin(phase);
    const Eigen::Quaterniond q(Eigen::AngleAxisd(angle, axis));
    Eigen::Vector3d p = b.offset;
    if (b.name == "Hips")
      p += Eigen::Vector3d(0, 0.02 * std::sin(2 * phase), 0.8 * t);
    w->Message("/VMC/Ext/Bone/Pos").String(b.name);
    for (const double v :
         {-p.x(), p.y(), p.z(), q.x(), -q.y(), -q.z(), q.w()}) {
      w->Float(static_cast<float>(v));
    }
  }
  w->CloseBundle();
}

// Frame `i` at `rate` of a procedural VR session, as a VMC bundle: the
// head bobbing and turning a little, the hands circling in front.
void WriteTrackerFrame(int i, double rate, osc::Writer* w) {
  const double t = i / rate;
  const double phase = 2 * M_PI * 0.5 * t;
  w->Clear();
  w->OpenBundle();
  w->Message("/VMC/Ext/OK").Int(1);
  w->Message("/VMC/Ext/T").Float(static_cast<float>(t));
  const auto put = [&](const char* address, const char* serial,
                       const Eigen::Vector3d& p, const Eigen::Quaterniond& q) {
    w->Message(address).String(serial);
    for (const double v :
         {-p.x(), p.y(), p.z(), q.x(), -q.y(), -q.z(), q.w()}) {
      w->Float(static_cast<float>(v));
    }
  };
  put("/VMC/Ext/Hmd/Pos", "HMD",
      Eigen::Vector3d(0.02 * std::sin(phase), 1.55 + 0.03 * std::sin(2 * phase),
                      0.02),
      Eigen::Quaterniond(
          Eigen::AngleAxisd(0.3 * std::sin(phase), Eigen::Vector3d::UnitY())));
  for (const int side : {1, -1}) {
    put("/VMC/Ext/Con/Pos", side > 0 ? "CON-L" : "CON-R",
        Eigen::Vector3d(side * (0.25 + 0.1 * std::cos(phase)),
                        1.1 + 0.15 * std::sin(phase + side), 0.3),
        Eigen::Quaterniond::Identity());
  }
  w->CloseBundle();
}

struct Run {
  int sent = 0;
  int out = 0;
  uint64_t superseded = 0;
  std::vector<absl::Duration> latencies;
  client::VmcBridgeCounts counts;  // The bridge's, at the end.
};

// One performer at `rate` for `seconds` through its own bridge.
Run Perform(client::ReachClient& client, const std::vector<Bone>& bones,
            double rate, double seconds) {
  Run run;
  int out_port = 0, in_port = 0;
  const int out_fd = UdpSocket(&out_port);
  const int in_fd = UdpSocket(&in_port);
  client::VmcBridgeOptions options;
  options.listen = "127.0.0.1:0";
  options.send_to = absl::StrCat("127.0.0.1:", out_port);
  const bool trackers = absl::GetFlag(FLAGS_trackers);
  options.target = trackers ? absl::GetFlag(FLAGS_tracker_target)
                            : absl::GetFlag(FLAGS_target);
  options.trackers = trackers;
  options.send_from_receive_thread =
      absl::GetFlag(FLAGS_send_from_receive_thread);
  absl::StatusOr<std::unique_ptr<client::VmcBridge>> bridge =
      client::VmcBridge::Start(client, options);
  if (!bridge.ok()) {
    std::fprintf(stderr, "bridge: %s\n", bridge.status().ToString().c_str());
    std::exit(1);
  }
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to.sin_port = htons(static_cast<uint16_t>((*bridge)->port()));

  const int frames = static_cast<int>(seconds * rate);
  std::vector<absl::Time> sent_at(static_cast<size_t>(frames));
  std::atomic<int> sent{0};
  std::atomic<bool> done{false};
  std::thread receiver([&] {
    std::vector<uint8_t> buffer(65536);
    osc::Packet packet;
    while (true) {
      pollfd p{out_fd, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) {
        if (done.load()) break;
        continue;
      }
      const ssize_t n = recv(out_fd, buffer.data(), buffer.size(), 0);
      const absl::Time now = absl::Now();
      if (n <= 0 ||
          osc::Decode(buffer.data(), static_cast<size_t>(n), osc::Limits(),
                      &packet) != osc::DecodeResult::kOk) {
        continue;
      }
      for (const osc::Message& m : packet.messages) {
        if (m.address != "/VMC/Ext/T" || m.argument_count < 1) continue;
        const int i = static_cast<int>(
            std::lround(static_cast<double>(packet.arg(m, 0).f) * rate));
        if (i >= 0 && i < sent.load()) {
          run.latencies.push_back(now - sent_at[static_cast<size_t>(i)]);
          ++run.out;
        }
      }
    }
  });
  osc::Writer w;
  const absl::Time begin = absl::Now();
  for (int i = 0; i < frames; ++i) {
    const absl::Time due = begin + absl::Seconds(i / rate);
    if (due > absl::Now()) absl::SleepFor(due - absl::Now());
    if (trackers) {
      WriteTrackerFrame(i, rate, &w);
    } else {
      WriteFrame(bones, i, rate, &w);
    }
    sent_at[static_cast<size_t>(i)] = absl::Now();
    sent.store(i + 1);
    sendto(in_fd, w.data(), w.size(), 0, reinterpret_cast<sockaddr*>(&to),
           sizeof to);
  }
  absl::SleepFor(absl::Milliseconds(300));
  done.store(true);
  receiver.join();
  run.sent = frames;
  run.counts = (*bridge)->counts();
  run.superseded = run.counts.frames_superseded;
  const absl::Status stopped = (*bridge)->Stop();
  if (!stopped.ok()) {
    std::fprintf(stderr, "bridge: %s\n", stopped.ToString().c_str());
  }
  close(out_fd);
  close(in_fd);
  return run;
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

// The machine's 1-minute load average (/proc/loadavg): the tail here is
// other processes' load.
std::string LoadAverage() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (f == nullptr) return "?";
  char text[32] = {0};
  const int read = std::fscanf(f, "%31s", text);
  std::fclose(f);
  return read == 1 ? text : "?";
}

int CountMessage(const char*, const char*, lo_arg**, int, lo_message,
                 void* count) {
  ++*static_cast<int*>(count);
  return 0;
}

// One frame bundle decoded `iterations` times by osc::Decode (what the
// bridge runs) and by liblo's lo_server_dispatch_data (a LO_UNIX server,
// no network socket, one catch-all handler): microseconds per bundle.
void CompareDecoders(const std::vector<Bone>& bones, int iterations) {
  osc::Writer w;
  WriteFrame(bones, 1, 60, &w);
  const std::string bytes = w.bytes();
  osc::Packet packet;
  int messages = 0;
  absl::Time begin = absl::Now();
  for (int i = 0; i < iterations; ++i) {
    osc::Decode(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                osc::Limits(), &packet);
    messages += static_cast<int>(packet.messages.size());
  }
  const double ours = absl::ToDoubleMicroseconds(absl::Now() - begin);
  const std::string path = absl::StrCat("/tmp/reach_vmc_bench_", getpid());
  lo_server server = lo_server_new_with_proto(path.c_str(), LO_UNIX, nullptr);
  int lo_messages = 0;
  lo_server_add_method(server, nullptr, nullptr, &CountMessage, &lo_messages);
  std::string copy = bytes;
  begin = absl::Now();
  for (int i = 0; i < iterations; ++i) {
    copy = bytes;
    lo_server_dispatch_data(server, copy.data(), copy.size());
  }
  const double lo = absl::ToDoubleMicroseconds(absl::Now() - begin);
  lo_server_free(server);
  unlink(path.c_str());
  std::printf(
      "decoding a %zu-byte frame bundle of %d messages: osc::Decode "
      "%.2f us, liblo lo_server_dispatch_data %.2f us (%d and %d "
      "messages seen)\n",
      bytes.size(), iterations > 0 ? messages / iterations : 0,
      ours / iterations, lo / iterations, messages, lo_messages);
}

int Main() {
  std::unique_ptr<testing::TestServer> server;
  std::string address = absl::GetFlag(FLAGS_addr);
  if (address.empty()) {
    ServerOptions options = testing::TestServerOptions();
    options.solver_threads = absl::GetFlag(FLAGS_solver_threads);
    server = std::make_unique<testing::TestServer>(options);
    address = server->address();
  }
  // A channel with its own connection (gRPC shares one between channels of
  // equal arguments otherwise).
  const auto new_channel = [&address] {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return grpc::CreateCustomChannel(address,
                                     grpc::InsecureChannelCredentials(), args);
  };
  client::ReachClient client(new_channel());
  std::vector<std::unique_ptr<client::ReachClient>> clients;
  v1::Skeleton humanoid;
  if (!google::protobuf::util::JsonStringToMessage(client::kVmcHumanoidJson,
                                                   &humanoid)
           .ok()) {
    std::fprintf(stderr, "the built-in humanoid does not parse\n");
    return 1;
  }
  std::vector<Bone> bones;
  for (const v1::Joint& j : humanoid.joints()) {
    bones.push_back({j.name(), Eigen::Vector3d(j.rest().translation().x(),
                                               j.rest().translation().y(),
                                               j.rest().translation().z())});
  }
  if (absl::GetFlag(FLAGS_parse_iterations) > 0) {
    CompareDecoders(bones, absl::GetFlag(FLAGS_parse_iterations));
  }
  if (absl::GetFlag(FLAGS_trackers)) {
    std::printf(
        "VMC trackers (HMD, two controllers) in -> SolveStream of "
        "full-body goals (plant_feet) on %s -> VMC out, %.0f s per "
        "run\n",
        absl::GetFlag(FLAGS_tracker_target).c_str(),
        absl::GetFlag(FLAGS_seconds));
  } else {
    std::printf(
        "VMC in -> RetargetStream onto %s -> VMC out, %zu bones a "
        "frame, %.0f s per run\n",
        absl::GetFlag(FLAGS_target).c_str(), bones.size(),
        absl::GetFlag(FLAGS_seconds));
  }
  for (const absl::string_view p_text :
       absl::StrSplit(absl::GetFlag(FLAGS_performers), ',')) {
    for (const absl::string_view r_text :
         absl::StrSplit(absl::GetFlag(FLAGS_rates), ',')) {
      int performers = 0;
      double rate = 0;
      if (!absl::SimpleAtoi(p_text, &performers) ||
          !absl::SimpleAtod(r_text, &rate) || performers < 1 || rate <= 0) {
        std::fprintf(stderr, "bad --performers or --rates\n");
        return 2;
      }
      const std::string load_before = LoadAverage();
      std::vector<Run> runs(static_cast<size_t>(performers));
      std::vector<std::thread> threads;
      while (static_cast<int>(clients.size()) < performers) {
        clients.push_back(std::make_unique<client::ReachClient>(new_channel()));
      }
      for (int k = 0; k < performers; ++k) {
        client::ReachClient* c = absl::GetFlag(FLAGS_channel_per_performer)
                                     ? clients[static_cast<size_t>(k)].get()
                                     : &client;
        threads.emplace_back([&runs, &bones, c, k, rate] {
          runs[static_cast<size_t>(k)] =
              Perform(*c, bones, rate, absl::GetFlag(FLAGS_seconds));
        });
      }
      for (std::thread& t : threads) t.join();
      Run all;
      for (const Run& r : runs) {
        all.sent += r.sent;
        all.out += r.out;
        all.superseded += r.superseded;
        all.latencies.insert(all.latencies.end(), r.latencies.begin(),
                             r.latencies.end());
      }
      std::sort(all.latencies.begin(), all.latencies.end());
      std::printf(
          "%d performer%s at %.0f Hz: %d frames sent, %d out, %llu "
          "superseded; UDP in -> out p50 %.3f ms, p99 %.3f ms, max %.3f ms\n",
          performers, performers == 1 ? "" : "s", rate, all.sent, all.out,
          static_cast<unsigned long long>(all.superseded),
          Ms(client::Percentile(all.latencies, 0.5)),
          Ms(client::Percentile(all.latencies, 0.99)),
          all.latencies.empty() ? 0.0 : Ms(all.latencies.back()));
      // Where the tail is: each bridge's p99 of its stages (the worst
      // bridge's; each stage's own p99, so they do not add up).
      client::VmcBridgeCounts worst;
      for (const Run& r : runs) {
        for (const auto stage : {&client::VmcBridgeCounts::p99_decode,
                                 &client::VmcBridgeCounts::p99_queued,
                                 &client::VmcBridgeCounts::p99_write,
                                 &client::VmcBridgeCounts::p99_server,
                                 &client::VmcBridgeCounts::p99_handover,
                                 &client::VmcBridgeCounts::p99_out,
                                 &client::VmcBridgeCounts::p99_round_trip}) {
          worst.*stage = std::max(worst.*stage, r.counts.*stage);
        }
      }
      std::printf(
          "  inside the bridge, p99 by stage: decode %.3f, queued %.3f "
          "(-> Send), write %.3f (Send), server %.3f (-> answer read: gRPC "
          "both ways and the server), hand-over %.3f (-> answer thread), "
          "out %.3f (bundle, sendto); round trip %.3f ms\n",
          Ms(worst.p99_decode), Ms(worst.p99_queued), Ms(worst.p99_write),
          Ms(worst.p99_server), Ms(worst.p99_handover), Ms(worst.p99_out),
          Ms(worst.p99_round_trip));
      std::printf("  load average %s -> %s\n", load_before.c_str(),
                  LoadAverage().c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace reach

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return reach::Main();
}
