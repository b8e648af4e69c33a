// SolveBatch's item-by-item wire handling, checked against protobuf's own
// parser and serializer.
#include "server/batch_wire.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "google/protobuf/unknown_field_set.h"
#include "reach/v1/solve.pb.h"
#include "wire/convert.h"
#include "server/memory.h"
#include "tests/testing/models.h"

namespace reach {
namespace {

using ::testing::HasSubstr;

v1::SolveBatchRequest ThreeItems() {
  v1::SolveBatchRequest batch;
  for (int i = 0; i < 3; ++i) {
    v1::SolveRequest* item = batch.add_items();
    item->set_skeleton_id("skeleton-" + std::to_string(i));
    item->set_sequence(100 + i);
    v1::Goal* goal = item->add_goals();
    goal->set_chain(std::string(i * 200, 'c'));  // Multi-byte lengths.
    goal->mutable_target()->set_x(0.25 * i);
  }
  return batch;
}

TEST(BatchWireTest, SplitFindsEveryItemInOrder) {
  const v1::SolveBatchRequest batch = ThreeItems();
  const std::string wire = batch.SerializeAsString();
  BatchRequestView view;
  ASSERT_TRUE(SplitBatchItems(wire, 100, &view).ok());
  EXPECT_EQ(view.skeleton_id, "");
  const std::vector<absl::string_view>& items = view.items;
  ASSERT_EQ(items.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    v1::SolveRequest parsed;
    ASSERT_TRUE(parsed.ParseFromArray(items[i].data(),
                                      static_cast<int>(items[i].size())));
    EXPECT_EQ(parsed.SerializeAsString(), batch.items(i).SerializeAsString())
        << i;
  }
}

TEST(BatchWireTest, SplitSkipsFieldsItDoesNotKnowAsAParserWould) {
  v1::SolveBatchRequest batch = ThreeItems();
  google::protobuf::UnknownFieldSet* unknown =
      batch.GetReflection()->MutableUnknownFields(&batch);
  unknown->AddVarint(7, 12345);
  unknown->AddFixed64(8, 99);
  unknown->AddFixed32(9, 5);
  unknown->AddLengthDelimited(10, "not an item");
  unknown->AddGroup(11)->AddVarint(1, 2);
  const std::string wire = batch.SerializeAsString();
  BatchRequestView view;
  ASSERT_TRUE(SplitBatchItems(wire, 100, &view).ok());
  v1::SolveBatchRequest reference;
  ASSERT_TRUE(reference.ParseFromString(wire));
  ASSERT_EQ(view.items.size(), static_cast<size_t>(reference.items_size()));
  EXPECT_EQ(view.items.size(), 3u);
}

TEST(BatchWireTest, SplitFindsTheBatchSkeletonIdLastOneWinning) {
  v1::SolveBatchRequest batch = ThreeItems();
  batch.set_skeleton_id("first");
  std::string wire = batch.SerializeAsString();
  v1::SolveBatchRequest later;
  later.set_skeleton_id("second");
  wire += later.SerializeAsString();  // Concatenation merges, as parsing.
  BatchRequestView view;
  ASSERT_TRUE(SplitBatchItems(wire, 100, &view).ok());
  v1::SolveBatchRequest reference;
  ASSERT_TRUE(reference.ParseFromString(wire));
  EXPECT_EQ(view.skeleton_id, reference.skeleton_id());
  EXPECT_EQ(view.skeleton_id, "second");
  EXPECT_EQ(view.items.size(), 3u);
}

TEST(BatchWireTest, StopsAtMoreThanMaxItems) {
  const std::string wire = ThreeItems().SerializeAsString();
  BatchRequestView view;
  EXPECT_TRUE(SplitBatchItems(wire, 3, &view).ok());
  const absl::Status status = SplitBatchItems(wire, 2, &view);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("items: more than 2 entries"));
  EXPECT_THAT(status.message(), HasSubstr("--max_batch"));
}

TEST(BatchWireTest, EmptyRequestHasNoItems) {
  BatchRequestView view;
  view.items = {"stale"};
  view.skeleton_id = "stale";
  ASSERT_TRUE(SplitBatchItems("", 100, &view).ok());
  EXPECT_TRUE(view.items.empty());
  EXPECT_TRUE(view.skeleton_id.empty());
}

TEST(BatchWireTest, MalformedRequestsAreInvalidArgumentWithTheOffset) {
  const std::string wire = ThreeItems().SerializeAsString();
  BatchRequestView view;
  // Cut inside the last item, inside a length varint, and a zero tag.
  for (const std::string& bad :
       {wire.substr(0, wire.size() - 3), std::string("\x0a\xff", 2),
        std::string("\x0a\x05" "ab", 4), std::string("\x00\x01", 2),
        wire + std::string("\x0a", 1)}) {
    v1::SolveBatchRequest reference;
    EXPECT_FALSE(reference.ParseFromString(bad));
    const absl::Status status = SplitBatchItems(bad, 100, &view);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("not a valid SolveBatchRequest"));
    EXPECT_THAT(status.message(), HasSubstr("malformed at byte"));
  }
}

TEST(BatchWireTest, AppendedItemsParseAsASolveBatchResponse) {
  std::string out;
  std::vector<v1::SolveResponse> responses(3);
  for (int i = 0; i < 3; ++i) {
    responses[i].set_sequence(i);
    // Item 1 is large enough for a two-byte length.
    for (int k = 0; k < (i == 1 ? 40 : 2); ++k) {
      responses[i].add_rotated_joints(k);
      for (double v : {1.0, 0.0, 0.0, 0.0}) responses[i].add_rotations(v);
    }
    AppendBatchItem(responses[i], &out);
  }
  AppendBatchItem(v1::SolveResponse(), &out);  // An empty item still counts.
  v1::SolveBatchResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(out));
  ASSERT_EQ(parsed.items_size(), 4);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(parsed.items(i).SerializeAsString(),
              responses[i].SerializeAsString());
  }
  EXPECT_EQ(parsed.items(3).ByteSizeLong(), 0u);
}

// AppendSolvedItem must write exactly what building the SolveResponse with
// ToProto and serializing it as an item does: every field's presence rule
// (proto3 skips zeros, but writes -0.0), multi-byte joint indices (200
// joints), negative int32s (ten-byte varints), large sequences, and
// translated as well as rotated joints.
TEST(BatchWireTest, SolvedItemIsByteForByteWhatProtobufWrites) {
  testing::Rng rng(42);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_int_distribution<int> coin(0, 3);
  const double specials[] = {0.0, -0.0, 1e-300, 12.5};
  const uint64_t sequences[] = {0, 1, 127, 128, ~uint64_t{0}};
  const int iterations[] = {0, 1, 300, -1, -2147483647 - 1};
  constexpr int kJoints = 200;
  // Every third joint a hinge (limited, or not), so the hinge angles and
  // their regenerated rotations are written too.
  SkeletonDef def = testing::StraightChainDef(kJoints);
  def.chains.clear();  // Longer than a chain may be; not needed here.
  for (int j = 1; j < kJoints; j += 3) {
    def.joints[j].type = JointType::kHinge;
    def.joints[j].axis = Eigen::Vector3d(unit(rng), unit(rng), 1.0);
    if (j % 2 == 1) {
      def.joints[j].min_angle_rad = -0.5;
      def.joints[j].max_angle_rad = 2.0;
    }
  }
  const Skeleton skeleton = *Skeleton::Create(def);
  int hinge_angles = 0;
  for (int trial = 0; trial < 200; ++trial) {
    Pose start, solved;
    start.local.resize(kJoints);
    for (Transform& t : start.local) {
      t.rotation = testing::RandomRotation(rng);
      t.translation = Eigen::Vector3d(unit(rng), unit(rng), unit(rng));
    }
    solved = start;
    for (int j = 0; j < kJoints; ++j) {
      if (coin(rng) == 0) solved.local[j].rotation = testing::RandomRotation(rng);
      if (coin(rng) == 0) solved.local[j].translation.x() += 0.5;
    }
    if (trial % 10 == 0) solved = start;  // Nothing changed.
    std::vector<GoalResult> results(trial % 5);
    for (size_t g = 0; g < results.size(); ++g) {
      GoalResult& r = results[g];
      r.reached = coin(rng) == 0;
      r.position_error = coin(rng) == 0 ? specials[coin(rng)] : unit(rng);
      r.orientation_error_rad = specials[coin(rng)];
      r.iterations = iterations[(trial + g) % 5];
      r.solver = static_cast<SolverKind>((trial + g) % kNumSolverKinds);
      r.tolerance = specials[coin(rng)];
      r.orientation_tolerance_rad = unit(rng);
    }
    const uint64_t sequence = sequences[trial % 5];

    v1::SolveResponse response;
    response.set_sequence(sequence);
    ToProto(skeleton, start, solved, results, &response);
    hinge_angles += response.hinge_angles_rad_size();
    std::string want = "prefix";
    AppendBatchItem(response, &want);
    std::string got = "prefix";
    std::vector<uint32_t> changed;
    AppendSolvedItem(skeleton, sequence, start, solved, results, &changed,
                     &got);
    ASSERT_EQ(got, want) << "trial " << trial;
  }
  EXPECT_GT(hinge_angles, 1000);
}

TEST(MemoryTest, GlibcAcceptsTheAllocatorTuning) {
#ifdef __SANITIZE_ADDRESS__
  // AddressSanitizer's allocator replaces glibc's and ignores mallopt.
  EXPECT_FALSE(RetainFreedMemory());
#else
  EXPECT_TRUE(RetainFreedMemory());
#endif
}

}  // namespace
}  // namespace reach
