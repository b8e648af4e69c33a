// `reach vmc --to TARGET`: a live VMC performance (UDP) retargeted by the
// server onto TARGET and sent on as VMC (client/vmc_bridge.h); with
// --trackers, VR trackers drive TARGET's full body instead.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli/common.h"
#include "client/vmc_bridge.h"
#include "importers/import_error.h"

namespace reach::cli {
namespace {

std::atomic<bool> g_stop{false};

extern "C" void OnStopSignal(int) { g_stop.store(true); }

struct VmcFlags {
  std::string to;
  std::string source;
  std::string listen = "127.0.0.1:39539";
  std::string send = "127.0.0.1:39540";
  std::string bones = "normalized";
  double scale = 1;
  int window = 2;
  int target_frame = -1;
  ProfileFlags profile;
  double duration_s = 0;
  double status_interval_s = 10;
  std::string status_file;
  bool quiet = false;
  bool trackers = false;
  std::string left_hand, right_hand, pelvis, left_foot, right_foot;
  std::string tracker_offsets;
  double reconnect_within_s = 60;
};

// Writes `text` to `path` whole (a temporary file renamed over it), as
// Prometheus' node_exporter textfile collector wants.
void WriteStatusFile(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << text;
    if (!out) return;
  }
  std::rename(temporary.c_str(), path.c_str());
}

std::string Summary(const client::VmcBridgeCounts& c) {
  const vmc::ReceiveCounts& r = c.receive;
  return absl::StrFormat(
      "packets: %d ok, %d malformed, %d too large, %d reordered, %d "
      "truncated; frames: %d in, %d superseded, %d sent, %d out, %d skipped, "
      "%d errors, ~%d lost; ignored: %d unknown addresses, %d unknown bones, "
      "%d bad arguments, %d tracker; trackers: %d applied, %d unknown "
      "serials, %d frames without a goal; in->out p50 %.3f ms, p99 %.3f ms",
      r.packets_ok, r.packets_malformed, r.packets_too_large,
      r.packets_reordered, c.packets_truncated, r.frames, c.frames_superseded,
      c.frames_sent, c.frames_out, c.frames_skipped, c.frames_errors,
      r.frames_lost, r.unknown_address, r.unknown_bone, r.bad_arguments,
      r.tracker, c.trackers_applied, c.trackers_unknown_serial,
      c.frames_no_goal, absl::ToDoubleMilliseconds(c.p50),
      absl::ToDoubleMilliseconds(c.p99));
}

int RunVmc(const Globals& globals, const VmcFlags& flags) {
  client::VmcBridgeOptions options;
  options.listen = flags.listen;
  options.send_to = flags.send;
  options.source = flags.source;
  options.target = flags.to;
  options.target_reference_frame = flags.target_frame;
  options.bones =
      flags.bones == "raw" ? vmc::BoneMode::kRaw : vmc::BoneMode::kNormalized;
  options.scale = flags.scale;
  options.max_in_flight = flags.window;
  options.trackers = flags.trackers;
  options.assignment = {flags.left_hand, flags.right_hand, flags.pelvis,
                        flags.left_foot, flags.right_foot};
  if (absl::Status s = ApplyProfileFlags(flags.profile, &options.spec);
      !s.ok()) {
    return Fail(s, kExitUsage);
  }
  options.reconnect_within = absl::Seconds(flags.reconnect_within_s);
  if (!flags.tracker_offsets.empty()) {
    std::string text;
    if (absl::Status s = import::ReadFile(flags.tracker_offsets, &text);
        !s.ok()) {
      return Fail(s, kExitFileError);
    }
    absl::StatusOr<vmc::TrackerOffsets> offsets = vmc::ParseTrackerOffsets(
        text, absl::StrCat("--tracker-offsets ", flags.tracker_offsets));
    if (!offsets.ok()) return Fail(offsets.status(), kExitFileError);
    options.tracker_offsets = *std::move(offsets);
  }
  if (flags.duration_s > 0) {
    options.max_duration = absl::Seconds(flags.duration_s) + absl::Minutes(1);
  }
  // A restarted server is found again within a quarter second (gRPC's
  // reconnect backoff otherwise grows to minutes while it is down).
  auto made = MakeClient(globals, /*max_reconnect_backoff_ms=*/250);
  if (!made.ok()) return FailSetup(made.status());
  auto client = *std::move(made);
  absl::StatusOr<std::unique_ptr<client::VmcBridge>> started =
      client::VmcBridge::Start(*client, options);
  if (!started.ok()) {
    const absl::string_view message = started.status().message();
    if (absl::StartsWith(message, "--")) {
      return Fail(started.status(), kExitUsage);
    }
    if ((!flags.source.empty() && absl::StartsWith(message, flags.source)) ||
        absl::StartsWith(message, flags.to)) {
      return Fail(started.status(), kExitFileError);
    }
    return FailRpc(started.status());
  }
  client::VmcBridge& bridge = **started;
  std::vector<std::string> bones;
  for (const auto& [bone, joint] : bridge.bones()) {
    bones.push_back(absl::StrCat(bone, "=", joint));
  }
  if (flags.trackers) {
    std::vector<std::string> goals;
    for (const auto& [part, joint] : bridge.goal_joints()) {
      goals.push_back(absl::StrCat(part, "=", joint));
    }
    std::printf("trackers -> %s (%s): %s;", bridge.target_name().c_str(),
                bridge.target_id().c_str(), absl::StrJoin(goals, ", ").c_str());
  } else {
    std::printf("profile %s: %s -> %s;", bridge.profile().profile_id().c_str(),
                bridge.profile().source().skeleton_name().c_str(),
                bridge.profile().target().skeleton_name().c_str());
  }
  std::printf(" listening on %s:%d, sending %zu bones (%s) to %s\n",
              flags.listen.substr(0, flags.listen.rfind(':')).c_str(),
              bridge.port(), bones.size(), absl::StrJoin(bones, " ").c_str(),
              flags.send.c_str());
  std::fflush(stdout);

  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGTERM, OnStopSignal);
  const absl::Time begin = absl::Now();
  absl::Time next_status = begin + absl::Seconds(flags.status_interval_s);
  bool broke = false;
  while (!g_stop.load()) {
    if (bridge.Wait(absl::Milliseconds(100))) {
      broke = true;
      break;
    }
    const absl::Time now = absl::Now();
    if (flags.duration_s > 0 &&
        now - begin >= absl::Seconds(flags.duration_s)) {
      break;
    }
    if (flags.status_interval_s > 0 && now >= next_status) {
      next_status = now + absl::Seconds(flags.status_interval_s);
      if (!flags.quiet) {
        std::fprintf(stderr, "%s\n", Summary(bridge.counts()).c_str());
      }
      if (!flags.status_file.empty()) {
        WriteStatusFile(flags.status_file, bridge.PrometheusText());
      }
    }
  }
  const absl::Status status = bridge.Stop();
  if (!flags.status_file.empty()) {
    WriteStatusFile(flags.status_file, bridge.PrometheusText());
  }
  std::printf("%s\n", Summary(bridge.counts()).c_str());
  const std::string first_error = bridge.first_error();
  if (!first_error.empty()) {
    std::printf("first frame error: %s\n", first_error.c_str());
  }
  if (broke || !status.ok()) return FailRpc(status);
  return kExitOk;
}

}  // namespace

void AddVmcCommand(CLI::App& app, const Globals& globals, Command* run) {
  auto flags = std::make_shared<VmcFlags>();
  CLI::App* cmd = app.add_subcommand(
      "vmc",
      "Bridge a live VMC performance (OSC over UDP, from VSeeFace, "
      "VirtualMotionCapture, Warudo, ...) through the server's "
      "RetargetStream onto a rig, and send the retargeted pose on as VMC. "
      "Runs until SIGINT/SIGTERM or --duration; prints its counts.");
  cmd->add_option("--to", flags->to,
                  "Target rig: a skeleton file (.bvh, .gltf, .glb, .json, "
                  ".urdf) or a registered skeleton id")
      ->required();
  cmd->add_option("--source", flags->source,
                  "The performer's skeleton with HumanBodyBones joint names "
                  "(default: the built-in normalised T-pose humanoid, "
                  "examples/vmc_humanoid.skeleton.json)");
  cmd->add_option("--listen", flags->listen,
                  "Receive VMC on IPV4:PORT (port 0: any)")
      ->capture_default_str();
  cmd->add_option("--send", flags->send, "Send the retargeted VMC to IPV4:PORT")
      ->capture_default_str();
  cmd->add_option("--bones", flags->bones,
                  "normalized: rotations relative to the target's retarget "
                  "pose (VRM 0.x receivers); raw: the target joints' own "
                  "local frames")
      ->capture_default_str()
      ->check(CLI::IsMember({"normalized", "raw"}));
  cmd->add_option("--scale", flags->scale,
                  "Metres per target unit for the positions sent")
      ->capture_default_str()
      ->check(Positive());
  cmd->add_option("--window", flags->window,
                  "Frames in flight to the server at most")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_option("--target-frame", flags->target_frame,
                  "A BVH target's retarget pose is this frame of it")
      ->check(NonNegative());
  AddProfileFlags(cmd, &flags->profile,
                  "Use the target's rest as its retarget pose instead of "
                  "turning its limbs to the source's");
  cmd->add_option("--duration", flags->duration_s,
                  "Stop after this many seconds (default: run until a signal)")
      ->check(NonNegative());
  cmd->add_option("--status-interval", flags->status_interval_s,
                  "Print the counts to stderr every S seconds (0: only at the "
                  "end)")
      ->capture_default_str()
      ->check(NonNegative());
  cmd->add_option("--status-file", flags->status_file,
                  "Also write the counts there in Prometheus' text format "
                  "(node_exporter's textfile collector), replaced whole");
  cmd->add_flag("--quiet", flags->quiet, "No periodic status on stderr");
  cmd->add_option("--reconnect-within", flags->reconnect_within_s,
                  "When the stream to the server breaks (a restart, a "
                  "replica killed), reopen it for up to S seconds, the "
                  "frames not yet answered sent again (0: a break ends the "
                  "bridge)")
      ->capture_default_str()
      ->check(NonNegative());
  // A switch named after the messages it consumes (/VMC/Ext/Tra|Hmd|Con/Pos
  // are VMC's "tracker" family), as --bones names how bones go out: the
  // input differs, not the output, so it is not a second command.
  CLI::Option* trackers = cmd->add_flag(
      "--trackers", flags->trackers,
      "Tracker mode: drive the rig's full body from VR trackers "
      "(/VMC/Ext/Hmd/Pos: head, /VMC/Ext/Con/Pos: hands, /VMC/Ext/Tra/Pos: "
      "pelvis and feet when named) through the server's SolveStream "
      "(feet without a tracker stay planted) instead of retargeting bones");
  for (const auto& [flag, serial, part] :
       {std::make_tuple("--left-hand", &flags->left_hand,
                        "the left hand (default: a controller appearing on "
                        "the head's left)"),
        std::make_tuple("--right-hand", &flags->right_hand,
                        "the right hand (default: a controller appearing on "
                        "the head's right)"),
        std::make_tuple("--pelvis", &flags->pelvis, "the pelvis"),
        std::make_tuple("--left-foot", &flags->left_foot, "the left foot"),
        std::make_tuple("--right-foot", &flags->right_foot,
                        "the right foot")}) {
    cmd->add_option(flag, *serial,
                    absl::StrCat("With --trackers: the serial of the tracker "
                                 "that drives ",
                                 part))
        ->needs(trackers);
  }
  cmd->add_option("--tracker-offsets", flags->tracker_offsets,
                  "With --trackers: a JSON file of where trackers sit on the "
                  "body, by body part (head, left_hand, right_hand, pelvis, "
                  "left_foot, right_foot) or serial: {\"head\": "
                  "{\"position\": [0, -0.08, -0.1], \"rotation\": [0, 0, 0, "
                  "1]}}, the joint's offset in the tracker's own frame "
                  "(Unity axes, metres; docs/vmc.md)")
      ->needs(trackers);
  cmd->callback([=, &globals] {
    *run = [=, &globals] { return RunVmc(globals, *flags); };
  });
}

}  // namespace reach::cli
