// What a skeleton cache miss costs with --registry=postgresql:// (issue
// 43): a replica that has not heard of a skeleton yet reads it through (one
// round trip) and builds it; one that knows it but evicted it from its
// bounded cache (--skeleton_cache_bytes) reads the definition again (one
// round trip) and builds it. Against: the same miss from a SQLite file and
// from the memory store, and a hit. Starts its own PostgreSQL
// (tests/testing/postgres.h) unless given --registry=postgresql://...
//
//   build/bench/registry_bench [--skeletons=2000] [--joints=32]
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <libpq-fe.h>
#include <stdlib.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/postgres_store.h"
#include "server/registry.h"
#include "server/skeleton_store.h"
#include "tests/testing/models.h"
#include "tests/testing/postgres.h"
#include "tests/testing/service.h"

ABSL_FLAG(std::string, registry, "",
          "A postgresql:// URL; empty: start a scratch PostgreSQL");
ABSL_FLAG(int, skeletons, 2000, "Skeletons registered, then each loaded");
ABSL_FLAG(int, joints, 32, "Joints per skeleton (a straight chain)");

namespace reach {
namespace {

struct Stats {
  double p50, p99, mean;
};

Stats Of(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  double sum = 0;
  for (double u : us) sum += u;
  const size_t n = us.size();
  return {us[n / 2], us[std::min(n - 1, n * 99 / 100)], sum / n};
}

void Print(const char* what, const Stats& s) {
  std::printf("  %-58s p50 %7.1f us  p99 %7.1f us  mean %7.1f us\n", what,
              s.p50, s.p99, s.mean);
}

int Main() {
  std::unique_ptr<testing::ScratchPostgres> scratch;
  std::string url = absl::GetFlag(FLAGS_registry);
  if (url.empty()) {
    auto started = testing::ScratchPostgres::Create();
    if (!started.ok()) {
      std::fprintf(stderr, "%s\n", started.status().ToString().c_str());
      return 1;
    }
    scratch = *std::move(started);
    url = scratch->url();
  }
  auto db = PostgresRegistry::Open(url);
  if (!db.ok()) {
    std::fprintf(stderr, "%s\n", db.status().ToString().c_str());
    return 1;
  }
  RegistryLimits limits;
  limits.max_owner_skeletons = 0;
  // The replica that registers, and one that has heard of nothing (no
  // listener): each of its loads is a miss that reads through.
  auto writer = *Registry::Create((*db)->NewStore("skeletons"), limits);
  auto reader = *Registry::Create((*db)->NewStore("skeletons"), limits);
  // The local comparison: definitions in memory, nothing cached, so every
  // load builds (SQLite's and memory's cache miss).
  RegistryLimits uncached = limits;
  uncached.cache_bytes = 0;
  auto local = *Registry::Create(NewMemoryStore(), uncached);
  char pattern[] = "/tmp/registry_bench_XXXXXX";
  const std::string sqlite_path =
      std::string(mkdtemp(pattern)) + "/registry.sqlite3";
  auto sqlite = *Registry::Create(*OpenSqliteStore(sqlite_path), uncached);

  const int n = absl::GetFlag(FLAGS_skeletons);
  std::vector<std::string> ids;
  std::vector<double> register_us;
  for (int i = 0; i < n; ++i) {
    const v1::Skeleton skeleton = testing::ToWire(
        testing::StraightChainDef(absl::GetFlag(FLAGS_joints)),
        absl::StrCat("chain ", i));
    const absl::Time start = absl::Now();
    auto registered = writer->Register(skeleton, "bench");
    register_us.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
    if (!registered.ok()) {
      std::fprintf(stderr, "%s\n", registered.status().ToString().c_str());
      return 1;
    }
    ids.push_back(registered->id);
    (void)local->Register(skeleton, "bench");
    (void)sqlite->Register(skeleton, "bench");
  }
  // A replica that knows every skeleton (it started after they were
  // registered) but caches none: each load is an evicted skeleton's miss.
  auto evicting = *Registry::Create((*db)->NewStore("skeletons"), uncached);
  std::vector<double> evicted, sqlite_miss;
  std::vector<double> miss, hit, built, round_trip, select_one;
  auto store = (*db)->NewStore("skeletons");
  absl::StatusOr<PGconn*> bare = (*db)->Connect("bench");
  if (!bare.ok()) return 1;
  for (const std::string& id : ids) {
    absl::Time start = absl::Now();
    PQclear(PQexec(*bare, "SELECT 1"));
    select_one.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
    start = absl::Now();
    (void)store->Read(id);
    round_trip.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
    start = absl::Now();
    if (reader->Load(id) == nullptr) {
      std::fprintf(stderr, "miss did not read through\n");
      return 1;
    }
    miss.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
    start = absl::Now();
    (void)reader->Load(id);
    hit.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
    start = absl::Now();
    (void)local->Load(id);
    built.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
    start = absl::Now();
    if (evicting->Load(id) == nullptr) {
      std::fprintf(stderr, "an evicted skeleton did not load\n");
      return 1;
    }
    evicted.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
    start = absl::Now();
    (void)sqlite->Load(id);
    sqlite_miss.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
  }
  std::printf("registry_bench: %d skeletons of %d joints, PostgreSQL %s\n", n,
              absl::GetFlag(FLAGS_joints), (*db)->description().c_str());
  Print("RegisterSkeleton (lock, catch-up, insert, log, commit)",
        Of(register_us));
  Print("a bare round trip (SELECT 1)", Of(select_one));
  Print("the store's Read of one id (the read-through's query)",
        Of(round_trip));
  Print("cache miss, PostgreSQL, id not heard of: read through + build",
        Of(miss));
  Print("cache miss, PostgreSQL, evicted: read + build", Of(evicted));
  Print("cache miss, SQLite file: read + build", Of(sqlite_miss));
  Print("cache miss, memory store: copy + build", Of(built));
  Print("cache hit", Of(hit));
  PQfinish(*bare);
  return 0;
}

}  // namespace
}  // namespace reach

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return reach::Main();
}
