#include "importers/chains.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace reach::import {
namespace {

using ::testing::HasSubstr;

// A skeleton from (name, parent name) pairs; offsets do not matter here.
SkeletonDef Tree(const std::vector<std::pair<std::string, std::string>>& joints) {
  SkeletonDef def;
  for (const auto& [name, parent] : joints) {
    JointDef j;
    j.name = name;
    j.parent = -1;
    for (size_t i = 0; i < def.joints.size(); ++i) {
      if (def.joints[i].name == parent) j.parent = static_cast<int>(i);
    }
    def.joints.push_back(j);
  }
  return def;
}

std::string Describe(const std::vector<ChainDef>& chains) {
  std::string out;
  for (const ChainDef& c : chains) out += c.name + "=" + c.root + ":" + c.tip + " ";
  return out;
}

TEST(GuessLimbChainsTest, MotionBuilderNames) {
  const SkeletonDef def = Tree({{"Hips", ""},
                                {"LeftUpLeg", "Hips"},
                                {"LeftLeg", "LeftUpLeg"},
                                {"LeftFoot", "LeftLeg"},
                                {"Spine", "Hips"},
                                {"RightArm", "Spine"},
                                {"RightForeArm", "RightArm"},
                                {"RightHand", "RightForeArm"},
                                {"RightHandIndex1", "RightHand"}});
  EXPECT_EQ(Describe(GuessLimbChains(def)),
            "right_arm=RightArm:RightHand left_leg=LeftUpLeg:LeftFoot ");
}

TEST(GuessLimbChainsTest, ThreeDsMaxNamesPreferTheJointNearestTheRoot) {
  // "lhand" hangs below "LeftWrist": the wrist is the chain's tip.
  const SkeletonDef def = Tree({{"Hips", ""},
                                {"LeftCollar", "Hips"},
                                {"LeftShoulder", "LeftCollar"},
                                {"LeftElbow", "LeftShoulder"},
                                {"LeftWrist", "LeftElbow"},
                                {"lhand", "LeftWrist"},
                                {"RightHip", "Hips"},
                                {"RightKnee", "RightHip"},
                                {"RightAnkle", "RightKnee"}});
  EXPECT_EQ(Describe(GuessLimbChains(def)),
            "left_arm=LeftShoulder:LeftWrist right_leg=RightHip:RightAnkle ");
}

TEST(GuessLimbChainsTest, SideMarkersOfCommonRigs) {
  const SkeletonDef def = Tree({{"root", ""},
                                {"CC_Base_L_Upperarm", "root"},
                                {"CC_Base_L_Forearm", "CC_Base_L_Upperarm"},
                                {"CC_Base_L_Hand", "CC_Base_L_Forearm"},
                                {"thigh_r", "root"},
                                {"calf_r", "thigh_r"},
                                {"foot_r", "calf_r"},
                                {"upperarm.R", "root"},
                                {"lowerarm.R", "upperarm.R"},
                                {"hand.R", "lowerarm.R"},
                                {"mixamorig:LeftUpLeg", "root"},
                                {"mixamorig:LeftLeg", "mixamorig:LeftUpLeg"},
                                {"mixamorig:LeftFoot", "mixamorig:LeftLeg"}});
  EXPECT_EQ(Describe(GuessLimbChains(def)),
            "left_arm=CC_Base_L_Upperarm:CC_Base_L_Hand "
            "right_arm=upperarm.R:hand.R "
            "left_leg=mixamorig:LeftUpLeg:mixamorig:LeftFoot "
            "right_leg=thigh_r:foot_r ");
}

TEST(GuessLimbChainsTest, NoSideOrTooShallowMeansNoChain) {
  const SkeletonDef def = Tree({{"root", ""},
                                {"Handle", "root"},
                                {"LeftHand", "root"},
                                {"arm", "root"},
                                {"forearm", "arm"},
                                {"hand", "forearm"}});
  EXPECT_TRUE(GuessLimbChains(def).empty()) << Describe(GuessLimbChains(def));
}

TEST(ChainSpecTest, ParsesAndRejects) {
  absl::StatusOr<ChainDef> chain = ParseChainSpec("tail=Tail1:Tail5");
  ASSERT_TRUE(chain.ok());
  EXPECT_EQ(chain->name, "tail");
  EXPECT_EQ(chain->root, "Tail1");
  EXPECT_EQ(chain->tip, "Tail5");
  // Joint names with ':' (mixamorig:LeftArm) are split at a comma.
  chain = ParseChainSpec("arm=mixamorig:LeftArm,mixamorig:LeftHand");
  ASSERT_TRUE(chain.ok());
  EXPECT_EQ(chain->root, "mixamorig:LeftArm");
  EXPECT_EQ(chain->tip, "mixamorig:LeftHand");
  for (const char* bad : {"tail", "=a:b", "tail=a", "tail=:b", "tail=a:",
                          "arm=m:a:m:b", "tail=a,"}) {
    absl::StatusOr<ChainDef> c = ParseChainSpec(bad);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(c.status().message(), HasSubstr("NAME=ROOT:TIP"));
  }
}

TEST(ChainSpecTest, OverridesReplaceByNameAndAdd) {
  std::vector<ChainDef> chains = {{"left_arm", "a", "b"}, {"right_arm", "c", "d"}};
  ApplyChainOverrides({{"left_arm", "x", "y"}, {"tail", "t1", "t2"}}, &chains);
  EXPECT_EQ(Describe(chains), "left_arm=x:y right_arm=c:d tail=t1:t2 ");
}

}  // namespace
}  // namespace reach::import
