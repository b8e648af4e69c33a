// SolveBatch's item-by-item wire handling, checked against protobuf's own
// parser and serializer.
#include "server/batch_wire.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "google/protobuf/unknown_field_set.h"
#include "reach/v1/solve.pb.h"
#include "server/memory.h"

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
