// The browser viewer's static files (viewer/: the page, its script and
// style, and three.js from npm), embedded into reach-server at build time
// so a deployed binary serves them with nothing beside it and the browser
// fetches nothing from the internet.
#ifndef REACH_VIEWER_ASSETS_H_
#define REACH_VIEWER_ASSETS_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace reach {

struct EmbeddedAsset {
  const char* url;           // Absolute path, e.g. "/viewer.js".
  const char* content_type;  // e.g. "text/javascript; charset=utf-8".
  const char* data;
  size_t size;
};

extern const EmbeddedAsset kEmbeddedAssets[];
extern const int kNumEmbeddedAssets;

// The asset served at `url` ("/" is "/index.html"); nullptr when none.
const EmbeddedAsset* FindAsset(absl::string_view url);

}  // namespace reach

#endif  // REACH_VIEWER_ASSETS_H_
