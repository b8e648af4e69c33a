// ClientString: what an error message or a log line may echo of a client's
// string; and the service's errors for names a megabyte long.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/call_interceptor.h"
#include "wire/convert.h"
#include "tests/testing/models.h"
#include "tests/testing/service.h"

namespace reach {
namespace {

using ::reach::testing::Context;
using ::reach::testing::MakeGoal;
using ::reach::testing::MustRegister;
using ::reach::testing::TestServer;
using ::reach::testing::ToWire;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Whether `s` is well-formed UTF-8 (protobuf's own check).
bool ValidUtf8(const std::string& s) {
  v1::GetSkeletonRequest probe;
  probe.set_skeleton_id(s);
  v1::GetSkeletonRequest parsed;
  return parsed.ParseFromString(probe.SerializeAsString());
}

TEST(ClientStringTest, ShortStringsPassUnchanged) {
  EXPECT_EQ(ClientString(""), "");
  EXPECT_EQ(ClientString("left_leg"), "left_leg");
  EXPECT_EQ(ClientString("h\xc3\xbc"
                         "fte \xe2\x86\x92 \xf0\x9f\xa6\xb4"),
            "h\xc3\xbc"
            "fte \xe2\x86\x92 \xf0\x9f\xa6\xb4");
  const std::string at_limit(kMaxClientStringBytes, 'a');
  EXPECT_EQ(ClientString(at_limit), at_limit);
}

TEST(ClientStringTest, LongStringsAreCutOnACodePointBoundary) {
  const std::string ascii(kMaxClientStringBytes + 1, 'a');
  EXPECT_EQ(ClientString(ascii), std::string(kMaxClientStringBytes, 'a') +
                                     "\xe2\x80\xa6(201 bytes)");

  // 2-, 3- and 4-byte characters: never split, never over the limit.
  for (const std::string c : {"\xc3\xa9", "\xe2\x86\x92", "\xf0\x9f\xa6\xb4"}) {
    std::string s;
    while (s.size() < 1000) s += c;
    const std::string cut = ClientString(s);
    const size_t kept = cut.find("\xe2\x80\xa6(");
    ASSERT_NE(kept, std::string::npos) << c.size();
    EXPECT_LE(kept, kMaxClientStringBytes);
    EXPECT_GT(kept, kMaxClientStringBytes - c.size());
    EXPECT_EQ(kept % c.size(), 0u);
    EXPECT_THAT(cut, EndsWith("(" + std::to_string(s.size()) + " bytes)"));
    EXPECT_TRUE(ValidUtf8(cut));
  }
  EXPECT_EQ(ClientString(std::string(50, 'x'), 10),
            "xxxxxxxxxx\xe2\x80\xa6(50 bytes)");
}

TEST(ClientStringTest, BytesThatAreNotUtf8AndControlsAreReplaced) {
  const std::string kReplacement = "\xef\xbf\xbd";
  EXPECT_EQ(ClientString("a\xff"
                         "b"),
            "a" + kReplacement + "b");
  EXPECT_EQ(ClientString("line\nbreak\x7f"),
            "line" + kReplacement + "break" + kReplacement);
  // Truncated sequence, overlong form, surrogate, above U+10FFFF.
  for (const std::string bad :
       {"\xe2\x86", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80"}) {
    const std::string out = ClientString("<" + bad + ">");
    EXPECT_TRUE(ValidUtf8(out)) << out;
    EXPECT_THAT(out, StartsWith("<" + kReplacement));
    EXPECT_THAT(out, EndsWith(kReplacement + ">"));
  }
  EXPECT_TRUE(ValidUtf8(ClientString(std::string(1000, '\xff'))));
}

// A name a megabyte long gets a short NOT_FOUND, not RESOURCE_EXHAUSTED
// (trailers over the client's limit) and not a megabyte of message.
TEST(ClientStringServiceTest, MegabyteNamesGetShortErrors) {
  TestServer server;
  const std::string id =
      MustRegister(*server.stub, ToWire(testing::TwoBoneLegDef(), "leg"));
  const std::string huge(1 << 20, 'q');
  v1::SolveResponse response;

  v1::SolveRequest chain;
  chain.set_skeleton_id(id);
  *chain.add_goals() = MakeGoal(huge, Eigen::Vector3d(0.1, 0.5, 0.2));
  grpc::Status status = server.stub->Solve(Context().get(), chain, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("goals[0].chain"));
  EXPECT_THAT(status.error_message(), HasSubstr("(1048576 bytes)"));
  EXPECT_LT(status.error_message().size(), 300u);

  v1::SolveRequest joint;
  joint.set_skeleton_id(id);
  v1::Goal* goal = joint.add_goals();
  *goal = MakeGoal("", Eigen::Vector3d(0.1, 0.5, 0.2));
  goal->set_root_joint("hip");
  goal->set_tip_joint(huge);
  status = server.stub->Solve(Context().get(), joint, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("goals[0].tip_joint"));
  EXPECT_LT(status.error_message().size(), 300u);

  // The skeleton id is echoed outside convert.cc; the server's cap on
  // status messages still keeps it short.
  v1::SolveRequest skeleton = chain;
  skeleton.set_skeleton_id(huge);
  status = server.stub->Solve(Context().get(), skeleton, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_LE(status.error_message().size(), kMaxStatusMessageBytes + 32);
}

}  // namespace
}  // namespace reach
