// The registry over a real SQLite file and over memory.
#include "server/registry.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/models.h"
#include "tests/testing/service.h"

namespace reach {
namespace {

using ::reach::testing::ToWire;
using ::testing::HasSubstr;

std::string TempDir() {
  char pattern[] = "/tmp/reach_registry_test_XXXXXX";
  return mkdtemp(pattern);
}

std::unique_ptr<Registry> Open(const std::string& path) {
  absl::StatusOr<std::unique_ptr<SkeletonStore>> store = OpenSqliteStore(path);
  EXPECT_TRUE(store.ok()) << store.status();
  absl::StatusOr<std::unique_ptr<Registry>> registry =
      Registry::Create(*std::move(store), SkeletonLimits{});
  EXPECT_TRUE(registry.ok()) << registry.status();
  return *std::move(registry);
}

TEST(RegistryTest, SqliteKeepsRegistrationsAndDeletesAcrossReopen) {
  const std::string path = TempDir() + "/registry.sqlite3";
  std::string leg_id, humanoid_id;
  {
    std::unique_ptr<Registry> registry = Open(path);
    auto leg = registry->Register(ToWire(testing::TwoBoneLegDef(), "leg"));
    ASSERT_TRUE(leg.ok());
    auto humanoid = registry->Register(ToWire(testing::HumanoidDef(), "h"));
    ASSERT_TRUE(humanoid.ok());
    auto panda = registry->Register(ToWire(testing::PandaDef(), "panda"));
    ASSERT_TRUE(panda.ok());
    leg_id = leg->id;
    humanoid_id = humanoid->id;
    ASSERT_TRUE(registry->Delete(panda->id).ok());
  }
  std::unique_ptr<Registry> reopened = Open(path);
  EXPECT_EQ(reopened->size(), 2);
  auto leg = reopened->Find(leg_id);
  ASSERT_NE(leg, nullptr);
  EXPECT_EQ(leg->name, "leg");
  EXPECT_EQ(leg->version, 1);
  EXPECT_EQ(leg->num_joints, 3);
  EXPECT_EQ(reopened->Load(leg_id)->skeleton.num_joints(), 3);
  auto humanoid = reopened->Find(humanoid_id);
  ASSERT_NE(humanoid, nullptr);
  EXPECT_EQ(humanoid->chain_names.size(), 4u);
  EXPECT_EQ(reopened->Load(humanoid_id)->skeleton.num_chains(), 4);
  // Versions continue after the highest stored one (3, though deleted
  // versions are never reused only while the store remembers them).
  auto again = reopened->Register(ToWire(testing::TwoBoneLegDef(), "leg 2"));
  ASSERT_TRUE(again.ok());
  EXPECT_GT(again->version, humanoid->version);
}

TEST(RegistryTest, ConcurrentRegistrationsOfOneDefinitionAgree) {
  std::unique_ptr<Registry> registry =
      *Registry::Create(NewMemoryStore(), SkeletonLimits{});
  const v1::Skeleton leg = ToWire(testing::TwoBoneLegDef(), "leg");
  std::vector<RegisterResult> results(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] { results[t] = *registry->Register(leg); });
  }
  for (std::thread& t : threads) t.join();
  int created = 0;
  for (const RegisterResult& r : results) {
    EXPECT_EQ(r.id, results[0].id);
    EXPECT_EQ(r.version, results[0].version);
    created += r.created;
  }
  EXPECT_EQ(created, 1);
  EXPECT_EQ(registry->size(), 1);
}

TEST(RegistryTest, HeldSkeletonOutlivesDelete) {
  std::unique_ptr<Registry> registry =
      *Registry::Create(NewMemoryStore(), SkeletonLimits{});
  auto result = registry->Register(ToWire(testing::TwoBoneLegDef(), "leg"));
  ASSERT_TRUE(result.ok());
  std::shared_ptr<const LoadedSkeleton> held = registry->Load(result->id);
  ASSERT_NE(held, nullptr);
  ASSERT_TRUE(registry->Delete(result->id).ok());
  EXPECT_EQ(registry->Find(result->id), nullptr);
  EXPECT_EQ(registry->Load(result->id), nullptr);
  EXPECT_EQ(registry->cached_skeletons(), 0);
  EXPECT_EQ(held->skeleton.num_joints(), 3);  // Still usable.
  EXPECT_EQ(registry->Delete(result->id).code(), absl::StatusCode::kNotFound);
}

TEST(RegistryTest, StoredSkeletonOverTheLimitIsSkippedNotLost) {
  const std::string path = TempDir() + "/registry.sqlite3";
  std::string id;
  {
    std::unique_ptr<Registry> registry = Open(path);
    id = registry->Register(ToWire(testing::HumanoidDef(), "h"))->id;
  }
  SkeletonLimits small;
  small.max_joints = 10;
  std::vector<std::string> skipped;
  auto registry =
      Registry::Create(*OpenSqliteStore(path), small, &skipped);
  ASSERT_TRUE(registry.ok());
  EXPECT_EQ((*registry)->size(), 0);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_THAT(skipped[0], HasSubstr(id));
  // Still stored: a registry with the old limit sees it again.
  EXPECT_EQ(Open(path)->size(), 1);
}

TEST(RegistryTest, LongNamesAreRefusedNamingTheField) {
  RegistryLimits limits;
  limits.max_name_bytes = 16;
  auto registry = *Registry::Create(NewMemoryStore(), limits);
  v1::Skeleton leg = ToWire(testing::TwoBoneLegDef(), "leg");
  EXPECT_TRUE(registry->Register(leg).ok());
  for (const auto& [set, field] :
       std::vector<std::pair<std::function<void(v1::Skeleton*)>, std::string>>{
           {[](v1::Skeleton* s) { s->set_name(std::string(17, 'n')); },
            "name"},
           {[](v1::Skeleton* s) {
              s->mutable_joints(1)->set_name(std::string(1 << 20, 'j'));
            },
            "joints[1].name"},
           {[](v1::Skeleton* s) {
              s->mutable_chains(0)->set_tip(std::string(17, 't'));
            },
            "chains[0].tip"}}) {
    v1::Skeleton bad = leg;
    set(&bad);
    const absl::Status status = registry->Register(bad).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(status.message(), HasSubstr(field + ": "));
    EXPECT_THAT(status.message(), HasSubstr("--max_name_bytes"));
    // Short: the name itself is not echoed.
    EXPECT_LT(status.message().size(), 200u);
  }
}

TEST(RegistryTest, TotalBytesAreBoundedAndSkippedAtStartWhenOver) {
  const std::string path = TempDir() + "/registry.sqlite3";
  const v1::Skeleton humanoid = ToWire(testing::HumanoidDef(), "h");
  const v1::Skeleton panda = ToWire(testing::PandaDef(), "panda");
  int64_t one = 0;
  {
    std::unique_ptr<Registry> registry = Open(path);
    ASSERT_TRUE(registry->Register(humanoid).ok());
    one = registry->total_bytes();
    // The stored bytes once, plus the solver's fixed cost per joint: not
    // several copies of the definition.
    const int64_t bytes = static_cast<int64_t>(humanoid.ByteSizeLong());
    EXPECT_GT(one, bytes);
    EXPECT_LT(one, 2 * bytes + 1024 * humanoid.joints_size());
    ASSERT_TRUE(registry->Register(panda).ok());
  }
  RegistryLimits limits;
  limits.max_total_bytes = one + 16;  // Room for the humanoid only.
  std::vector<std::string> skipped;
  auto registry = *Registry::Create(*OpenSqliteStore(path), limits, &skipped);
  EXPECT_EQ(registry->size(), 1);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_THAT(skipped[0], HasSubstr("--max_registry_bytes"));
  const auto refused = registry->Register(panda);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("--max_registry_bytes"));
  // Deleting makes room.
  ASSERT_TRUE(registry->Delete(SkeletonId(humanoid)).ok());
  EXPECT_EQ(registry->total_bytes(), 0);
  EXPECT_TRUE(registry->Register(panda).ok());
}

TEST(RegistryTest, UnopenableStoreIsAClearError) {
  auto store = OpenSqliteStore("/nonexistent-dir/x/registry.sqlite3");
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(), HasSubstr("/nonexistent-dir"));
}

TEST(RegistryTest, IdIsStableAndDependsOnContent) {
  const v1::Skeleton a = ToWire(testing::TwoBoneLegDef(), "leg");
  v1::Skeleton b = a;
  EXPECT_EQ(SkeletonId(a), SkeletonId(b));
  b.mutable_joints(1)->mutable_rest()->mutable_translation()->set_y(-0.46);
  EXPECT_NE(SkeletonId(a), SkeletonId(b));
}

// -0.0 and +0.0 are the same skeleton (a JSON round trip drops the sign).
TEST(RegistryTest, SignOfZeroDoesNotChangeTheId) {
  v1::Skeleton a = ToWire(testing::TwoBoneLegDef(), "leg");
  a.mutable_joints(1)->mutable_rest()->mutable_translation()->set_z(0.0);
  v1::Skeleton b = a;
  b.mutable_joints(1)->mutable_rest()->mutable_translation()->set_z(-0.0);
  EXPECT_NE(a.SerializeAsString(), b.SerializeAsString());
  EXPECT_EQ(SkeletonId(a), SkeletonId(b));
}

}  // namespace
}  // namespace reach

namespace reach {
namespace {

// A chain of `joints` with short names: the registered bytes are mostly
// numbers, the case where a built Skeleton is largest beside them.
v1::Skeleton ShortNamedChain(int joints, int k) {
  v1::Skeleton skeleton =
      ToWire(testing::StraightChainDef(joints), absl::StrCat("chain ", k));
  for (int j = 0; j < joints; ++j) {
    skeleton.mutable_joints(j)->set_name(absl::StrCat("j", j));
  }
  skeleton.mutable_chains(0)->set_root("j0");
  // Chains are limited to 64 joints.
  skeleton.mutable_chains(0)->set_tip(
      absl::StrCat("j", std::min(joints, 32) - 1));
  return skeleton;
}

TEST(RegistryMemoryTest, AnEntryTakesAboutWhatWasRegistered) {
  std::unique_ptr<Registry> registry =
      *Registry::Create(NewMemoryStore(), SkeletonLimits{});
  for (int joints : {4, 64, 1024}) {
    const v1::Skeleton skeleton = ShortNamedChain(joints, joints);
    auto result = registry->Register(skeleton);
    ASSERT_TRUE(result.ok()) << result.status();
    const auto entry = registry->Find(result->id);
    const double ratio = static_cast<double>(entry->memory_bytes) /
                         static_cast<double>(skeleton.ByteSizeLong());
    // The stored bytes, the id and the entry: never the 8x of a built
    // Skeleton beside them (that lives in the bounded cache).
    EXPECT_LT(ratio, joints == 4 ? 3.0 : 1.3) << joints << " joints";
    EXPECT_GT(registry->Load(result->id)->memory_bytes,
              2 * entry->memory_bytes);
  }
}

TEST(RegistryMemoryTest, TheCacheKeepsTheMostRecentlyUsedWithinItsBytes) {
  RegistryLimits limits;
  std::unique_ptr<Registry> probe = *Registry::Create(NewMemoryStore(), limits);
  const std::string probe_id = probe->Register(ShortNamedChain(64, 0))->id;
  const int64_t one = probe->Load(probe_id)->memory_bytes;

  limits.cache_bytes = 3 * one + one / 2;  // Room for three.
  std::unique_ptr<Registry> registry =
      *Registry::Create(NewMemoryStore(), limits);
  std::vector<std::string> ids;
  for (int k = 0; k < 5; ++k) {
    ids.push_back(registry->Register(ShortNamedChain(64, k))->id);
  }
  // Registering loads nothing.
  EXPECT_EQ(registry->cached_skeletons(), 0);
  for (int k = 0; k < 5; ++k) ASSERT_NE(registry->Load(ids[k]), nullptr);
  EXPECT_EQ(registry->cached_skeletons(), 3);
  EXPECT_LE(registry->cached_bytes(), limits.cache_bytes);
  // 2, 3, 4 are cached: loading 2 again returns the cached one; 0 is
  // built again and pushes out 3 (the least recently used).
  const auto two = registry->Load(ids[2]);
  EXPECT_EQ(registry->Load(ids[2]), two);
  const auto four = registry->Load(ids[4]);
  const auto zero = registry->Load(ids[0]);
  EXPECT_EQ(registry->Load(ids[2]), two);
  EXPECT_EQ(registry->Load(ids[4]), four);
  EXPECT_EQ(registry->cached_skeletons(), 3);
  // A reloaded skeleton is the same skeleton.
  const auto three = registry->Load(ids[3]);
  ASSERT_NE(three, nullptr);
  EXPECT_EQ(three->skeleton.num_joints(), 64);
  EXPECT_EQ(three->id, ids[3]);

  // Counted: 5 + 2 (zero, three) misses, 5 hits (two, two, four, two,
  // four), an eviction for each miss past the third.
  SkeletonCacheStats stats = registry->cache_stats();
  EXPECT_EQ(stats.misses, 7);
  EXPECT_EQ(stats.hits, 5);
  EXPECT_EQ(stats.evictions, 4);
  EXPECT_EQ(stats.entries, 3);
  EXPECT_EQ(stats.bytes, registry->cached_bytes());
  EXPECT_EQ(stats.limit_bytes, limits.cache_bytes);

  // One larger than the whole cache solves, but is not kept: the bound
  // holds always, and what was cached stays.
  const std::string big = registry->Register(ShortNamedChain(1024, 9))->id;
  const auto held = registry->Load(big);
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(held->skeleton.num_joints(), 1024);
  EXPECT_NE(registry->Load(big), held);
  EXPECT_EQ(registry->cached_skeletons(), 3);
  EXPECT_LE(registry->cached_bytes(), limits.cache_bytes);

  // No cache: every Load builds.
  limits.cache_bytes = 0;
  std::unique_ptr<Registry> uncached =
      *Registry::Create(NewMemoryStore(), limits);
  const std::string id = uncached->Register(ShortNamedChain(8, 1))->id;
  EXPECT_NE(uncached->Load(id), uncached->Load(id));
  EXPECT_EQ(uncached->cached_skeletons(), 0);
}

// SQLite: the registry keeps no definition in memory; what the cache
// evicted is read from the file again (and GetSkeleton's definition with
// it), and a skeleton held by a caller outlives its eviction.
TEST(RegistryMemoryTest, AnEvictedSkeletonIsReadFromTheSqliteFileAgain) {
  const std::string path = TempDir() + "/evicted.sqlite3";
  RegistryLimits limits;
  std::unique_ptr<Registry> probe = *Registry::Create(NewMemoryStore(), limits);
  const int64_t one =
      probe->Load(probe->Register(ShortNamedChain(16, 0))->id)->memory_bytes;
  limits.cache_bytes = one + one / 2;  // Room for one.
  std::unique_ptr<Registry> registry =
      *Registry::Create(*OpenSqliteStore(path), limits);
  std::vector<std::string> ids;
  std::vector<v1::Skeleton> definitions;
  for (int k = 0; k < 4; ++k) {
    definitions.push_back(ShortNamedChain(16, k));
    ids.push_back(registry->Register(definitions.back())->id);
  }
  const auto first = registry->Load(ids[0]);
  ASSERT_NE(first, nullptr);
  for (int k = 1; k < 4; ++k) {
    const absl::StatusOr<std::shared_ptr<const LoadedSkeleton>> got =
        registry->Get(ids[k]);
    ASSERT_TRUE(got.ok()) << got.status();
    v1::Skeleton stored;
    ASSERT_TRUE(stored.ParseFromString((*got)->definition_bytes));
    EXPECT_EQ(SkeletonId(stored), ids[k]);
    EXPECT_EQ(stored.name(), definitions[k].name());
    EXPECT_EQ(registry->cached_skeletons(), 1);
  }
  // Evicted, still whole for whoever holds it.
  EXPECT_EQ(first->skeleton.num_joints(), 16);
  const auto again = registry->Load(ids[0]);
  ASSERT_NE(again, nullptr);
  EXPECT_NE(again, first);
  EXPECT_EQ(again->definition_bytes, first->definition_bytes);
  EXPECT_EQ(registry->cache_stats().evictions, 4);
  // Deleted: gone from the cache, and not read back.
  ASSERT_TRUE(registry->Delete(ids[0]).ok());
  EXPECT_EQ(registry->cached_skeletons(), 0);
  EXPECT_EQ(registry->Get(ids[0]).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(registry->Get("").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RegistryOwnersTest, OwnersAndQuotasSurviveARestart) {
  const std::string path = TempDir() + "/owners.sqlite3";
  std::string shared, mine;
  {
    std::unique_ptr<Registry> registry = Open(path);
    shared = registry->Register(ShortNamedChain(4, 1), "a")->id;
    ASSERT_TRUE(registry->Register(ShortNamedChain(4, 1), "b").ok());
    mine = registry->Register(ShortNamedChain(4, 2), "a")->id;
    // A skeleton stored without an owner (an admin's, or from before
    // owners were kept).
    ASSERT_TRUE(registry->Register(ShortNamedChain(4, 3)).ok());
  }
  std::unique_ptr<Registry> reopened = Open(path);
  EXPECT_THAT(reopened->Owners(shared),
              ::testing::UnorderedElementsAre("a", "b"));
  EXPECT_THAT(reopened->Owners(mine), ::testing::ElementsAre("a"));
  EXPECT_EQ(reopened->Usage("a").skeletons, 2);
  EXPECT_EQ(reopened->Usage("b").skeletons, 1);
  EXPECT_EQ(reopened->Usage("b").bytes, reopened->Find(shared)->memory_bytes);
  EXPECT_EQ(reopened->Delete(mine, "b").code(),
            absl::StatusCode::kPermissionDenied);
  ASSERT_TRUE(reopened->Delete(shared, "a").ok());
  EXPECT_NE(reopened->Find(shared), nullptr);
  EXPECT_EQ(reopened->Usage("a").skeletons, 1);
  ASSERT_TRUE(reopened->Delete(shared, "b").ok());
  EXPECT_EQ(reopened->Find(shared), nullptr);
  EXPECT_EQ(reopened->Usage("b").skeletons, 0);
}

}  // namespace
}  // namespace reach
