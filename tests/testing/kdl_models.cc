#include "tests/testing/kdl_models.h"

#include <kdl/frames.hpp>
#include <kdl/joint.hpp>
#include <kdl/segment.hpp>

#include "solvers/skeleton.h"
#include "tests/testing/models.h"

namespace reach::testing {
namespace {

KDL::Frame ToKdl(const Transform& t) {
  return KDL::Frame(
      KDL::Rotation::Quaternion(t.rotation.x(), t.rotation.y(), t.rotation.z(),
                                t.rotation.w()),
      KDL::Vector(t.translation.x(), t.translation.y(), t.translation.z()));
}

}  // namespace

KDL::Chain PandaKdlChain() {
  // A KDL segment is "joint, then the fixed frame to the next joint".
  // Our joint i's rest transform is the URDF origin that precedes joint i,
  // so: a fixed segment to joint 1, then (RotZ, origin of the next joint).
  const SkeletonDef def = PandaDef();
  KDL::Chain chain;
  chain.addSegment(
      KDL::Segment(KDL::Joint(KDL::Joint::None), ToKdl(def.joints[1].rest)));
  for (int i = 1; i <= 7; ++i) {
    chain.addSegment(KDL::Segment(KDL::Joint(KDL::Joint::RotZ),
                                  ToKdl(def.joints[i + 1].rest)));
  }
  return chain;
}

}  // namespace reach::testing
