// Reading back what importers/gltf_animation.h writes, independently of
// it: a .glb's animation sampled at one of its keys and written into the
// nodes' own translation and rotation, so that the project's importer
// (ImportGltf / ParseGltf) reads that frame's pose as the skin's rest.
#ifndef REACH_TESTS_TESTING_GLTF_BAKE_H_
#define REACH_TESTS_TESTING_GLTF_BAKE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace reach::testing {

// The .glb `glb` with key `key` of animation `animation` (-1: the last)
// set on every node it animates (the channels' outputs, read from the BIN
// chunk as floats; translation and rotation only). Errors when the file is
// not a .glb or the animation is not of that shape.
absl::StatusOr<std::string> BakeGlbAnimationKey(absl::string_view glb,
                                                int animation, int key);

// The number of keys (of its first sampler's input) and the name of
// animation `animation` (-1: the last).
absl::StatusOr<int> GlbAnimationKeys(absl::string_view glb, int animation,
                                     std::string* name = nullptr);

}  // namespace reach::testing

#endif  // REACH_TESTS_TESTING_GLTF_BAKE_H_
