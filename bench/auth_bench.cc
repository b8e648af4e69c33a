// What the token check costs per call (issue: < 1 µs): TokenAuth::Authenticate
// on a token file of 1, 10 and 100 tokens (every line's digest is compared,
// in constant time, whichever matches), beside authentication off.
//
//   scripts/build auth_bench && build/bench/auth_bench
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "server/auth.h"
#include "tests/testing/pki.h"

namespace reach {
namespace {

std::unique_ptr<TokenAuth> OpenWith(int tokens, const std::string& path) {
  std::string text;
  for (int i = 0; i < tokens; ++i) {
    text += testing::TokenLine(absl::StrCat("client-", i),
                               absl::StrCat("token-", i), "solve");
  }
  std::ofstream(path) << text;
  auto auth = TokenAuth::Open(path, absl::ZeroDuration());
  if (!auth.ok()) {
    std::fprintf(stderr, "%s\n", auth.status().ToString().c_str());
    std::abort();
  }
  return *std::move(auth);
}

void BM_Authenticate(benchmark::State& state) {
  const int tokens = static_cast<int>(state.range(0));
  const std::string path = absl::StrCat(
      std::filesystem::temp_directory_path().string(), "/reach-auth-bench-",
      getpid());
  const std::unique_ptr<TokenAuth> auth = OpenWith(tokens, path);
  // The last line's token: the same work as any other.
  const std::string header = absl::StrCat("Bearer token-", tokens - 1);
  for (auto _ : state) {
    absl::StatusOr<Caller> caller =
        auth->Authenticate(header, "ipv4:127.0.0.1:50000");
    benchmark::DoNotOptimize(caller);
  }
  std::filesystem::remove(path);
}
BENCHMARK(BM_Authenticate)->Arg(1)->Arg(10)->Arg(100);

void BM_AuthenticateUnknownToken(benchmark::State& state) {
  const std::string path = absl::StrCat(
      std::filesystem::temp_directory_path().string(), "/reach-auth-bench-u-",
      getpid());
  const std::unique_ptr<TokenAuth> auth =
      OpenWith(static_cast<int>(state.range(0)), path);
  for (auto _ : state) {
    absl::StatusOr<Caller> caller =
        auth->Authenticate("Bearer not-a-token", "ipv4:127.0.0.1:50000");
    benchmark::DoNotOptimize(caller);
  }
  std::filesystem::remove(path);
}
BENCHMARK(BM_AuthenticateUnknownToken)->Arg(100);

void BM_AuthenticationOff(benchmark::State& state) {
  auto auth = TokenAuth::Open("", absl::ZeroDuration());
  for (auto _ : state) {
    absl::StatusOr<Caller> caller =
        (*auth)->Authenticate("", "ipv4:127.0.0.1:50000");
    benchmark::DoNotOptimize(caller);
  }
}
BENCHMARK(BM_AuthenticationOff);

}  // namespace
}  // namespace reach

BENCHMARK_MAIN();
