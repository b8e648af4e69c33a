// What every `reach` subcommand shares: global flags, exit codes, the
// client, parsing of vectors and solver names, error printing.
#ifndef REACH_CLIENT_CLI_COMMON_H_
#define REACH_CLIENT_CLI_COMMON_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "client/reach_client.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"

namespace reach::cli {

// Exit codes (documented in `reach --help` and docs/cli.md).
enum ExitCode {
  kExitOk = 0,
  kExitRpcError = 1,     // The server answered with an error, or is down.
  kExitUsage = 2,        // Bad command line.
  kExitFileError = 3,    // A file could not be read, imported or written.
  kExitNotServing = 4,   // `health`: the server is up but not SERVING.
  kExitCheckFailed = 5,  // `stream`: frames answered with errors.
  kExitNotReached = 6,   // `solve`: a goal was not reached.
};

struct Globals {
  std::string addr = "127.0.0.1:50051";
  double timeout_s = 10;  // Deadline of each call, seconds.
  // TLS (any of the files or the name turns it on) and the bearer token
  // (--token, else $REACH_TOKEN): client/connect.h.
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_server_name;
  std::string token;
  // Streams broken by UNAVAILABLE (their replica killed, drained, scaled
  // down) reopen and go on (ClientOptions::resume_streams): 1 --resume, 0
  // --no-resume, -1 neither: on when --addr names several replicas (an
  // address list or a dns:/// name).
  int resume = -1;
  double resume_within_s = 5;
};

// Adds --addr, --timeout, --resume / --no-resume, --resume-within,
// --tls-ca, --tls-cert, --tls-key, --tls-server-name and --token to `app`;
// each of the last five defaults to its environment variable:
// REACH_TLS_CA, REACH_TLS_CERT, REACH_TLS_KEY, REACH_TLS_SERVER_NAME,
// REACH_TOKEN.
void AddGlobalFlags(CLI::App& app, Globals* globals);

// Option checks with short messages: "--fps: must be > 0, got '0'", where
// CLI11's PositiveNumber and NonNegativeNumber print the range's bounds
// (a 309-digit DBL_MAX) and let "nan" through. The value must be a finite
// number, and > `lo` (>= `lo` when `inclusive`).
CLI::Validator NumberAtLeast(double lo, bool inclusive);
const CLI::Validator& Positive();     // > 0
const CLI::Validator& NonNegative();  // >= 0

// A subcommand's body, run after parsing; returns the exit code.
using Command = std::function<int()>;

// Each file adds its subcommands to `app`; the chosen one stores its body
// in `run`.
void AddRegistryCommands(CLI::App& app, const Globals& globals, Command* run);
void AddSolveCommand(CLI::App& app, const Globals& globals, Command* run);
void AddStreamCommand(CLI::App& app, const Globals& globals, Command* run);
void AddBenchCommand(CLI::App& app, const Globals& globals, Command* run);
// Runs locally (no server).
void AddCharacterizeCommand(CLI::App& app, Command* run);
void AddRetargetCommand(CLI::App& app, const Globals& globals, Command* run);
void AddProfileCommands(CLI::App& app, const Globals& globals, Command* run);
// `reach vmc`: the VMC bridge (client/vmc_bridge.h).
void AddVmcCommand(CLI::App& app, const Globals& globals, Command* run);

// Whether --addr names several replicas (an address list, or a dns:///
// name that may resolve to several): streams then resume by default.
bool ManyReplicas(absl::string_view addr);

// The client the global flags describe. Errors name the flag
// ("--tls-ca: cannot read ...", "--token: ..."); FailSetup turns them into
// the exit code.
absl::StatusOr<std::unique_ptr<client::ReachClient>> MakeClient(
    const Globals& globals, int max_reconnect_backoff_ms = 0);
// Prints `status` and returns kExitFileError for a file that cannot be
// read, else kExitUsage.
int FailSetup(const absl::Status& status);

// Prints "reach: <what>: <CODE>: <message>" to stderr and returns `code`.
int Fail(const absl::Status& status, int code);
// Fail with kExitRpcError.
int FailRpc(const absl::Status& status);

// "x,y,z" / "w,x,y,z": finite numbers, comma-separated.
absl::StatusOr<Eigen::Vector3d> ParseVec3(const std::string& text,
                                          absl::string_view flag);
absl::StatusOr<Eigen::Quaterniond> ParseQuat(const std::string& text,
                                             absl::string_view flag);

// Writes `poses` of `skeleton` as a BVH clip at `path`; errors name it.
absl::Status WriteBvhFile(const std::string& path, const Skeleton& skeleton,
                          const std::vector<Pose>& poses, double frame_time);

// "ROLE=JOINT" (a retarget role override); errors name `flag`.
absl::StatusOr<std::pair<std::string, std::string>> ParseRoleOverride(
    const std::string& text, absl::string_view flag);

// The retarget profile flags `reach retarget` and `reach vmc` share:
// --source-override, --target-override (ROLE=JOINT, repeatable),
// --keep-target-pose and --no-planting.
struct ProfileFlags {
  std::vector<std::string> source_overrides;
  std::vector<std::string> target_overrides;
  bool keep_target_pose = false;
  bool no_planting = false;
};
void AddProfileFlags(CLI::App* cmd, ProfileFlags* flags,
                     const std::string& keep_target_pose_help);
// Sets them on `spec`; an override that does not parse is an error naming
// its flag.
absl::Status ApplyProfileFlags(const ProfileFlags& flags,
                               v1::RetargetProfileSpec* spec);

// "auto", "two_bone", "fabrik", "ccd", "jacobian_transpose",
// "jacobian_pinv", "jacobian_dls", "gradient_descent", "full_body"
// (case-insensitive, "-" or "_"): every value of reach.v1.Solver.
absl::StatusOr<v1::Solver> ParseSolver(const std::string& name);
// The names ParseSolver accepts, for --help.
std::string SolverNames();

// `text` as a JSON string literal, quotes included.
std::string JsonString(absl::string_view text);

// Canonical protobuf JSON of `message` on one line.
std::string ToJson(const google::protobuf::Message& message);

}  // namespace reach::cli

#endif  // REACH_CLIENT_CLI_COMMON_H_
