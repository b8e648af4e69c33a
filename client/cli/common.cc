#include "client/cli/common.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/json_util.h"
#include "importers/bvh.h"

namespace reach::cli {
namespace {

absl::Status ParseNumbers(const std::string& text, absl::string_view flag,
                          int count, double* out) {
  const std::vector<std::string> parts = absl::StrSplit(text, ',');
  bool ok = static_cast<int>(parts.size()) == count;
  for (int i = 0; ok && i < count; ++i) {
    ok = absl::SimpleAtod(parts[i], &out[i]) && std::isfinite(out[i]);
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(flag, ": expected ", count,
                                                 " comma-separated finite "
                                                 "numbers, got '",
                                                 text, "'"));
}

}  // namespace

CLI::Validator NumberAtLeast(double lo, bool inclusive) {
  const std::string bound =
      absl::StrCat(inclusive ? ">= " : "> ", absl::StrFormat("%g", lo));
  CLI::Validator validator(
      [lo, inclusive, bound](std::string& input) -> std::string {
        double value;
        // Quoted, and cut: the text is the user's.
        const std::string shown =
            input.size() > 40 ? input.substr(0, 40) + "..." : input;
        if (!absl::SimpleAtod(input, &value) || !std::isfinite(value)) {
          return absl::StrCat("expected a finite number ", bound, ", got '",
                              shown, "'");
        }
        if (value < lo || (!inclusive && value == lo)) {
          return absl::StrCat("must be ", bound, ", got '", shown, "'");
        }
        return std::string();
      },
      inclusive ? "NUMBER >= " + absl::StrFormat("%g", lo)
                : "NUMBER > " + absl::StrFormat("%g", lo));
  return validator;
}

const CLI::Validator& Positive() {
  static const CLI::Validator* const validator =
      new CLI::Validator(NumberAtLeast(0, /*inclusive=*/false));
  return *validator;
}

const CLI::Validator& NonNegative() {
  static const CLI::Validator* const validator =
      new CLI::Validator(NumberAtLeast(0, /*inclusive=*/true));
  return *validator;
}

void AddGlobalFlags(CLI::App& app, Globals* globals) {
  const auto last = CLI::MultiOptionPolicy::TakeLast;
  app.add_option("--addr", globals->addr,
                 "Server address host:port; several IP addresses "
                 "comma-separated (a,b,c), or dns:///name:port: calls go "
                 "round-robin")
      ->capture_default_str()
      ->envname("REACH_ADDRESS")
      ->multi_option_policy(last);
  app.add_option("--timeout", globals->timeout_s,
                 "Deadline of each call in seconds (streams: added to the "
                 "clip's length)")
      ->capture_default_str()
      ->multi_option_policy(last)
      ->check(Positive());
  CLI::Option* resume = app.add_flag_callback(
      "--resume", [globals] { globals->resume = 1; },
      "Streams (stream, vmc, bench --rpc stream) whose replica goes away "
      "(UNAVAILABLE: killed, drained, scaled down) reopen on another replica and go on "
      "from the last answered frame (a SolveStream warm from its last "
      "pose), no frame answered twice. Default: on when --addr names "
      "several replicas (a list or dns:///), else off");
  CLI::Option* no_resume = app.add_flag_callback(
      "--no-resume", [globals] { globals->resume = 0; },
      "A stream whose replica goes away ends with its error");
  resume->excludes(no_resume);
  app.add_option("--resume-within", globals->resume_within_s,
                 "Seconds a broken stream may take to reopen before it ends "
                 "with its error")
      ->capture_default_str()
      ->multi_option_policy(last)
      ->check(Positive());
  app.add_option("--tls-ca", globals->tls_ca,
                 "Connect with TLS; PEM file of the CA that signed the "
                 "server's certificate (TLS with the system's roots: any "
                 "--tls-* flag without this one)")
      ->envname("REACH_TLS_CA")
      ->multi_option_policy(last);
  app.add_option("--tls-cert", globals->tls_cert,
                 "PEM file of this client's certificate, for a server that "
                 "requires one (mTLS; with --tls-key)")
      ->envname("REACH_TLS_CERT")
      ->multi_option_policy(last);
  app.add_option("--tls-key", globals->tls_key,
                 "PEM file of the client certificate's private key")
      ->envname("REACH_TLS_KEY")
      ->multi_option_policy(last);
  app.add_option("--tls-server-name", globals->tls_server_name,
                 "The name to expect in the server's certificate (default: "
                 "the host of --addr)")
      ->envname("REACH_TLS_SERVER_NAME")
      ->multi_option_policy(last);
  app.add_option("--token", globals->token,
                 "Bearer token sent with every call (a server with "
                 "--auth_tokens_file needs one)")
      ->envname("REACH_TOKEN")
      ->multi_option_policy(last);
}

bool ManyReplicas(absl::string_view addr) {
  return absl::StartsWith(addr, "dns:") ||
         addr.find(',') != absl::string_view::npos;
}

absl::StatusOr<std::unique_ptr<client::ReachClient>> MakeClient(
    const Globals& globals, int max_reconnect_backoff_ms) {
  if (!globals.token.empty()) {
    if (absl::Status s = client::ValidateToken(globals.token); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--", s.message()));
    }
  }
  client::ConnectOptions connect;
  connect.address = globals.addr;
  connect.tls_ca = globals.tls_ca;
  connect.tls_cert = globals.tls_cert;
  connect.tls_key = globals.tls_key;
  connect.tls_server_name = globals.tls_server_name;
  connect.max_reconnect_backoff_ms = max_reconnect_backoff_ms;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      client::Connect(connect);
  if (!channel.ok()) {
    // "tls_ca: ..." -> "--tls-ca: ...": the flags' spelling.
    std::string message(channel.status().message());
    const size_t colon = message.find(':');
    std::string field = message.substr(0, colon);
    absl::StrReplaceAll({{"_", "-"}}, &field);
    return absl::Status(channel.status().code(),
                        absl::StrCat("--", field, message.substr(colon)));
  }
  client::ClientOptions options;
  options.timeout = absl::Seconds(globals.timeout_s);
  options.token = globals.token;
  options.resume_streams = globals.resume == 1 ||
                           (globals.resume < 0 && ManyReplicas(globals.addr));
  options.resume_within = absl::Seconds(globals.resume_within_s);
  return std::make_unique<client::ReachClient>(*std::move(channel), options);
}

int FailSetup(const absl::Status& status) {
  return Fail(status, absl::IsNotFound(status) ? kExitFileError : kExitUsage);
}

int Fail(const absl::Status& status, int code) {
  std::fprintf(stderr, "reach: %s: %s\n",
               absl::StatusCodeToString(status.code()).c_str(),
               std::string(status.message()).c_str());
  return code;
}

int FailRpc(const absl::Status& status) { return Fail(status, kExitRpcError); }

absl::StatusOr<Eigen::Vector3d> ParseVec3(const std::string& text,
                                          absl::string_view flag) {
  Eigen::Vector3d v;
  if (absl::Status s = ParseNumbers(text, flag, 3, v.data()); !s.ok()) return s;
  return v;
}

absl::StatusOr<Eigen::Quaterniond> ParseQuat(const std::string& text,
                                             absl::string_view flag) {
  double wxyz[4];
  if (absl::Status s = ParseNumbers(text, flag, 4, wxyz); !s.ok()) return s;
  return Eigen::Quaterniond(wxyz[0], wxyz[1], wxyz[2], wxyz[3]);
}

absl::StatusOr<v1::Solver> ParseSolver(const std::string& name) {
  std::string upper = absl::AsciiStrToUpper(name);
  absl::StrReplaceAll({{"-", "_"}}, &upper);
  v1::Solver solver;
  if (v1::Solver_Parse(absl::StrCat("SOLVER_", upper), &solver)) return solver;
  return absl::InvalidArgumentError(absl::StrCat(
      "--solver: unknown solver '", name, "' (one of: ", SolverNames(), ")"));
}

std::string SolverNames() {
  std::string names;
  for (int i = v1::Solver_MIN; i <= v1::Solver_MAX; ++i) {
    if (!v1::Solver_IsValid(i)) continue;
    std::string name = absl::AsciiStrToLower(
        v1::Solver_Name(static_cast<v1::Solver>(i)).substr(7));
    absl::StrAppend(&names, names.empty() ? "" : ", ", name);
  }
  return names;
}

std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

std::string ToJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = false;
  // Only a message with a malformed Any fails; ours have none.
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

absl::StatusOr<std::pair<std::string, std::string>> ParseRoleOverride(
    const std::string& text, absl::string_view flag) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": expected ROLE=JOINT, got \"", text, "\""));
  }
  return std::make_pair(text.substr(0, eq), text.substr(eq + 1));
}

void AddProfileFlags(CLI::App* cmd, ProfileFlags* flags,
                     const std::string& keep_target_pose_help) {
  cmd->add_option("--source-override", flags->source_overrides,
                  "Give a source role a joint: ROLE=JOINT (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--target-override", flags->target_overrides,
                  "Give a target role a joint: ROLE=JOINT (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_flag("--keep-target-pose", flags->keep_target_pose,
                keep_target_pose_help);
  cmd->add_flag("--no-planting", flags->no_planting, "Do not plant feet");
}

absl::Status ApplyProfileFlags(const ProfileFlags& flags,
                               v1::RetargetProfileSpec* spec) {
  for (const auto& [list, side, flag] :
       {std::make_tuple(&flags.source_overrides, spec->mutable_source(),
                        "--source-override"),
        std::make_tuple(&flags.target_overrides, spec->mutable_target(),
                        "--target-override")}) {
    for (const std::string& text : *list) {
      absl::StatusOr<std::pair<std::string, std::string>> parsed =
          ParseRoleOverride(text, flag);
      if (!parsed.ok()) return parsed.status();
      v1::RoleOverride* o = side->add_overrides();
      o->set_role(parsed->first);
      o->set_joint(parsed->second);
    }
  }
  spec->set_keep_target_pose(flags.keep_target_pose);
  spec->set_no_planting(flags.no_planting);
  return absl::OkStatus();
}

absl::Status WriteBvhFile(const std::string& path, const Skeleton& skeleton,
                          const std::vector<Pose>& poses, double frame_time) {
  absl::StatusOr<std::string> bvh =
      import::WriteBvh(skeleton, poses, frame_time);
  if (!bvh.ok()) return bvh.status();
  std::ofstream out(path, std::ios::binary);
  out << *bvh;
  out.close();
  if (!out) return absl::InvalidArgumentError(path + ": write failed");
  return absl::OkStatus();
}

}  // namespace reach::cli
