#include "viewer/assets.h"

namespace reach {

const EmbeddedAsset* FindAsset(absl::string_view url) {
  if (url == "/") url = "/index.html";
  for (int i = 0; i < kNumEmbeddedAssets; ++i) {
    if (url == kEmbeddedAssets[i].url) return &kEmbeddedAssets[i];
  }
  return nullptr;
}

}  // namespace reach
