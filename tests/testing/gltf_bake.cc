#include "tests/testing/gltf_bake.h"

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace reach::testing {
namespace {

using Json = nlohmann::ordered_json;

uint32_t Word(absl::string_view bytes, size_t at) {
  uint32_t w = 0;
  std::memcpy(&w, bytes.data() + at, 4);  // x86-64: little-endian, as .glb.
  return w;
}

struct Glb {
  Json json;
  std::string bin;
};

absl::StatusOr<Glb> Split(absl::string_view glb) {
  if (glb.size() < 20 || glb.substr(0, 4) != "glTF" || Word(glb, 4) != 2 ||
      Word(glb, 8) != glb.size()) {
    return absl::InvalidArgumentError("not a glTF 2 binary of its length");
  }
  const uint32_t json_length = Word(glb, 12);
  if (Word(glb, 16) != 0x4E4F534A || 20 + json_length > glb.size()) {
    return absl::InvalidArgumentError("no JSON chunk");
  }
  Glb out;
  out.json = Json::parse(glb.substr(20, json_length), nullptr, false);
  if (out.json.is_discarded()) return absl::InvalidArgumentError("bad JSON");
  const size_t bin_at = 20 + json_length;
  if (bin_at + 8 <= glb.size()) {
    if (Word(glb, bin_at + 4) != 0x004E4942) {
      return absl::InvalidArgumentError("second chunk is not BIN");
    }
    out.bin = std::string(glb.substr(bin_at + 8, Word(glb, bin_at)));
  }
  return out;
}

std::string Join(const Glb& glb) {
  std::string text = glb.json.dump();
  while (text.size() % 4 != 0) text += ' ';
  std::string bin = glb.bin;
  while (bin.size() % 4 != 0) bin += '\0';
  std::string out = "glTF";
  const auto word = [&out](uint32_t w) {
    out.append(reinterpret_cast<const char*>(&w), 4);
  };
  word(2);
  word(static_cast<uint32_t>(20 + text.size() +
                             (bin.empty() ? 0 : 8 + bin.size())));
  word(static_cast<uint32_t>(text.size()));
  word(0x4E4F534A);
  out += text;
  if (!bin.empty()) {
    word(static_cast<uint32_t>(bin.size()));
    word(0x004E4942);
    out += bin;
  }
  return out;
}

// Element `index` of float accessor `accessor`: `width` floats.
absl::StatusOr<std::vector<double>> Element(const Glb& glb, int accessor,
                                            int index, int width) {
  const Json& a = glb.json["accessors"][accessor];
  if (a["componentType"] != 5126) {
    return absl::InvalidArgumentError("accessor is not float");
  }
  if (index >= a["count"].get<int>()) {
    return absl::InvalidArgumentError(
        absl::StrCat("key ", index, " of ", a["count"].get<int>()));
  }
  const Json& view = glb.json["bufferViews"][a["bufferView"].get<int>()];
  if (view["buffer"] != 0 || glb.json["buffers"][0].contains("uri")) {
    return absl::InvalidArgumentError("keys outside the BIN chunk");
  }
  const size_t stride = view.value("byteStride", 4 * width);
  const size_t at = view.value("byteOffset", size_t{0}) +
                    a.value("byteOffset", size_t{0}) + index * stride;
  if (at + 4 * width > glb.bin.size()) {
    return absl::InvalidArgumentError("accessor past the BIN chunk");
  }
  std::vector<double> out(width);
  for (int i = 0; i < width; ++i) {
    float f;
    std::memcpy(&f, glb.bin.data() + at + 4 * i, 4);
    out[i] = f;
  }
  return out;
}

absl::StatusOr<const Json*> Animation(const Glb& glb, int animation) {
  const Json& animations = glb.json["animations"];
  if (!animations.is_array() || animations.empty()) {
    return absl::InvalidArgumentError("no animations");
  }
  if (animation < 0) animation = static_cast<int>(animations.size()) - 1;
  return &animations[animation];
}

}  // namespace

absl::StatusOr<std::string> BakeGlbAnimationKey(absl::string_view bytes,
                                                int animation, int key) {
  absl::StatusOr<Glb> glb = Split(bytes);
  if (!glb.ok()) return glb.status();
  absl::StatusOr<const Json*> found = Animation(*glb, animation);
  if (!found.ok()) return found.status();
  const Json a = **found;
  for (const Json& channel : a["channels"]) {
    const Json& sampler = a["samplers"][channel["sampler"].get<int>()];
    const std::string path = channel["target"]["path"];
    const int width = path == "rotation" ? 4 : 3;
    if (path != "rotation" && path != "translation") {
      return absl::InvalidArgumentError("path " + path);
    }
    absl::StatusOr<std::vector<double>> value =
        Element(*glb, sampler["output"].get<int>(), key, width);
    if (!value.ok()) return value.status();
    Json& node = glb->json["nodes"][channel["target"]["node"].get<int>()];
    if (node.contains("matrix")) {
      return absl::InvalidArgumentError("an animated node has a matrix");
    }
    node[path] = *value;
  }
  return Join(*glb);
}

absl::StatusOr<int> GlbAnimationKeys(absl::string_view bytes, int animation,
                                     std::string* name) {
  absl::StatusOr<Glb> glb = Split(bytes);
  if (!glb.ok()) return glb.status();
  absl::StatusOr<const Json*> found = Animation(*glb, animation);
  if (!found.ok()) return found.status();
  const Json& a = **found;
  if (name != nullptr) *name = a.value("name", "");
  if (a["samplers"].empty()) return 0;
  return glb->json["accessors"][a["samplers"][0]["input"].get<int>()]["count"]
      .get<int>();
}

}  // namespace reach::testing
