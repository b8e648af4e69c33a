// The same models as Orocos KDL chains, for cross-checks and the peer
// benchmark.
#ifndef REACH_TESTS_TESTING_KDL_MODELS_H_
#define REACH_TESTS_TESTING_KDL_MODELS_H_

#include <kdl/chain.hpp>

namespace reach::testing {

// The Franka Emika Panda of PandaDef() as a KDL chain: base to flange, the
// 7 revolute joints in order.
KDL::Chain PandaKdlChain();

}  // namespace reach::testing

#endif  // REACH_TESTS_TESTING_KDL_MODELS_H_
