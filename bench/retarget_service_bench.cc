// Retargeting through the service over loopback (issue 18's service
// figures): the CMU walk (tests/data/mocap) onto BCN_Epileptic.glb
// (tests/data/rigs), load generator and server on this machine's cores.
//
//  1. RetargetStream at the maximum rate, 1 and 4 concurrent streams (each
//     frame a source pose; the window keeps frames in flight): retargeted
//     frames per second over all streams, round trips p50/p99.
//  2. One RetargetStream paced at 120 frames per second, as a mocap stage
//     sends: round trips p50/p99/max.
//  3. RetargetBatch of the whole clip: frames per second.
//
// Run: scripts/bench-retarget-service (or build/bench/retarget_service_bench
// --help). --addr measures a running reach-server instead of one started
// in this process.
#include <algorithm>
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
#include "absl/time/clock.h"
#include "client/reach_client.h"
#include "tests/testing/service.h"

ABSL_FLAG(std::string, addr, "",
          "A running reach-server to measure; empty: start one in-process");
ABSL_FLAG(int, frames, 6000, "Frames per stream in the maximum-rate runs");
ABSL_FLAG(int, window, 32, "Frames in flight per stream");
ABSL_FLAG(std::string, streams, "1,4", "Concurrent stream counts to run");
ABSL_FLAG(double, paced_seconds, 10, "Length of the 120 fps run, seconds");
ABSL_FLAG(int, batch_calls, 10, "Timed RetargetBatch calls of the clip");
ABSL_FLAG(int, solver_threads, 0, "In-process server's solver threads; 0: "
                                  "hardware");

namespace reach {
namespace {

struct StreamRun {
  int frames = 0;
  int skipped = 0;
  std::vector<absl::Duration> latencies;
};

// Sends `frames` frames of `clip` (cycled) on one stream, paced at `fps`
// (0: as fast as the window allows).
StreamRun RunStream(client::ReachClient& client, const std::string& profile,
                    const std::vector<v1::Pose>& clip, double frame_time,
                    int frames, double fps, int window) {
  StreamRun run;
  run.latencies.reserve(frames);
  std::unique_ptr<client::RetargetStream> stream =
      client.OpenRetargetStream(absl::Minutes(10), window);
  client::StreamAnswer<v1::RetargetResponse> answer;
  const auto take = [&] {
    if (!answer.response.error().message().empty()) {
      std::fprintf(stderr, "frame %llu: %s\n",
                   static_cast<unsigned long long>(answer.response.sequence()),
                   answer.response.error().message().c_str());
      std::exit(1);
    }
    ++run.frames;
    if (answer.response.skipped()) ++run.skipped;
    run.latencies.push_back(answer.latency);
  };
  v1::RetargetRequest request;
  request.set_profile_id(profile);
  request.set_frame_time_s(frame_time);
  const absl::Time begin = absl::Now();
  for (int i = 0; i < frames; ++i) {
    if (fps > 0) {
      const absl::Time due = begin + absl::Seconds(i / fps);
      const absl::Time now = absl::Now();
      if (due > now) absl::SleepFor(due - now);
    }
    request.set_sequence(i);
    // Frame 0 of the CMU clips is a calibration T-pose: cycle 1..n-1.
    *request.mutable_source() = clip[1 + i % (clip.size() - 1)];
    if (!stream->Send(request)) break;
    while (stream->TryReceive(&answer)) take();
  }
  while (stream->Receive(&answer)) take();
  const absl::Status status = stream->Finish();
  if (!status.ok()) {
    std::fprintf(stderr, "stream: %s\n", status.ToString().c_str());
    std::exit(1);
  }
  return run;
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

int Main() {
  std::unique_ptr<testing::TestServer> server;
  std::shared_ptr<grpc::Channel> channel;
  if (absl::GetFlag(FLAGS_addr).empty()) {
    ServerOptions options = testing::TestServerOptions();
    options.solver_threads = absl::GetFlag(FLAGS_solver_threads);
    server = std::make_unique<testing::TestServer>(options);
    channel = server->channel;
  } else {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(64 << 20);
    channel = grpc::CreateCustomChannel(absl::GetFlag(FLAGS_addr),
                                        grpc::InsecureChannelCredentials(),
                                        args);
  }
  client::ReachClient client(channel, {absl::Seconds(60), ""});
  const std::string data = REACH_SOURCE_DIR "/tests/data/";
  absl::StatusOr<v1::ImportSkeletonResponse> source =
      client.ImportFile(data + "mocap/cmu_02_01_walk.bvh", true);
  absl::StatusOr<v1::ImportSkeletonResponse> target =
      client.ImportFile(data + "rigs/BCN_Epileptic.glb");
  if (!source.ok() || !target.ok()) {
    std::fprintf(stderr, "import: %s %s\n", source.status().ToString().c_str(),
                 target.status().ToString().c_str());
    return 1;
  }
  v1::RetargetProfileSpec spec;
  spec.mutable_source()->set_skeleton_id(source->skeleton_id());
  spec.mutable_target()->set_skeleton_id(target->skeleton_id());
  absl::StatusOr<v1::CreateRetargetProfileResponse> profile =
      client.CreateRetargetProfile(spec);
  if (!profile.ok()) {
    std::fprintf(stderr, "profile: %s\n", profile.status().ToString().c_str());
    return 1;
  }
  const std::string id = profile->profile().profile_id();
  const std::vector<v1::Pose> clip(source->motion().begin(),
                                   source->motion().end());
  const double frame_time = source->frame_time_s();
  std::printf("CMU walk (%d joints, %zu frames) -> BCN (%d joints), %s "
              "server, %u hardware threads\n",
              source->skeleton().joints_size(), clip.size(),
              target->skeleton().joints_size(),
              server ? "in-process" : absl::GetFlag(FLAGS_addr).c_str(),
              std::thread::hardware_concurrency());

  const int frames = absl::GetFlag(FLAGS_frames);
  const int window = absl::GetFlag(FLAGS_window);
  for (const absl::string_view count_text :
       absl::StrSplit(absl::GetFlag(FLAGS_streams), ',')) {
    int count = 0;
    if (!absl::SimpleAtoi(count_text, &count) || count < 1) continue;
    std::vector<StreamRun> runs(count);
    std::vector<std::thread> threads;
    const absl::Time begin = absl::Now();
    for (int s = 0; s < count; ++s) {
      threads.emplace_back([&, s] {
        runs[s] = RunStream(client, id, clip, frame_time, frames, 0, window);
      });
    }
    for (std::thread& t : threads) t.join();
    const double seconds = absl::ToDoubleSeconds(absl::Now() - begin);
    std::vector<absl::Duration> all;
    int answered = 0, skipped = 0;
    for (const StreamRun& run : runs) {
      answered += run.frames;
      skipped += run.skipped;
      all.insert(all.end(), run.latencies.begin(), run.latencies.end());
    }
    std::sort(all.begin(), all.end());
    std::printf("max rate, %d stream(s), window %d: %.0f retargeted frames/s "
                "(%d frames, %d skipped, %.2f s); round trip p50 %.3f ms, "
                "p99 %.3f ms\n",
                count, window, (answered - skipped) / seconds, answered,
                skipped, seconds, Ms(client::Percentile(all, 0.5)),
                Ms(client::Percentile(all, 0.99)));
  }

  const double paced = absl::GetFlag(FLAGS_paced_seconds);
  if (paced > 0) {
    StreamRun run = RunStream(client, id, clip, frame_time,
                              static_cast<int>(paced * 120), 120, window);
    std::sort(run.latencies.begin(), run.latencies.end());
    std::printf("120 fps, 1 stream, %d frames: round trip p50 %.3f ms, p99 "
                "%.3f ms, max %.3f ms\n",
                run.frames, Ms(client::Percentile(run.latencies, 0.5)),
                Ms(client::Percentile(run.latencies, 0.99)),
                Ms(run.latencies.empty() ? absl::ZeroDuration()
                                         : run.latencies.back()));
  }

  const int calls = absl::GetFlag(FLAGS_batch_calls);
  if (calls > 0) {
    v1::RetargetBatchRequest batch;
    batch.set_profile_id(id);
    batch.set_frame_time_s(frame_time);
    for (size_t f = 1; f < clip.size(); ++f) *batch.add_frames() = clip[f];
    const absl::Time begin = absl::Now();
    for (int c = 0; c < calls; ++c) {
      absl::StatusOr<v1::RetargetBatchResponse> answered =
          client.RetargetBatch(batch);
      if (!answered.ok()) {
        std::fprintf(stderr, "batch: %s\n",
                     answered.status().ToString().c_str());
        return 1;
      }
    }
    const double seconds = absl::ToDoubleSeconds(absl::Now() - begin);
    std::printf("RetargetBatch of %d frames: %.2f ms per call, %.0f frames/s "
                "(one call's frames run in order on one solver thread)\n",
                batch.frames_size(), 1e3 * seconds / calls,
                calls * batch.frames_size() / seconds);
  }
  return 0;
}

}  // namespace
}  // namespace reach

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return reach::Main();
}
