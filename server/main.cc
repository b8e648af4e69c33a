// reach-server: the Reach IK service. Flags live here only; they fill a
// ServerOptions. SIGTERM / SIGINT shut down gracefully (exit 0).
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/str_cat.h"
#include "server/log.h"
#include "server/memory.h"
#include "server/postgres_store.h"
#include "server/server.h"
#include "version/version.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "gRPC listen address host:port (port 0: any free port)");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "Prometheus /metrics listen address host:port; empty: off");
ABSL_FLAG(std::string, http_listen, "127.0.0.1:9465",
          "host:port for the browser viewer (the page, and a JSON gateway "
          "to this server's API); empty: off. Not loopback: needs "
          "--auth_tokens_file or --insecure");
ABSL_FLAG(int, http_threads, 128,
          "Viewer HTTP requests served at once (each holds a thread, as "
          "does an idle connection until --http_request_timeout)");
ABSL_FLAG(absl::Duration, http_request_timeout, absl::Seconds(5),
          "Viewer connections that send nothing this long are closed; "
          "WebSockets that answer no ping within about twice it too");
ABSL_FLAG(std::vector<std::string>, http_allowed_origins, {},
          "Comma-separated origins (https://tool.example:8443) whose pages "
          "may call the viewer's API cross-origin (CORS); default none: "
          "only the viewer's own page");
ABSL_FLAG(int, metrics_threads, 128,
          "/metrics requests served at once (each holds a thread, as does "
          "an idle connection for up to 2 s)");
ABSL_FLAG(int, http_max_watchers, 8,
          "Viewer WebSockets watching live streams at once (each holds one "
          "of --http_threads); 0: no watching");
ABSL_FLAG(int, http_max_streams, 8,
          "WebSockets streaming solves or retargets through the HTTP API "
          "(/api/v1/solve-stream, /api/v1/retarget-stream) at once (each "
          "holds one of --http_threads); 0: none");
ABSL_FLAG(int, solver_threads, 0,
          "Solver worker threads; 0: one per hardware thread");
ABSL_FLAG(int, queue_capacity, 1024,
          "Solver tasks that may wait for a thread; beyond it requests get "
          "RESOURCE_EXHAUSTED");
ABSL_FLAG(std::string, data_dir, "reach-data",
          "Directory of the SQLite registry (registry.sqlite3); created if "
          "missing");
ABSL_FLAG(bool, in_memory, false,
          "Keep the registry in memory only (nothing survives a restart)");
ABSL_FLAG(std::string, registry, "sqlite",
          "Where the registry lives: sqlite (registry.sqlite3 in --data_dir; "
          "one server), memory (as --in_memory), or a PostgreSQL URL "
          "(postgresql://user@host:port/db?...) that many servers share: "
          "writes go to the database, each server keeps what it serves in "
          "memory and follows the others' changes (LISTEN/NOTIFY). While "
          "the database is unreachable, writes get UNAVAILABLE and solves "
          "go on");
ABSL_FLAG(int, max_joints, 1024, "Joints per skeleton (INVALID_ARGUMENT)");
ABSL_FLAG(int, max_name_bytes, 256,
          "Longest skeleton, joint or chain name in bytes (INVALID_ARGUMENT)");
ABSL_FLAG(int64_t, max_registry_bytes, int64_t{128} << 20,
          "Memory all registered skeletons may take; beyond it "
          "RegisterSkeleton gets RESOURCE_EXHAUSTED, and stored skeletons "
          "beyond it are skipped at start. 0: no limit");
ABSL_FLAG(int64_t, skeleton_cache_bytes, int64_t{64} << 20,
          "Memory for skeletons built for solving (from their stored "
          "definitions), least recently used dropped first; a solve on a "
          "skeleton not in it builds it again. 0: no cache");
ABSL_FLAG(int, max_retarget_profiles, 256,
          "Retarget profiles held at once; beyond it CreateRetargetProfile "
          "gets RESOURCE_EXHAUSTED (stored profiles all load at start). 0: "
          "no limit");
ABSL_FLAG(int64_t, max_retarget_profile_bytes, int64_t{128} << 20,
          "Memory all retarget profiles may take (each keeps both skeletons "
          "and its retargeter); beyond it CreateRetargetProfile gets "
          "RESOURCE_EXHAUSTED. 0: no limit");
ABSL_FLAG(int, max_retarget_frames, 20000,
          "Frames per RetargetBatch (INVALID_ARGUMENT)");
ABSL_FLAG(int, max_goals, 64, "Goals per solve request (INVALID_ARGUMENT)");
ABSL_FLAG(int, max_iterations, 100000,
          "Cap on a goal's options.max_iterations (INVALID_ARGUMENT)");
ABSL_FLAG(int, max_batch, 10000, "Items per SolveBatch (INVALID_ARGUMENT)");
ABSL_FLAG(int, max_message_bytes, 16 * 1024 * 1024,
          "Largest request message in bytes (RESOURCE_EXHAUSTED)");
ABSL_FLAG(int, max_concurrent_streams, 100,
          "Calls one connection may have open at once (HTTP/2 "
          "MAX_CONCURRENT_STREAMS); more wait in the client. gRPC holds each "
          "open call's request (up to --max_message_bytes) before the "
          "--max_buffered_bytes budget sees it");
ABSL_FLAG(absl::Duration, max_connection_age, absl::ZeroDuration(),
          "Close each client connection after this long (HTTP/2 GOAWAY; "
          "calls in flight get --max_connection_age_grace), so clients "
          "reconnect and a round-robin client spreads over replicas added "
          "since. 0: connections live forever");
ABSL_FLAG(absl::Duration, max_connection_age_grace, absl::Seconds(30),
          "After --max_connection_age, how long calls still open on the old "
          "connection may run before they are cancelled");
ABSL_FLAG(int64_t, max_transport_bytes, int64_t{512} << 20,
          "Bytes gRPC's transport may hold for all connections together "
          "(its resource quota: requests no handler has seen yet, read "
          "buffers); beyond it gRPC refuses calls and closes connections. "
          "0: no quota");
ABSL_FLAG(int, max_streams, 1000,
          "Concurrent streams, SolveStream and RetargetStream together "
          "(RESOURCE_EXHAUSTED)");
ABSL_FLAG(int, stream_window, 64,
          "Frames a stream reads ahead and responses it holds unsent "
          "before it stops reading (back-pressure)");
ABSL_FLAG(int64_t, stream_window_bytes, int64_t{8} << 20,
          "Bytes a stream's frames read ahead and responses unsent may hold "
          "before it stops reading (with --stream_window)");
ABSL_FLAG(int, max_solve_ms, 500,
          "Longest any one request may solve (a Solve, a stream frame, or a "
          "SolveBatch's items together), whatever its options; it then "
          "stops with its best pose (reached=false). 0: no cap");
ABSL_FLAG(absl::Duration, max_queue_wait, absl::Seconds(1),
          "Work that would wait (or did wait) longer for a solver thread "
          "gets RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, max_buffered_bytes, int64_t{256} << 20,
          "Bytes the server may hold for calls at once (queued requests, "
          "stream read-ahead and unsent answers, batch outputs); beyond it "
          "RESOURCE_EXHAUSTED. 0: no budget");
ABSL_FLAG(int64_t, max_buffered_bytes_per_caller, 0,
          "What one caller's calls (a token's, or a peer address's without "
          "auth) may hold of --max_buffered_bytes, so that a few clients "
          "that never read their answers cannot hold it all "
          "(RESOURCE_EXHAUSTED). 0: a quarter of --max_buffered_bytes");
ABSL_FLAG(int64_t, max_response_bytes, int64_t{64} << 20,
          "Largest response one call may produce, checked before solving "
          "(RESOURCE_EXHAUSTED)");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain to serve gRPC over TLS (with --tls_key); "
          "re-read every --tls_reload_interval");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA certificates: clients must present a certificate one of "
          "them signed (mTLS)");
ABSL_FLAG(absl::Duration, tls_reload_interval, absl::Seconds(10),
          "How often the TLS files are checked for replacement (new "
          "connections get the new certificate; at least 1s)");
ABSL_FLAG(bool, insecure, false,
          "Allow plaintext gRPC (and /metrics without authentication) on a "
          "non-loopback address; logs a warning");
ABSL_FLAG(std::string, auth_tokens_file, "",
          "Token file (lines: name sha256(token) roles; roles solve, "
          "register, admin, metrics): calls need 'authorization: Bearer "
          "TOKEN'. Re-read when it changes and on SIGHUP. Empty: no auth");
ABSL_FLAG(absl::Duration, auth_reload_interval, absl::Seconds(5),
          "How often --auth_tokens_file is checked for changes (0: only on "
          "SIGHUP)");
ABSL_FLAG(int, quota_skeletons, 1000,
          "Skeletons one token (or, without auth, one peer address) may "
          "hold registered (RESOURCE_EXHAUSTED). 0: no quota");
ABSL_FLAG(int64_t, quota_registry_bytes, int64_t{32} << 20,
          "Registry bytes one token (or peer address) may hold "
          "(RESOURCE_EXHAUSTED); lowered to a quarter of "
          "--max_registry_bytes if above, so one caller cannot fill it. 0: "
          "no quota");
ABSL_FLAG(int, quota_retarget_profiles, 32,
          "Retarget profiles one token (or peer address) may create "
          "(RESOURCE_EXHAUSTED); lowered to a quarter of "
          "--max_retarget_profiles if above. 0: no quota");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(10),
          "On SIGTERM/SIGINT: how long in-flight work may take to finish");

namespace {

constexpr char kUsage[] =
    "reach-server: the Reach inverse-kinematics gRPC service.\n"
    "  reach-server [--listen=127.0.0.1:50051] [--data_dir=reach-data] ...";

// --help / -h: the flags defined in this file, sorted, with their help and
// defaults, on stdout. (Abseil's own --help lists only flags in a file
// named like the program, finds none here, and exits 1; --helpfull lists
// Abseil's flags as well.)
bool WantsHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) return false;
    if (std::strcmp(argv[i], "--help") == 0 ||
        std::strcmp(argv[i], "-help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      return true;
    }
  }
  return false;
}

// --version: ours (version/version.h) on stdout. Abseil's own prints the
// program's name and "Debug build" whenever Abseil itself was compiled
// without NDEBUG, as Debian's is, whatever this build is.
bool WantsVersion(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) return false;
    if (std::strcmp(argv[i], "--version") == 0 ||
        std::strcmp(argv[i], "-version") == 0) {
      return true;
    }
  }
  return false;
}

void PrintHelp() {
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (flag->Filename() == __FILE__) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](const absl::CommandLineFlag* a, const absl::CommandLineFlag* b) {
              return a->Name() < b->Name();
            });
  std::string out = absl::StrCat(kUsage, "\n\nFlags:\n");
  for (const absl::CommandLineFlag* flag : flags) {
    absl::StrAppend(&out, "  --", flag->Name(), "  (default: \"",
                    flag->DefaultValue(), "\")\n      ", flag->Help(), "\n");
  }
  absl::StrAppend(&out, "  --version\n      Print ",
                  reach::VersionLine("reach-server"), " and exit\n");
  absl::StrAppend(&out,
                  "\n--helpfull also lists Abseil's own flags (--flagfile, "
                  "--fromenv, ...).\n");
  std::fwrite(out.data(), 1, out.size(), stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (WantsHelp(argc, argv)) {
    PrintHelp();
    return 0;
  }
  if (WantsVersion(argc, argv)) {
    std::printf("%s\n", reach::VersionLine("reach-server").c_str());
    return 0;
  }
  absl::SetProgramUsageMessage(kUsage);
  {
    // What Abseil's --version would print (were it reached).
    absl::FlagsUsageConfig config;
    config.version_string = [] {
      return reach::VersionLine("reach-server") + "\n";
    };
    absl::SetFlagsUsageConfig(config);
  }
  absl::ParseCommandLine(argc, argv);
  reach::RouteLibraryLogs();
  if (!reach::RetainFreedMemory()) {
    reach::LogInfo(
        "the allocator ignored mallopt (a sanitizer build?): freed memory "
        "goes back to the kernel, so large calls page-fault more");
  }

  // Block the shutdown signals in every thread (threads inherit the mask);
  // this thread waits for them with sigwait. Before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);  // Re-read --auth_tokens_file.
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  reach::StartMemoryTrimmer();

  reach::ServerOptions options;
  options.listen_address = absl::GetFlag(FLAGS_listen);
  options.metrics_address = absl::GetFlag(FLAGS_metrics_listen);
  options.http_address = absl::GetFlag(FLAGS_http_listen);
  options.http_threads = absl::GetFlag(FLAGS_http_threads);
  options.http_max_watchers = absl::GetFlag(FLAGS_http_max_watchers);
  options.http_max_streams = absl::GetFlag(FLAGS_http_max_streams);
  options.http_request_timeout = absl::GetFlag(FLAGS_http_request_timeout);
  options.http_allowed_origins = absl::GetFlag(FLAGS_http_allowed_origins);
  options.metrics_threads = absl::GetFlag(FLAGS_metrics_threads);
  options.solver_threads = absl::GetFlag(FLAGS_solver_threads);
  options.queue_capacity = absl::GetFlag(FLAGS_queue_capacity);
  options.data_dir = absl::GetFlag(FLAGS_data_dir);
  options.in_memory_store = absl::GetFlag(FLAGS_in_memory);
  options.registry = absl::GetFlag(FLAGS_registry);
  options.max_joints = absl::GetFlag(FLAGS_max_joints);
  options.max_name_bytes = absl::GetFlag(FLAGS_max_name_bytes);
  options.max_registry_bytes = absl::GetFlag(FLAGS_max_registry_bytes);
  options.skeleton_cache_bytes = absl::GetFlag(FLAGS_skeleton_cache_bytes);
  options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  options.max_transport_bytes = absl::GetFlag(FLAGS_max_transport_bytes);
  options.max_connection_age = absl::GetFlag(FLAGS_max_connection_age);
  options.max_connection_age_grace =
      absl::GetFlag(FLAGS_max_connection_age_grace);
  options.service.solve_limits.max_goals = absl::GetFlag(FLAGS_max_goals);
  options.service.solve_limits.max_iterations =
      absl::GetFlag(FLAGS_max_iterations);
  options.service.max_batch = absl::GetFlag(FLAGS_max_batch);
  options.max_retarget_profiles = absl::GetFlag(FLAGS_max_retarget_profiles);
  options.max_retarget_profile_bytes =
      absl::GetFlag(FLAGS_max_retarget_profile_bytes);
  options.service.max_retarget_frames =
      absl::GetFlag(FLAGS_max_retarget_frames);
  options.service.max_streams = absl::GetFlag(FLAGS_max_streams);
  options.service.stream_window = absl::GetFlag(FLAGS_stream_window);
  options.service.stream_window_bytes = absl::GetFlag(FLAGS_stream_window_bytes);
  options.service.max_solve = absl::Milliseconds(absl::GetFlag(FLAGS_max_solve_ms));
  options.service.max_queue_wait = absl::GetFlag(FLAGS_max_queue_wait);
  options.service.max_buffered_bytes = absl::GetFlag(FLAGS_max_buffered_bytes);
  options.service.max_response_bytes = absl::GetFlag(FLAGS_max_response_bytes);
  options.service.max_buffered_bytes_per_caller =
      absl::GetFlag(FLAGS_max_buffered_bytes_per_caller);
  options.shutdown_grace = absl::GetFlag(FLAGS_shutdown_grace);
  options.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key = absl::GetFlag(FLAGS_tls_key);
  options.tls_client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  options.tls_reload_interval = absl::GetFlag(FLAGS_tls_reload_interval);
  options.insecure = absl::GetFlag(FLAGS_insecure);
  options.auth_tokens_file = absl::GetFlag(FLAGS_auth_tokens_file);
  options.auth_reload_interval = absl::GetFlag(FLAGS_auth_reload_interval);
  options.quota_skeletons = absl::GetFlag(FLAGS_quota_skeletons);
  options.quota_registry_bytes = absl::GetFlag(FLAGS_quota_registry_bytes);
  options.quota_retarget_profiles =
      absl::GetFlag(FLAGS_quota_retarget_profiles);

  absl::StatusOr<std::unique_ptr<reach::ReachServer>> server =
      reach::ReachServer::Start(options);
  if (!server.ok()) {
    reach::LogError(absl::StrCat("reach-server: cannot start: ",
                                 server.status().message()));
    return 1;
  }
  const reach::ServerOptions& o = (*server)->options();
  reach::LogInfo(absl::StrCat(
      reach::VersionLine("reach-server"), " listening on ", o.listen_address, " (port ",
      (*server)->port(), "); metrics on ",
      o.metrics_address.empty()
          ? std::string("(off)")
          : absl::StrCat("http://", o.metrics_address, "/metrics (port ",
                         (*server)->metrics_port(), ")"),
      "; viewer on ",
      o.http_address.empty()
          ? std::string("(off)")
          : absl::StrCat("http://", o.http_address, "/ (port ",
                         (*server)->http_port(), ")")));
  reach::LogInfo(absl::StrCat(
      "config: solver_threads=", o.solver_threads,
      " queue_capacity=", o.queue_capacity, " store=",
      (*server)->postgres() != nullptr ? (*server)->postgres()->description()
      : o.in_memory_store              ? std::string("memory")
                                       : o.data_dir + "/registry.sqlite3",
      " skeletons=", (*server)->service().registry().size(),
      " max_joints=", o.max_joints,
      " max_name_bytes=", o.max_name_bytes,
      " max_registry_bytes=", o.max_registry_bytes,
      " registry_bytes=", (*server)->service().registry().total_bytes(),
      " skeleton_cache_bytes=", o.skeleton_cache_bytes,
      " max_goals=", o.service.solve_limits.max_goals,
      " max_iterations=", o.service.solve_limits.max_iterations,
      " max_batch=", o.service.max_batch,
      " retarget_profiles=", (*server)->retarget_profiles().size(),
      " max_retarget_profiles=", o.max_retarget_profiles,
      " max_retarget_profile_bytes=", o.max_retarget_profile_bytes,
      " max_retarget_frames=", o.service.max_retarget_frames,
      " max_message_bytes=", o.max_message_bytes,
      " max_concurrent_streams=", o.max_concurrent_streams,
      " max_transport_bytes=", o.max_transport_bytes,
      " max_connection_age=", absl::FormatDuration(o.max_connection_age),
      " max_connection_age_grace=",
      absl::FormatDuration(o.max_connection_age_grace),
      " max_streams=", o.service.max_streams,
      " stream_window=", o.service.stream_window,
      " stream_window_bytes=", o.service.stream_window_bytes,
      " max_solve_ms=", absl::ToInt64Milliseconds(o.service.max_solve),
      " max_queue_wait=", absl::FormatDuration(o.service.max_queue_wait),
      " max_buffered_bytes=", o.service.max_buffered_bytes,
      " max_buffered_bytes_per_caller=",
      o.service.max_buffered_bytes_per_caller,
      " max_response_bytes=", o.service.max_response_bytes,
      " shutdown_grace=", absl::FormatDuration(o.shutdown_grace),
      " tls=", o.tls_cert.empty() ? "off" : (o.tls_client_ca.empty() ? "on" : "mutual"),
      " auth=", (*server)->auth().enabled()
                    ? absl::StrCat((*server)->auth().tokens(), " tokens")
                    : std::string("off"),
      " quota_skeletons=", o.quota_skeletons,
      " quota_registry_bytes=", o.quota_registry_bytes,
      " quota_retarget_profiles=", o.quota_retarget_profiles));

  int signal_number = 0;
  while (sigwait(&signals, &signal_number) == 0 && signal_number == SIGHUP) {
    const absl::Status reloaded = (*server)->ReloadAuth();
    reach::LogInfo(
        reloaded.ok()
            ? absl::StrCat("SIGHUP: auth tokens reloaded (",
                           (*server)->auth().tokens(), " tokens)")
            : absl::StrCat("SIGHUP: accepting no token until the file "
                           "loads: ",
                           reloaded.message()));
  }
  reach::LogInfo(absl::StrCat("received ", strsignal(signal_number),
                              "; shutting down (grace ",
                              absl::FormatDuration(o.shutdown_grace), ")"));
  (*server)->Shutdown();
  reach::LogInfo("reach-server stopped");
  return 0;
}
