#include "importers/gltf_animation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "importers/gltf.h"
#include "nlohmann/json.hpp"

namespace reach::import {
namespace {

using Json = nlohmann::ordered_json;  // Keeps the file's key order.

constexpr uint32_t kGlbMagic = 0x46546C67;   // "glTF"
constexpr uint32_t kChunkJson = 0x4E4F534A;  // "JSON"
constexpr uint32_t kChunkBin = 0x004E4942;   // "BIN\0"
// glTF's accessor component type and buffer view alignment.
constexpr int kFloat = 5126;

uint32_t Word(absl::string_view bytes, size_t at) {
  uint32_t word = 0;
  for (int b = 3; b >= 0; --b) {
    word = (word << 8) | static_cast<unsigned char>(bytes[at + b]);
  }
  return word;
}

void AppendWord(std::string* out, uint32_t word) {
  for (int b = 0; b < 4; ++b)
    out->push_back(static_cast<char>(word >> (8 * b)));
}

void AppendFloat(std::string* out, double value) {
  const float f = static_cast<float>(value);
  uint32_t word;
  std::memcpy(&word, &f, sizeof word);
  AppendWord(out, word);
}

void PadTo4(std::string* out, char pad) {
  while (out->size() % 4 != 0) out->push_back(pad);
}

std::string Base64(absl::string_view bytes) {
  static constexpr char kDigits[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = static_cast<unsigned char>(bytes[i]) << 16;
    const size_t left = bytes.size() - i;
    if (left > 1) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (left > 2) v |= static_cast<unsigned char>(bytes[i + 2]);
    out.push_back(kDigits[(v >> 18) & 63]);
    out.push_back(kDigits[(v >> 12) & 63]);
    out.push_back(left > 1 ? kDigits[(v >> 6) & 63] : '=');
    out.push_back(left > 2 ? kDigits[v & 63] : '=');
  }
  return out;
}

// A node's local transform as the importer read it, from the joint's rest
// and what was folded above it.
Transform NodeLocal(const Transform& above, const Transform& joint) {
  Transform local = above.Inverse() * joint;
  local.rotation.normalize();
  return local;
}

// The keys of the new animation, appended to one byte string.
class Keys {
 public:
  // Adds `values` as a float accessor of `type` ("SCALAR", "VEC3", "VEC4"),
  // `width` floats an element; returns its index. With min_max, the
  // accessor gets its min and max (a sampler input needs them).
  int Add(const std::vector<double>& values, int width, const char* type,
          bool min_max, Json* accessors, Json* views, int buffer, size_t base) {
    const size_t offset = bytes_.size();
    for (double v : values) AppendFloat(&bytes_, v);
    Json view = {{"buffer", buffer},
                 {"byteOffset", base + offset},
                 {"byteLength", bytes_.size() - offset}};
    views->push_back(std::move(view));
    Json accessor = {{"bufferView", views->size() - 1},
                     {"componentType", kFloat},
                     {"count", values.size() / width},
                     {"type", type}};
    if (min_max) {
      std::vector<float> lo(width, INFINITY), hi(width, -INFINITY);
      for (size_t i = 0; i < values.size(); ++i) {
        const float f = static_cast<float>(values[i]);
        lo[i % width] = std::min(lo[i % width], f);
        hi[i % width] = std::max(hi[i % width], f);
      }
      accessor["min"] = lo;
      accessor["max"] = hi;
    }
    accessors->push_back(std::move(accessor));
    return static_cast<int>(accessors->size()) - 1;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

}  // namespace

absl::StatusOr<std::string> WriteGltfAnimation(
    absl::string_view target, const std::string& target_file,
    const Skeleton& skeleton, absl::Span<const Pose> poses, double frame_time,
    const GltfAnimationOptions& options) {
  const auto error = [&](absl::string_view message) {
    return ImportError(target_file, 0, "", message);
  };
  std::string extension = target_file.substr(target_file.rfind('.') + 1);
  if (target_file.rfind('.') == std::string::npos ||
      absl::AsciiStrToLower(extension) != "glb") {
    return error(
        "an animation is written into a copy of a .glb file; this "
        "is not one");
  }
  if (!(frame_time > 0) || !std::isfinite(frame_time)) {
    return error(absl::StrCat("frame time ", frame_time, " is not positive"));
  }
  if (poses.empty()) return error("no frames to write");
  const int n = skeleton.num_joints();
  for (size_t f = 0; f < poses.size(); ++f) {
    if (static_cast<int>(poses[f].local.size()) != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("poses[", f, "] has ", poses[f].local.size(),
                       " joints; the skeleton has ", n));
    }
  }

  // The skin as the importer reads it: which node each joint is.
  GltfJointNodes nodes;
  absl::StatusOr<ImportedSkeleton> imported =
      ParseGltf(target, target_file, options.skin_index, options.limits,
                /*named_file=*/true, &nodes);
  if (!imported.ok()) return imported.status();
  absl::flat_hash_map<std::string, int> by_name;
  for (int i = 0; i < static_cast<int>(imported->def.joints.size()); ++i) {
    by_name[imported->def.joints[i].name] = i;
  }
  std::vector<int> file_joint(n);
  for (int j = 0; j < n; ++j) {
    auto it = by_name.find(skeleton.joint(j).name);
    if (it == by_name.end()) {
      return error(absl::StrCat("skin ", options.skin_index, " has no joint '",
                                skeleton.joint(j).name,
                                "'; the skeleton was not imported from it"));
    }
    file_joint[j] = it->second;
  }

  // The .glb's chunks (ParseGltf read the same bytes: the header and the
  // JSON chunk are sound).
  if (target.size() < 20) {
    return error("not a binary glTF file (no glTF header and JSON chunk)");
  }
  const uint32_t length = Word(target, 8);
  const uint32_t json_length = Word(target, 12);
  if (Word(target, 0) != kGlbMagic || Word(target, 16) != kChunkJson ||
      length > target.size() || 20 + uint64_t{json_length} > length) {
    return error("not a binary glTF file (no glTF header and JSON chunk)");
  }
  Json json = Json::parse(target.substr(20, json_length), nullptr,
                          /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return error("its JSON chunk does not parse");
  }
  absl::string_view bin;
  const size_t bin_at = 20 + json_length;
  if (bin_at + 8 <= length && Word(target, bin_at + 4) == kChunkBin) {
    bin = target.substr(bin_at + 8, Word(target, bin_at));
  }

  // Where the keys go: after the BIN chunk's data, in the buffer that is
  // that chunk (the first, without a uri); else in a new buffer, the BIN
  // chunk's when the file has no buffer, a data: URI otherwise.
  // The arrays this adds to, made first: an ordered_json object is a
  // vector, and adding a key moves the others.
  for (const char* key :
       {"buffers", "bufferViews", "accessors", "animations"}) {
    if (!json.contains(key) || !json[key].is_array()) json[key] = Json::array();
  }
  Json& buffers = json["buffers"];
  int buffer = -1;
  size_t base = 0;
  if (!bin.empty() && !buffers.empty() && buffers[0].is_object() &&
      !buffers[0].contains("uri")) {
    buffer = 0;
    const uint64_t used = buffers[0].value("byteLength", uint64_t{0});
    if (used > bin.size()) {
      return error("buffer 0 is longer than the BIN chunk");
    }
    bin = bin.substr(0, used);
    base = (used + 3) / 4 * 4;
  } else if (buffers.empty()) {
    buffer = 0;
    bin = absl::string_view();
  }

  Json& accessors = json["accessors"];
  Json& views = json["bufferViews"];
  const int new_buffer =
      buffer >= 0 ? buffer : static_cast<int>(buffers.size());
  Keys keys;

  const int frames = static_cast<int>(poses.size());
  std::vector<double> times(frames);
  for (int f = 0; f < frames; ++f) times[f] = f * frame_time;
  Json samplers = Json::array();
  Json channels = Json::array();
  if (frames > 0) {
    const int input = keys.Add(times, 1, "SCALAR", true, &accessors, &views,
                               new_buffer, base);
    const auto channel = [&](int node, const char* path,
                             const std::vector<double>& values, int width,
                             const char* type) {
      const int output = keys.Add(values, width, type, false, &accessors,
                                  &views, new_buffer, base);
      samplers.push_back(
          {{"input", input}, {"interpolation", "LINEAR"}, {"output", output}});
      channels.push_back({{"sampler", samplers.size() - 1},
                          {"target", {{"node", node}, {"path", path}}}});
    };
    Json& json_nodes = json["nodes"];
    for (int j = 0; j < n; ++j) {
      const Joint& joint = skeleton.joint(j);
      const int k = file_joint[j];
      const int node = nodes.node[k];
      const Transform& above = nodes.above[k];
      bool turns = false, moves = joint.parent < 0;
      for (const Pose& pose : poses) {
        const Transform& local = pose.local[j];
        turns =
            turns || AngleBetween(local.rotation, joint.rest.rotation) > 1e-12;
        moves = moves || (local.translation - joint.rest.translation).norm() >
                             1e-12 * (1 + joint.rest.translation.norm());
      }
      if (!turns && !moves) continue;
      std::vector<double> rotations, translations;
      Eigen::Quaterniond last(1, 0, 0, 0);
      for (int f = 0; f < frames; ++f) {
        const Transform local = NodeLocal(above, poses[f].local[j]);
        Eigen::Quaterniond q = local.rotation;
        // The same hemisphere as the last key: no key turns the long way.
        if (f > 0 && q.dot(last) < 0) q.coeffs() = -q.coeffs();
        last = q;
        // glTF's order is x, y, z, w.
        rotations.insert(rotations.end(), {q.x(), q.y(), q.z(), q.w()});
        translations.insert(translations.end(),
                            {local.translation.x(), local.translation.y(),
                             local.translation.z()});
      }
      // A channel needs translation, rotation and scale: a matrix becomes
      // them, as the importer decoded it.
      Json& file_node = json_nodes[node];
      if (file_node.contains("matrix")) {
        const Transform rest = NodeLocal(above, imported->def.joints[k].rest);
        file_node.erase("matrix");
        file_node["translation"] = {rest.translation.x(), rest.translation.y(),
                                    rest.translation.z()};
        file_node["rotation"] = {rest.rotation.x(), rest.rotation.y(),
                                 rest.rotation.z(), rest.rotation.w()};
        file_node["scale"] = {rest.scale, rest.scale, rest.scale};
      }
      if (turns) channel(node, "rotation", rotations, 4, "VEC4");
      if (moves) channel(node, "translation", translations, 3, "VEC3");
    }
  }
  Json animation = {{"name", options.name},
                    {"channels", std::move(channels)},
                    {"samplers", std::move(samplers)}};
  json["animations"].push_back(std::move(animation));

  std::string out_bin(bin);
  if (buffer >= 0) {
    PadTo4(&out_bin, '\0');
    out_bin += keys.bytes();
    if (buffers.empty()) buffers.push_back(Json::object());
    buffers[0]["byteLength"] = out_bin.size();
  } else {
    buffers.push_back(
        {{"byteLength", keys.bytes().size()},
         {"uri", absl::StrCat("data:application/octet-stream;base64,",
                              Base64(keys.bytes()))}});
  }

  std::string text = json.dump();
  PadTo4(&text, ' ');
  PadTo4(&out_bin, '\0');
  std::string glb;
  glb.reserve(12 + 8 + text.size() + 8 + out_bin.size());
  glb.append("glTF");
  AppendWord(&glb, 2);
  const size_t total =
      12 + 8 + text.size() + (out_bin.empty() ? 0 : 8 + out_bin.size());
  if (total > UINT32_MAX) return error("the copy would be over 4 GiB");
  AppendWord(&glb, static_cast<uint32_t>(total));
  AppendWord(&glb, static_cast<uint32_t>(text.size()));
  AppendWord(&glb, kChunkJson);
  glb += text;
  if (!out_bin.empty()) {
    AppendWord(&glb, static_cast<uint32_t>(out_bin.size()));
    AppendWord(&glb, kChunkBin);
    glb += out_bin;
  }
  return glb;
}

}  // namespace reach::import
