// Motion quality of SOLVER_FULL_BODY against the performer, joint by joint
// (tests/testing/motion_eval.h has the protocol, the metrics and how joints
// are found): every BVH clip of a folder in every mode, one Markdown row
// each. A plain program run by scripts/bench-full-body-motion; not run by
// CI. Times are printed, never judged.
//
//   full_body_motion_bench [--clips DIR] [--clip NAME[,NAME...]]
//       [--mode all|clip|30hz|noorient|30hz-noorient|sparse|sparse-30hz|
//               trackers|trackers-30hz[,...]]
//       [--max_iterations N] [--cold_every N] [--body human|none]
//       [--standing_rest] [--verbose]
//   --mode all: the six modes of the matrix (the default), also within a
//   list (all,sparse-30hz).
//   --body none: the full-body solver without its body model (the goals
//   alone), for comparison.
//   --standing_rest: a clip whose all-zero pose does not stand takes its
//   first frame as the rest pose (MotionEvalOptions::standing_rest).
//   full_body_motion_bench --picture OUT.svg --clip NAME --frame F [--mode M]
//
// --clips: the folder of *.bvh (default: the source tree's
// tests/data/mocap). --clip: file names in it (".bvh" optional).
// --verbose: each report's full line and joint choices after the table.
// --picture: evaluates NAME in mode M (default clip) up to frame F and
// writes an SVG of that frame (performer grey, solved red; front and side
// views).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/testing/motion_eval.h"

namespace reach {
namespace {

using testing::MotionEvalOptions;
using testing::MotionReport;

struct Config {
  std::string clips_dir = REACH_TEST_DATA "/mocap";
  std::vector<std::string> clips;  // Empty: every *.bvh of clips_dir.
  std::vector<std::string> modes;  // Empty: all.
  int max_iterations = 0;
  int cold_every = 50;
  bool verbose = false;
  std::string picture;  // SVG path.
  int frame = -1;
  BodyMode body = BodyMode::kHuman;
  bool standing_rest = false;
};

int Usage(const char* argv0) {
  std::fprintf(
      stderr,
      "usage: %s [--clips DIR] [--clip NAME[,NAME...]] [--mode "
      "all|clip|30hz|noorient|30hz-noorient|sparse|sparse-30hz|trackers|"
      "trackers-30hz[,...]] "
      "[--max_iterations N] [--cold_every N] [--body human|none] "
      "[--standing_rest] [--verbose]\n"
      "       %s --picture OUT.svg --clip NAME --frame F [--mode M]\n",
      argv0, argv0);
  return 2;
}

std::vector<std::string> ListClips(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (absl::EndsWith(name, ".bvh")) out.push_back(name);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

int Main(int argc, char** argv) {
  Config config;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) return nullptr;
      return argv[++i];
    };
    const char* v = nullptr;
    if (arg == "--verbose") {
      config.verbose = true;
      continue;
    }
    if (arg == "--standing_rest") {
      config.standing_rest = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") return Usage(argv[0]);
    if ((v = value()) == nullptr) return Usage(argv[0]);
    if (arg == "--clips") {
      config.clips_dir = v;
    } else if (arg == "--clip") {
      for (absl::string_view c : absl::StrSplit(v, ',', absl::SkipEmpty())) {
        std::string name(c);
        if (!absl::EndsWith(name, ".bvh")) name += ".bvh";
        config.clips.push_back(name);
      }
    } else if (arg == "--mode") {
      // "all" is the six modes of the matrix, alone or in a list.
      for (absl::string_view m : absl::StrSplit(v, ',', absl::SkipEmpty())) {
        for (const std::string& mode :
             m == "all" ? testing::AllModeNames()
                        : std::vector<std::string>{std::string(m)}) {
          if (std::find(config.modes.begin(), config.modes.end(), mode) ==
              config.modes.end()) {
            config.modes.push_back(mode);
          }
        }
      }
    } else if (arg == "--max_iterations") {
      config.max_iterations = std::atoi(v);
    } else if (arg == "--cold_every") {
      config.cold_every = std::atoi(v);
    } else if (arg == "--body") {
      if (std::string(v) == "human") {
        config.body = BodyMode::kHuman;
      } else if (std::string(v) == "none") {
        config.body = BodyMode::kNone;
      } else {
        return Usage(argv[0]);
      }
    } else if (arg == "--picture") {
      config.picture = v;
    } else if (arg == "--frame") {
      config.frame = std::atoi(v);
    } else {
      return Usage(argv[0]);
    }
  }
  for (const std::string& m : config.modes) {
    if (!testing::ModeOptions(m)) {
      std::fprintf(stderr, "unknown mode %s\n", m.c_str());
      return Usage(argv[0]);
    }
  }

  if (!config.picture.empty()) {
    if (config.clips.size() != 1 || config.frame < 0 || config.modes.size() > 1) {
      std::fprintf(stderr, "--picture needs one --clip, --frame F and at most one --mode\n");
      return Usage(argv[0]);
    }
    MotionEvalOptions options =
        *testing::ModeOptions(config.modes.empty() ? "clip" : config.modes[0]);
    options.max_iterations = config.max_iterations;
    options.solver.body = config.body;
    options.standing_rest = config.standing_rest;
    options.cold_every = 0;
    options.last_frame = config.frame;
    const absl::StatusOr<MotionReport> report = testing::EvaluateClip(
        absl::StrCat(config.clips_dir, "/", config.clips[0]), options);
    if (!report.ok()) {
      std::fprintf(stderr, "%s\n", report.status().ToString().c_str());
      return 1;
    }
    std::ofstream out(config.picture);
    out << testing::SnapshotSvg(*report);
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", config.picture.c_str());
      return 1;
    }
    std::printf("%s\nwrote %s (frame %d)\n", testing::FormatReport(*report).c_str(),
                config.picture.c_str(), report->snapshot->frame);
    return 0;
  }

  if (config.clips.empty()) config.clips = ListClips(config.clips_dir);
  if (config.clips.empty()) {
    std::fprintf(stderr, "no .bvh clips in %s\n", config.clips_dir.c_str());
    return 1;
  }
  if (config.modes.empty()) config.modes = testing::AllModeNames();

  const auto start = std::chrono::steady_clock::now();
  std::printf("%s\n", testing::MarkdownHeader().c_str());
  std::fflush(stdout);
  std::vector<MotionReport> reports;
  int failures = 0;
  for (const std::string& clip : config.clips) {
    for (const std::string& mode : config.modes) {
      MotionEvalOptions options = *testing::ModeOptions(mode);
      options.max_iterations = config.max_iterations;
      options.solver.body = config.body;
      options.standing_rest = config.standing_rest;
      options.cold_every = config.cold_every;
      absl::StatusOr<MotionReport> report = testing::EvaluateClip(
          absl::StrCat(config.clips_dir, "/", clip), options);
      if (!report.ok()) {
        std::printf("| %s | %s | error: %s |\n", clip.c_str(), mode.c_str(),
                    report.status().ToString().c_str());
        ++failures;
        continue;
      }
      std::printf("%s\n", testing::MarkdownRow(*report).c_str());
      std::fflush(stdout);
      reports.push_back(*std::move(report));
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "\n%zu evaluations in %.1f s (max_iterations %d%s, cold solve every %d "
      "frames). Lengths in cm (effectors mm); jitter and step ratios are "
      "solved / performer; spine excess = worst spine or clavicle joint's "
      "mean angular speed minus 1.5x the performer's.\n",
      reports.size(), seconds, config.max_iterations,
      config.max_iterations == 0 ? " = 64" : "", config.cold_every);
  if (config.verbose) {
    for (const MotionReport& r : reports) {
      std::printf("\n%s\n", testing::FormatReport(r).c_str());
    }
  } else if (!reports.empty()) {
    // The joint choices once per clip (the first mode's notes).
    std::printf("\nJoint roles:\n");
    std::string last;
    for (const MotionReport& r : reports) {
      if (r.clip == last || r.notes.size() < 2) continue;
      last = r.clip;
      std::printf("- %s: %s; %s\n", r.clip.c_str(), r.notes[0].c_str(),
                  r.notes[1].c_str());
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace reach

int main(int argc, char** argv) { return reach::Main(argc, argv); }
