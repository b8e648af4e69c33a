// glTF 2.0 skin -> SkeletonDef. The format: the Khronos glTF 2.0
// specification, sections 3.5 (nodes and hierarchy: local transforms are
// TRS or a column-major matrix, T * R * S) and 3.7.3 (skins: `joints` are
// node indices).
#include "importers/gltf.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/types/optional.h"
#include "importers/chains.h"
#include "tiny_gltf.h"

namespace reach::import {
namespace {

// A skin name that names no rig: what exporters write by default ("skin",
// "Skin_0", "skin1", Blender's "Armature", "Armature.001"), or nothing.
bool GenericSkinName(absl::string_view name) {
  name = absl::StripAsciiWhitespace(name);
  for (absl::string_view word : {"skin", "armature", "skeleton", "rig"}) {
    if (name.size() < word.size() ||
        !absl::EqualsIgnoreCase(name.substr(0, word.size()), word)) {
      continue;
    }
    absl::string_view rest = name.substr(word.size());
    if (!rest.empty() && (rest[0] == '_' || rest[0] == '.' || rest[0] == '-' ||
                          rest[0] == ' ')) {
      rest.remove_prefix(1);
    }
    if (std::all_of(rest.begin(), rest.end(), [](char c) {
          return absl::ascii_isdigit(static_cast<unsigned char>(c));
        })) {
      return true;
    }
  }
  return name.empty();
}

// Per-axis scales that agree to this relative tolerance count as uniform:
// exporters write float scales such as (1, 1.0000001, 0.99999994).
constexpr double kUniformScaleTolerance = 1e-6;

// Skeletons need no pixels: images are left undecoded.
bool SkipImage(tinygltf::Image*, const int, std::string*, std::string*, int,
               int, const unsigned char*, int, void*) {
  return true;
}

// The most of tinygltf's messages an error keeps: tinygltf writes a line
// per bad element and quotes whole uris in them ("Failed to decode 'uri' :
// data:..."), and an error goes back to the client and into logs.
constexpr size_t kMaxLoaderMessageBytes = 1024;

// tinygltf's messages are newline-terminated lines; one line for ours.
std::string OneLine(absl::string_view text) {
  std::vector<absl::string_view> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    line = absl::StripAsciiWhitespace(line);
    if (!line.empty()) lines.push_back(line);
  }
  std::string joined = absl::StrJoin(lines, "; ");
  if (joined.size() > kMaxLoaderMessageBytes) {
    joined.resize(kMaxLoaderMessageBytes);
    joined.append("...");
  }
  return joined;
}

// The line of a JSON parse error ("... parse error at line 5, column 1:
// ..."), or 0.
int JsonErrorLine(absl::string_view message) {
  const size_t at = message.find("at line ");
  if (at == absl::string_view::npos) return 0;
  absl::string_view rest = message.substr(at + 8);
  const size_t end = rest.find_first_not_of("0123456789");
  int line = 0;
  if (!absl::SimpleAtoi(rest.substr(0, end), &line)) return 0;
  return line;
}

class GltfReader {
 public:
  // `named_file`: `file` is the file's real name, whose stem may name the
  // skeleton.
  GltfReader(const std::string& file, const tinygltf::Model& model,
             bool named_file)
      : file_(file),
        model_(model),
        local_(model.nodes.size()),
        named_file_(named_file) {}

  absl::StatusOr<ImportedSkeleton> Read(int skin_index, GltfJointNodes* nodes);

 private:
  // glTF has no line numbers once parsed: errors name the file and element.
  absl::Status Error(absl::string_view element,
                     absl::string_view message) const {
    return ImportError(file_, 0, element, message);
  }
  std::string NodeElement(int node) const {
    const std::string& name = model_.nodes[node].name;
    return name.empty() ? absl::StrCat("node ", node)
                        : absl::StrCat("node ", node, " '", name, "'");
  }

  // Each node's parent (-1 for a scene root), checking that children exist
  // and that no node has two parents.
  absl::Status ReadHierarchy();
  // The node's local transform, decoded once.
  absl::StatusOr<Transform> Local(int node);
  absl::Status DecodeMatrix(int node, Transform* out) const;
  absl::Status DecodeTrs(int node, Transform* out) const;
  absl::Status UniformScale(int node, const Eigen::Vector3d& scales,
                            double* out) const;

  const std::string& file_;
  const tinygltf::Model& model_;
  std::vector<int> parent_;
  std::vector<absl::optional<Transform>> local_;
  const bool named_file_;
};

absl::Status GltfReader::ReadHierarchy() {
  const int n = static_cast<int>(model_.nodes.size());
  parent_.assign(n, -1);
  for (int i = 0; i < n; ++i) {
    for (int c : model_.nodes[i].children) {
      if (c < 0 || c >= n) {
        return Error(NodeElement(i),
                     absl::StrCat("child ", c, " is not a node (the file has ",
                                  n, " nodes)"));
      }
      if (c == i) return Error(NodeElement(i), "is its own child");
      if (parent_[c] >= 0) {
        return Error(NodeElement(c),
                     absl::StrCat("is a child of both node ", parent_[c],
                                  " and node ", i, "; glTF nodes form a tree"));
      }
      parent_[c] = i;
    }
  }
  // With one parent per node, a walk up either reaches a scene root or
  // comes back to a node of the same walk.
  enum { kUnseen, kOnPath, kDone };
  std::vector<int> state(n, kUnseen);
  std::vector<int> path;
  for (int start = 0; start < n; ++start) {
    path.clear();
    int node = start;
    while (node >= 0 && state[node] == kUnseen) {
      state[node] = kOnPath;
      path.push_back(node);
      node = parent_[node];
    }
    if (node >= 0 && state[node] == kOnPath) {
      return Error(NodeElement(node),
                   "is its own ancestor; glTF nodes form a tree");
    }
    for (int p : path) state[p] = kDone;
  }
  return absl::OkStatus();
}

absl::Status GltfReader::UniformScale(int node, const Eigen::Vector3d& scales,
                                      double* out) const {
  if (!scales.allFinite() || scales.minCoeff() <= 0.0) {
    return Error(NodeElement(node),
                 absl::StrCat("scale [", absl::StrJoin(scales, ", "),
                              "] is not positive (mirroring and collapsed "
                              "axes are not supported)"));
  }
  if (scales.maxCoeff() - scales.minCoeff() >
      kUniformScaleTolerance * scales.maxCoeff()) {
    return Error(NodeElement(node),
                 absl::StrCat("scale [", absl::StrJoin(scales, ", "),
                              "] is not uniform; Reach supports uniform "
                              "scale only"));
  }
  *out = scales.mean();
  return absl::OkStatus();
}

// node.matrix, column-major: M = [A t; 0 1] with A = R * S. The scales are
// A's column lengths; A / scale must then be a rotation (no shear).
absl::Status GltfReader::DecodeMatrix(int node, Transform* out) const {
  const std::vector<double>& m = model_.nodes[node].matrix;
  if (m.size() != 16) {
    return Error(NodeElement(node),
                 absl::StrCat("matrix has ", m.size(), " numbers, not 16"));
  }
  const Eigen::Matrix4d matrix = Eigen::Map<const Eigen::Matrix4d>(m.data());
  if (!matrix.allFinite() ||
      (matrix.row(3) - Eigen::RowVector4d(0, 0, 0, 1)).cwiseAbs().maxCoeff() >
          1e-9) {
    return Error(NodeElement(node),
                 "matrix is not an affine transform (last row must be 0 0 0 "
                 "1)");
  }
  const Eigen::Matrix3d a = matrix.topLeftCorner<3, 3>();
  if (a.determinant() <= 0.0) {
    return Error(NodeElement(node),
                 "matrix mirrors or collapses space (determinant <= 0); "
                 "Reach supports rotation and uniform scale only");
  }
  double scale = 1.0;
  if (auto s = UniformScale(node, a.colwise().norm().transpose(), &scale);
      !s.ok()) {
    return s;
  }
  const Eigen::Matrix3d r = a / scale;
  if ((r.transpose() * r - Eigen::Matrix3d::Identity()).cwiseAbs().maxCoeff() >
      1e-5) {
    return Error(NodeElement(node),
                 "matrix has shear; Reach supports rotation and uniform "
                 "scale only");
  }
  out->translation = matrix.topRightCorner<3, 1>();
  out->rotation = Eigen::Quaterniond(r).normalized();
  out->scale = scale;
  return absl::OkStatus();
}

absl::Status GltfReader::DecodeTrs(int node, Transform* out) const {
  const tinygltf::Node& n = model_.nodes[node];
  if (!n.translation.empty()) {
    if (n.translation.size() != 3) {
      return Error(NodeElement(node),
                   absl::StrCat("translation has ", n.translation.size(),
                                " numbers, not 3"));
    }
    out->translation = Eigen::Vector3d(n.translation.data());
    if (!out->translation.allFinite()) {
      return Error(NodeElement(node), "translation is not finite");
    }
  }
  if (!n.rotation.empty()) {
    if (n.rotation.size() != 4) {
      return Error(
          NodeElement(node),
          absl::StrCat("rotation has ", n.rotation.size(), " numbers, not 4"));
    }
    // glTF stores quaternions as (x, y, z, w); Eigen's constructor takes w
    // first. Exporters write floats, so the norm is 1 only to ~1e-7.
    const Eigen::Quaterniond q(n.rotation[3], n.rotation[0], n.rotation[1],
                               n.rotation[2]);
    if (!q.coeffs().allFinite() || std::abs(q.norm() - 1.0) > 1e-3) {
      return Error(NodeElement(node),
                   absl::StrCat("rotation [", absl::StrJoin(n.rotation, ", "),
                                "] is not a unit quaternion"));
    }
    out->rotation = q.normalized();
  }
  if (!n.scale.empty()) {
    if (n.scale.size() != 3) {
      return Error(NodeElement(node), absl::StrCat("scale has ", n.scale.size(),
                                                   " numbers, not 3"));
    }
    if (auto s =
            UniformScale(node, Eigen::Vector3d(n.scale.data()), &out->scale);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Transform> GltfReader::Local(int node) {
  if (!local_[node].has_value()) {
    Transform t;
    const absl::Status s = model_.nodes[node].matrix.empty()
                               ? DecodeTrs(node, &t)
                               : DecodeMatrix(node, &t);
    if (!s.ok()) return s;
    local_[node] = t;
  }
  return *local_[node];
}

absl::StatusOr<ImportedSkeleton> GltfReader::Read(int skin_index,
                                                  GltfJointNodes* nodes) {
  const int num_skins = static_cast<int>(model_.skins.size());
  if (num_skins == 0) {
    return Error("", "has no skins; a skeleton is imported from a skin");
  }
  if (skin_index < 0 || skin_index >= num_skins) {
    return Error(absl::StrCat("skin ", skin_index),
                 absl::StrCat("does not exist: the file has ", num_skins,
                              num_skins == 1 ? " skin" : " skins"));
  }
  const tinygltf::Skin& skin = model_.skins[skin_index];
  const std::string skin_element =
      skin.name.empty()
          ? absl::StrCat("skin ", skin_index)
          : absl::StrCat("skin ", skin_index, " '", skin.name, "'");
  const int num_nodes = static_cast<int>(model_.nodes.size());
  const int n = static_cast<int>(skin.joints.size());
  if (n == 0) return Error(skin_element, "has no joints");
  if (auto s = ReadHierarchy(); !s.ok()) return s;

  // Skin position of each joint node, -1 for other nodes.
  std::vector<int> joint_of_node(num_nodes, -1);
  for (int k = 0; k < n; ++k) {
    const int node = skin.joints[k];
    if (node < 0 || node >= num_nodes) {
      return Error(skin_element, absl::StrCat("joints[", k, "] = ", node,
                                              " is not a node (the file has ",
                                              num_nodes, " nodes)"));
    }
    if (joint_of_node[node] >= 0) {
      return Error(skin_element,
                   absl::StrCat("joints[", k, "] repeats node ", node,
                                " (joints[", joint_of_node[node], "])"));
    }
    joint_of_node[node] = k;
  }

  // Each joint's parent is its nearest ancestor that is a joint of the skin;
  // the nodes in between (all of its ancestors, for a root) are folded into
  // its rest transform: rest = local(a_top) * ... * local(a_bottom) *
  // local(joint). Each of those nodes is folded once, for the first joint
  // below it (`folded`: the product from below its nearest joint ancestor
  // down to it, and that ancestor): many joints under one long chain of
  // other nodes (16,000 nodes fit the limits) cost the chain once, not
  // once per joint. A product starts from its first factor, not from the
  // identity: 0 + -0 is 0, and rest translations would lose the signs of
  // their zeros (the rests stay bit for bit those of the unfolded walk on
  // tests/data's files).
  struct Folded {
    bool done = false;
    Transform above;  // local(a_top) * ... * local(node).
    int joint = -1;   // Skin position of the nearest joint ancestor.
  };
  std::vector<Folded> folded(num_nodes);
  std::vector<int> path;  // Non-joint ancestors not folded yet, bottom up.
  std::vector<int> joint_parent(n, -1);
  std::vector<Transform> rest(n);
  std::vector<Transform> above_joint(n);  // For `nodes`.
  for (int k = 0; k < n; ++k) {
    const int node = skin.joints[k];
    absl::StatusOr<Transform> t = Local(node);
    if (!t.ok()) return t.status();
    path.clear();
    int a = parent_[node];
    while (a >= 0 && joint_of_node[a] < 0 && !folded[a].done) {
      path.push_back(a);
      a = parent_[a];
    }
    // `a` is a joint, a folded node or above the root.
    const Folded* above = a >= 0 && joint_of_node[a] < 0 ? &folded[a] : nullptr;
    const int joint = a >= 0 && joint_of_node[a] >= 0 ? joint_of_node[a]
                      : above != nullptr              ? above->joint
                                                      : -1;
    for (auto it = path.rbegin(); it != path.rend(); ++it) {
      absl::StatusOr<Transform> local = Local(*it);
      if (!local.ok()) return local.status();
      folded[*it] = {true, above != nullptr ? above->above * *local : *local,
                     joint};
      above = &folded[*it];
    }
    joint_parent[k] = joint;
    if (above != nullptr) {
      *t = above->above * *t;
      above_joint[k] = above->above;
    }
    t->rotation.normalize();
    rest[k] = *t;
  }

  // Parent-before-child order that keeps the skin's order where it already
  // is one: each joint is placed after the chain of its unplaced ancestors.
  std::vector<int> order;  // Skin positions.
  order.reserve(n);
  std::vector<int> def_index(n, -1);
  std::vector<int> pending;
  for (int k = 0; k < n; ++k) {
    for (int j = k; j >= 0 && def_index[j] < 0; j = joint_parent[j]) {
      pending.push_back(j);
    }
    for (auto it = pending.rbegin(); it != pending.rend(); ++it) {
      def_index[*it] = static_cast<int>(order.size());
      order.push_back(*it);
    }
    pending.clear();
  }

  // Joint names: node names, first come first served; unnamed joints and
  // later duplicates are named node_<index> (made unique if a node already
  // has that name).
  std::vector<std::string> names(n);
  absl::flat_hash_set<std::string> taken;
  for (int k : order) {
    const std::string& name = model_.nodes[skin.joints[k]].name;
    if (!name.empty() && taken.insert(name).second) names[k] = name;
  }
  for (int k : order) {
    if (!names[k].empty()) continue;
    const std::string base = absl::StrCat("node_", skin.joints[k]);
    std::string name = base;
    for (int suffix = 2; !taken.insert(name).second; ++suffix) {
      name = absl::StrCat(base, "_", suffix);
    }
    names[k] = std::move(name);
  }

  ImportedSkeleton out;
  out.name = skin.name;
  if (GenericSkinName(skin.name) && (named_file_ || skin.name.empty())) {
    out.name = FileStem(file_);
  }
  out.def.joints.reserve(n);
  for (int k : order) {
    JointDef& joint = out.def.joints.emplace_back();
    joint.name = names[k];
    joint.parent = joint_parent[k] >= 0 ? def_index[joint_parent[k]] : -1;
    joint.rest = rest[k];
    joint.type = JointType::kBall;
  }
  out.def.chains = GuessLimbChains(out.def);
  if (nodes != nullptr) {
    nodes->node.clear();
    nodes->above.clear();
    for (int k : order) {
      nodes->node.push_back(skin.joints[k]);
      nodes->above.push_back(above_joint[k]);
    }
  }
  if (auto s =
          CheckCreatable(file_, absl::StrCat("skin ", skin_index), out.def);
      !s.ok()) {
    return s;
  }
  return out;
}

// The scan of a glTF's JSON against ImportLimits, before tinygltf parses it:
// one pass that keeps a frame per open container (at most max_json_depth)
// and nothing per element, so a file over a limit costs that pass and no
// more. It reads tokens without validating the grammar: where it cannot go
// on (a stray bracket, an unterminated string) it stops, and nlohmann::json,
// reading the same bytes in order, refuses the text at or before that
// byte, so everything the parser builds has been counted. Keys are compared
// unescaped, as the parser will see them ("n\u006fdes" is "nodes").
class JsonScan {
 public:
  // `offset` is where `json` starts in the file (20 in a .glb), for the
  // byte positions in errors.
  JsonScan(const std::string& file, size_t offset, const ImportLimits& limits)
      : file_(file), offset_(offset), limits_(limits) {}

  absl::Status Run(absl::string_view json);

 private:
  // The keys the scan acts on; others are kOther.
  enum class Key { kOther, kUri, kByteLength };

  struct Frame {
    bool object = false;
    Key key = Key::kOther;  // Objects: the member being read.
    // An array member of the root object: the most elements it may have,
    // and how many it has so far; -1 for every other container.
    int64_t max_elements = -1;
    int64_t elements = 0;
    bool buffers = false;  // The root's "buffers".
    bool buffer = false;   // An element of "buffers".
  };

  // The longest key the scan needs to recognize or quote ("bufferViews",
  // "extensionsRequired"), unescaped; longer keys are quoted cut short.
  static constexpr size_t kMaxKeyChars = 24;

  absl::Status Error(size_t at, absl::string_view what,
                     absl::string_view limit) const {
    return ImportError(
        file_, 0, "",
        absl::StrCat(what, " at byte ", offset_ + at, " (", limit, ")"));
  }

  // A value starts at `at`: counted, and as an element of its array.
  absl::Status Value(size_t at);
  absl::Status Open(bool object, size_t at);
  absl::Status Close(size_t at);
  void SetKey(absl::string_view escaped);
  absl::Status String(absl::string_view escaped, size_t at);
  void Scalar(absl::string_view token);
  absl::Status AddBufferBytes(double bytes, size_t at);

  const std::string& file_;
  const size_t offset_;
  const ImportLimits& limits_;
  std::vector<Frame> stack_;
  int64_t values_ = 0;
  // The root's member being read: its key, unescaped and cut to
  // kMaxKeyChars, to name its array in errors.
  std::array<char, kMaxKeyChars> root_key_{};
  size_t root_key_size_ = 0;
  bool root_key_cut_ = false;
  // Bytes buffers and images will take (a double: byteLength may be any
  // number, and only its comparison with the limit matters).
  double buffer_bytes_ = 0;
  // The "buffers" element being read: its largest byteLength, and whether
  // its last uri (the one the parser keeps) is a data: URI, whose decoded
  // size is counted instead.
  double buffer_length_ = 0;
  bool buffer_data_uri_ = false;
};

// JSON's structural characters and whitespace end a number or a literal.
bool EndsToken(char c) {
  switch (c) {
    case '{':
    case '}':
    case '[':
    case ']':
    case ',':
    case ':':
    case '"':
    case ' ':
    case '\t':
    case '\n':
    case '\r':
      return true;
    default:
      return false;
  }
}

// `escaped` (a JSON string's text between its quotes) unescaped into `out`,
// at most out.size() characters; *size is how many, and the result false
// when it did not fit. Escapes of characters beyond ASCII (\u0080 and up)
// become '?': no key the scan acts on has them.
bool Unescape(absl::string_view escaped, absl::Span<char> out, size_t* size) {
  size_t n = 0;
  for (size_t i = 0; i < escaped.size(); ++i) {
    if (n == out.size()) {
      *size = n;
      return false;
    }
    char c = escaped[i];
    if (c == '\\' && i + 1 < escaped.size()) {
      c = escaped[++i];
      switch (c) {
        case 'b':
          c = '\b';
          break;
        case 'f':
          c = '\f';
          break;
        case 'n':
          c = '\n';
          break;
        case 'r':
          c = '\r';
          break;
        case 't':
          c = '\t';
          break;
        case 'u': {
          uint32_t code = 0;
          if (i + 4 < escaped.size() &&
              absl::SimpleHexAtoi(escaped.substr(i + 1, 4), &code)) {
            i += 4;
          }
          c = code < 0x80 ? static_cast<char>(code) : '?';
          break;
        }
        default:
          break;  // \" \\ \/ stand for themselves.
      }
    }
    out[n++] = c;
  }
  *size = n;
  return true;
}

absl::Status JsonScan::Run(absl::string_view json) {
  stack_.reserve(std::clamp(limits_.max_json_depth, 0, 256));
  const size_t n = json.size();
  size_t i = 0;
  while (i < n) {
    const char c = json[i];
    switch (c) {
      case ' ':
      case '\t':
      case '\n':
      case '\r':
      case ',':
      case ':':
        ++i;
        break;
      case '{':
      case '[':
        if (auto s = Open(c == '{', i); !s.ok()) return s;
        ++i;
        break;
      case '}':
      case ']':
        if (stack_.empty()) return absl::OkStatus();  // The parser stops here.
        if (auto s = Close(i); !s.ok()) return s;
        ++i;
        break;
      case '"': {
        size_t end = i + 1;
        while (end < n && json[end] != '"') end += json[end] == '\\' ? 2 : 1;
        if (end >= n)
          return absl::OkStatus();  // Unterminated: so is the parse.
        const absl::string_view text = json.substr(i + 1, end - i - 1);
        size_t next = end + 1;
        while (next < n && absl::ascii_isspace(json[next])) ++next;
        if (!stack_.empty() && stack_.back().object && next < n &&
            json[next] == ':') {
          SetKey(text);
        } else if (auto s = String(text, i); !s.ok()) {
          return s;
        }
        i = end + 1;
        break;
      }
      default: {
        size_t end = i + 1;
        while (end < n && !EndsToken(json[end])) ++end;
        if (auto s = Value(i); !s.ok()) return s;
        Scalar(json.substr(i, end - i));
        i = end;
        break;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status JsonScan::Value(size_t at) {
  if (++values_ > limits_.max_json_values) {
    return Error(
        at,
        absl::StrCat("JSON has more than ", limits_.max_json_values, " values"),
        "max_json_values");
  }
  if (stack_.empty()) return absl::OkStatus();
  Frame& parent = stack_.back();
  if (parent.max_elements >= 0 && ++parent.elements > parent.max_elements) {
    const absl::string_view name(root_key_.data(), root_key_size_);
    return Error(
        at,
        absl::StrCat("'", name, root_key_cut_ ? "...' " : "' ",
                     "has more than ", parent.max_elements, " elements"),
        name == "nodes" ? "max_gltf_nodes" : "max_gltf_array_elements");
  }
  return absl::OkStatus();
}

absl::Status JsonScan::Open(bool object, size_t at) {
  if (auto s = Value(at); !s.ok()) return s;
  if (static_cast<int64_t>(stack_.size()) >= limits_.max_json_depth) {
    return Error(at,
                 absl::StrCat("JSON nested deeper than ",
                              limits_.max_json_depth, " levels"),
                 "max_json_depth");
  }
  Frame frame;
  frame.object = object;
  if (stack_.size() == 1 && stack_[0].object && !object) {
    const absl::string_view name(root_key_.data(), root_key_size_);
    const bool cut = root_key_cut_;
    frame.max_elements = !cut && name == "nodes"
                             ? limits_.max_gltf_nodes
                             : limits_.max_gltf_array_elements;
    frame.buffers = !cut && name == "buffers";
  } else if (stack_.size() == 2 && stack_[1].buffers && object) {
    frame.buffer = true;
    buffer_length_ = 0;
    buffer_data_uri_ = false;
  }
  stack_.push_back(frame);
  return absl::OkStatus();
}

absl::Status JsonScan::Close(size_t at) {
  const bool buffer = stack_.back().buffer;
  stack_.pop_back();
  // A buffer with a data: URI was counted by its decoded size; any other
  // takes byteLength bytes (a copy of the BIN chunk, or an external file).
  if (buffer && !buffer_data_uri_) return AddBufferBytes(buffer_length_, at);
  return absl::OkStatus();
}

void JsonScan::SetKey(absl::string_view escaped) {
  std::array<char, kMaxKeyChars> key;
  size_t size = 0;
  const bool whole = Unescape(escaped, absl::MakeSpan(key), &size);
  const absl::string_view name(key.data(), size);
  Frame& object = stack_.back();
  object.key = !whole                 ? Key::kOther
               : name == "uri"        ? Key::kUri
               : name == "byteLength" ? Key::kByteLength
                                      : Key::kOther;
  if (stack_.size() == 1) {
    root_key_ = key;
    root_key_size_ = size;
    root_key_cut_ = !whole;
  }
}

absl::Status JsonScan::String(absl::string_view escaped, size_t at) {
  if (auto s = Value(at); !s.ok()) return s;
  if (stack_.empty()) return absl::OkStatus();
  Frame& object = stack_.back();
  if (!object.object || object.key != Key::kUri) return absl::OkStatus();
  // tinygltf decodes a buffer's or an image's data: URI (base64: 4
  // characters to 3 bytes, fewer when escaped) and keeps the bytes. Any
  // object's uri counts; tinygltf reads only those two.
  std::array<char, 5> start;
  size_t size = 0;
  Unescape(escaped, absl::MakeSpan(start), &size);
  const bool data = absl::string_view(start.data(), size) == "data:";
  if (object.buffer) buffer_data_uri_ = data;
  if (!data) return absl::OkStatus();
  return AddBufferBytes(static_cast<double>(escaped.size()) * 3 / 4, at);
}

void JsonScan::Scalar(absl::string_view token) {
  if (stack_.empty()) return;
  const Frame& object = stack_.back();
  double length = 0;
  if (object.buffer && object.key == Key::kByteLength &&
      absl::SimpleAtod(token, &length) && length > buffer_length_) {
    buffer_length_ = length;
  }
}

absl::Status JsonScan::AddBufferBytes(double bytes, size_t at) {
  buffer_bytes_ += bytes;
  if (buffer_bytes_ > static_cast<double>(limits_.max_gltf_buffer_bytes)) {
    return Error(at,
                 absl::StrCat("buffers and data: URIs take more than ",
                              limits_.max_gltf_buffer_bytes, " bytes"),
                 "max_gltf_buffer_bytes");
  }
  return absl::OkStatus();
}

// The little-endian uint32 at `at` of a .glb (tinygltf reads them so).
uint32_t GlbWord(absl::string_view glb, size_t at) {
  uint32_t word = 0;
  for (int b = 3; b >= 0; --b) {
    word = (word << 8) | static_cast<unsigned char>(glb[at + b]);
  }
  return word;
}

// Checks a glTF file's JSON against `limits` before tinygltf parses it. A
// .glb is read as tinygltf reads it (LoadBinaryFromMemory): a 20-byte
// header whose last two words are the JSON chunk's length and type, the
// JSON, then an optional BIN chunk. A header tinygltf refuses before it
// parses any JSON is left to it.
absl::Status CheckLimits(absl::string_view contents, const std::string& file,
                         bool binary, const ImportLimits& limits) {
  if (static_cast<uint64_t>(contents.size()) >
      static_cast<uint64_t>(limits.max_file_bytes)) {
    return ImportError(
        file, 0, "",
        absl::StrCat(contents.size(), " bytes, over the limit of ",
                     limits.max_file_bytes, " (max_file_bytes)"));
  }
  absl::string_view json = contents;
  size_t offset = 0;
  if (binary) {
    constexpr size_t kHeaderBytes = 20;
    if (contents.size() < kHeaderBytes || !absl::StartsWith(contents, "glTF")) {
      return absl::OkStatus();
    }
    const uint64_t length = GlbWord(contents, 8);
    const uint64_t json_end = kHeaderBytes + uint64_t{GlbWord(contents, 12)};
    if (json_end > contents.size()) return absl::OkStatus();
    // tinygltf checks that the BIN chunk's header and data fit the length
    // in the file's header, but not the 8 bytes of the chunk's header
    // before its data: a chunk ending up to 8 bytes past the file would be
    // copied from memory beyond it.
    if (length <= contents.size() && json_end + 12 <= length) {
      const uint64_t bin_length = GlbWord(contents, json_end);
      if (json_end + 8 + bin_length > length) {
        return ImportError(
            file, 0, "",
            absl::StrCat("BIN chunk of ", bin_length, " bytes at byte ",
                         json_end, " runs past the file's length of ", length,
                         " bytes"));
      }
    }
    offset = kHeaderBytes;
    json = contents.substr(kHeaderBytes, json_end - kHeaderBytes);
  }
  if (static_cast<uint64_t>(json.size()) >
      static_cast<uint64_t>(limits.max_gltf_json_bytes)) {
    return ImportError(
        file, 0, "",
        absl::StrCat("JSON of ", json.size(), " bytes is over the limit of ",
                     limits.max_gltf_json_bytes, " (max_gltf_json_bytes)"));
  }
  return JsonScan(file, offset, limits).Run(json);
}

// "dir/Fox.GLB" -> "glb".
std::string Extension(absl::string_view path) {
  const size_t slash = path.rfind('/');
  if (slash != absl::string_view::npos) path.remove_prefix(slash + 1);
  const size_t dot = path.rfind('.');
  if (dot == absl::string_view::npos) return "";
  return absl::AsciiStrToLower(path.substr(dot + 1));
}

// The skeleton of a loader's result: its error (with the JSON line for
// .gltf) when it did not load, else skin `skin_index` of `model`.
absl::StatusOr<ImportedSkeleton> ReadLoaded(
    bool loaded, const tinygltf::Model& model, const std::string& err,
    const std::string& warn, const std::string& file, bool binary,
    int skin_index, bool named_file, GltfJointNodes* nodes) {
  if (!loaded) {
    std::string message = absl::StrCat("cannot load glTF: ", OneLine(err));
    if (!warn.empty()) absl::StrAppend(&message, " (", OneLine(warn), ")");
    const int line = binary ? 0 : JsonErrorLine(err);
    return ImportError(file, line, "", message);
  }
  return GltfReader(file, model, named_file).Read(skin_index, nodes);
}

absl::Status UnknownExtension(const std::string& file) {
  return ImportError(file, 0, "",
                     "unknown extension; a glTF file ends in .gltf (JSON) "
                     "or .glb (binary)");
}

// File system callbacks for content in memory: every file is missing, so
// tinygltf reports an external buffer as not found, naming its uri.
bool NoFileExists(const std::string&, void*) { return false; }
std::string SamePath(const std::string& path, void*) { return path; }
bool NoReadWholeFile(std::vector<unsigned char>*, std::string* err,
                     const std::string& path, void*) {
  if (err != nullptr) {
    absl::StrAppend(err, "'", path, "' is an external file; only embedded ",
                    "buffers are read from memory\n");
  }
  return false;
}
bool NoWriteWholeFile(std::string*, const std::string&,
                      const std::vector<unsigned char>&, void*) {
  return false;
}

// The file system callback for a file on disk: its external buffers and
// images are read, all together at most max_gltf_buffer_bytes (`budget`,
// the bytes left). The scan counted a buffer's byteLength, but an image's
// file and the file itself (which tinygltf reads whole before it compares
// its size with byteLength) could be anything, /dev/zero included.
bool BoundedReadWholeFile(std::vector<unsigned char>* out, std::string* err,
                          const std::string& path, void* budget) {
  int64_t& left = *static_cast<int64_t*>(budget);
  std::string contents;
  const absl::Status read =
      ReadFile(path, &contents, left,
               "max_gltf_buffer_bytes, less what other external files took");
  if (!read.ok()) {
    if (err != nullptr) absl::StrAppend(err, read.message(), "\n");
    return false;
  }
  left -= static_cast<int64_t>(contents.size());
  out->assign(contents.begin(), contents.end());
  return true;
}

// Loads a .gltf or .glb (`binary`) in memory, within `limits`; `base_dir`
// is where external files are, or null to read none.
absl::StatusOr<ImportedSkeleton> Load(absl::string_view contents,
                                      const std::string& file, bool binary,
                                      const std::string* base_dir,
                                      int skin_index,
                                      const ImportLimits& limits,
                                      bool named_file, GltfJointNodes* nodes) {
  if (contents.size() > std::numeric_limits<unsigned int>::max()) {
    return ImportError(file, 0, "", "larger than 4 GiB");
  }
  if (absl::Status s = CheckLimits(contents, file, binary, limits); !s.ok()) {
    return s;
  }
  tinygltf::TinyGLTF loader;
  loader.SetImageLoader(&SkipImage, nullptr);
  int64_t external_budget = limits.max_gltf_buffer_bytes;
  if (base_dir == nullptr) {
    loader.SetFsCallbacks({&NoFileExists, &SamePath, &NoReadWholeFile,
                           &NoWriteWholeFile, nullptr});
  } else {
    loader.SetFsCallbacks({&tinygltf::FileExists, &tinygltf::ExpandFilePath,
                           &BoundedReadWholeFile, &NoWriteWholeFile,
                           &external_budget});
  }
  tinygltf::Model model;
  std::string err, warn;
  const auto length = static_cast<unsigned int>(contents.size());
  const std::string no_dir;
  const std::string& dir = base_dir == nullptr ? no_dir : *base_dir;
  const bool loaded =
      binary ? loader.LoadBinaryFromMemory(
                   &model, &err, &warn,
                   reinterpret_cast<const unsigned char*>(contents.data()),
                   length, dir)
             : loader.LoadASCIIFromString(&model, &err, &warn, contents.data(),
                                          length, dir);
  return ReadLoaded(loaded, model, err, warn, file, binary, skin_index,
                    named_file, nodes);
}

}  // namespace

absl::StatusOr<ImportedSkeleton> ImportGltf(const std::string& path,
                                            int skin_index,
                                            const ImportLimits& limits,
                                            GltfJointNodes* nodes) {
  const std::string extension = Extension(path);
  if (extension != "gltf" && extension != "glb") return UnknownExtension(path);
  std::string contents;
  if (absl::Status s = ReadFile(path, &contents, limits.max_file_bytes);
      !s.ok()) {
    return s;
  }
  // External files are looked for beside the file, as tinygltf's own
  // LoadASCIIFromFile does (its GetBaseDir).
  const size_t slash = path.find_last_of("/\\");
  const std::string base_dir =
      slash == std::string::npos ? "" : path.substr(0, slash);
  return Load(contents, path, extension == "glb", &base_dir, skin_index, limits,
              /*named_file=*/true, nodes);
}

absl::StatusOr<ImportedSkeleton> ParseGltf(
    absl::string_view contents, const std::string& file, int skin_index,
    const ImportLimits& limits, bool named_file, GltfJointNodes* nodes) {
  const std::string extension = Extension(file);
  if (extension != "gltf" && extension != "glb") return UnknownExtension(file);
  return Load(contents, file, extension == "glb", /*base_dir=*/nullptr,
              skin_index, limits, named_file, nodes);
}

}  // namespace reach::import
