// The two-bone kernel's AVX2 + FMA build: four limbs in AVX2 lanes and one
// in scalar code. solvers/CMakeLists.txt builds this file alone with
// -mavx2 -mfma (on x86-64); two_bone.cc calls it only when the CPU reports
// both. It includes nothing but the kernel (no Eigen, no standard
// templates), so no AVX2 code can be linked in for another translation
// unit's inline functions.
#include "solvers/two_bone_lanes.h"

namespace reach {
namespace two_bone_lanes {

#ifdef __AVX2__
void SolveBlockAvx2(const LimbBlock& in, LimbBlockResult* out) {
  SolveBlock<Lanes4>(in, 0, out);
}
bool SolveOneAvx2(const LimbRefs& in, double* root_local, double* mid_local) {
  return SolveOne(in, root_local, mid_local);
}
#endif

}  // namespace two_bone_lanes
}  // namespace reach
