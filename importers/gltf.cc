// glTF 2.0 skin -> SkeletonDef. The format: the Khronos glTF 2.0
// specification, sections 3.5 (nodes and hierarchy: local transforms are
// TRS or a column-major matrix, T * R * S) and 3.7.3 (skins: `joints` are
// node indices).
#include "importers/gltf.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
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

// Per-axis scales that agree to this relative tolerance count as uniform:
// exporters write float scales such as (1, 1.0000001, 0.99999994).
constexpr double kUniformScaleTolerance = 1e-6;

// Skeletons need no pixels: images are left undecoded.
bool SkipImage(tinygltf::Image*, const int, std::string*, std::string*, int,
               int, const unsigned char*, int, void*) {
  return true;
}

// tinygltf's messages are newline-terminated lines; one line for ours.
std::string OneLine(absl::string_view text) {
  std::vector<absl::string_view> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    line = absl::StripAsciiWhitespace(line);
    if (!line.empty()) lines.push_back(line);
  }
  return absl::StrJoin(lines, "; ");
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
  GltfReader(const std::string& file, const tinygltf::Model& model)
      : file_(file), model_(model), local_(model.nodes.size()) {}

  absl::StatusOr<ImportedSkeleton> Read(int skin_index);

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

absl::StatusOr<ImportedSkeleton> GltfReader::Read(int skin_index) {
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
  // local(joint).
  std::vector<int> joint_parent(n, -1);
  std::vector<Transform> rest(n);
  for (int k = 0; k < n; ++k) {
    const int node = skin.joints[k];
    absl::StatusOr<Transform> t = Local(node);
    if (!t.ok()) return t.status();
    for (int a = parent_[node]; a >= 0; a = parent_[a]) {
      if (joint_of_node[a] >= 0) {
        joint_parent[k] = joint_of_node[a];
        break;
      }
      absl::StatusOr<Transform> ancestor = Local(a);
      if (!ancestor.ok()) return ancestor.status();
      *t = *ancestor * *t;
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
  out.name = skin.name.empty() ? FileStem(file_) : skin.name;
  out.def.joints.reserve(n);
  for (int k : order) {
    JointDef& joint = out.def.joints.emplace_back();
    joint.name = names[k];
    joint.parent = joint_parent[k] >= 0 ? def_index[joint_parent[k]] : -1;
    joint.rest = rest[k];
    joint.type = JointType::kBall;
  }
  out.def.chains = GuessLimbChains(out.def);
  if (auto s = CheckCreatable(file_, absl::StrCat("skin ", skin_index),
                              out.def);
      !s.ok()) {
    return s;
  }
  return out;
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
absl::StatusOr<ImportedSkeleton> ReadLoaded(bool loaded,
                                            const tinygltf::Model& model,
                                            const std::string& err,
                                            const std::string& warn,
                                            const std::string& file,
                                            bool binary, int skin_index) {
  if (!loaded) {
    std::string message = absl::StrCat("cannot load glTF: ", OneLine(err));
    if (!warn.empty()) absl::StrAppend(&message, " (", OneLine(warn), ")");
    const int line = binary ? 0 : JsonErrorLine(err);
    return ImportError(file, line, "", message);
  }
  return GltfReader(file, model).Read(skin_index);
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

}  // namespace

absl::StatusOr<ImportedSkeleton> ImportGltf(const std::string& path,
                                            int skin_index) {
  const std::string extension = Extension(path);
  if (extension != "gltf" && extension != "glb") return UnknownExtension(path);
  // tinygltf reports a missing file as a read error like any other; look
  // first so that it is NotFound, as from ReadFile.
  if (std::ifstream probe(path, std::ios::binary); !probe) {
    const int error = errno;
    const std::string message =
        absl::StrCat(path, ": cannot open: ", std::strerror(error));
    return error == ENOENT ? absl::NotFoundError(message)
                           : absl::InvalidArgumentError(message);
  }

  tinygltf::TinyGLTF loader;
  loader.SetImageLoader(&SkipImage, nullptr);
  tinygltf::Model model;
  std::string err, warn;
  const bool binary = extension == "glb";
  const bool loaded = binary
                          ? loader.LoadBinaryFromFile(&model, &err, &warn, path)
                          : loader.LoadASCIIFromFile(&model, &err, &warn, path);
  return ReadLoaded(loaded, model, err, warn, path, binary, skin_index);
}

absl::StatusOr<ImportedSkeleton> ParseGltf(absl::string_view contents,
                                           const std::string& file,
                                           int skin_index) {
  const std::string extension = Extension(file);
  if (extension != "gltf" && extension != "glb") return UnknownExtension(file);
  if (contents.size() > std::numeric_limits<unsigned int>::max()) {
    return ImportError(file, 0, "", "larger than 4 GiB");
  }
  tinygltf::TinyGLTF loader;
  loader.SetImageLoader(&SkipImage, nullptr);
  loader.SetFsCallbacks({&NoFileExists, &SamePath, &NoReadWholeFile,
                         &NoWriteWholeFile, nullptr});
  tinygltf::Model model;
  std::string err, warn;
  const bool binary = extension == "glb";
  const auto length = static_cast<unsigned int>(contents.size());
  const bool loaded =
      binary ? loader.LoadBinaryFromMemory(
                   &model, &err, &warn,
                   reinterpret_cast<const unsigned char*>(contents.data()),
                   length)
             : loader.LoadASCIIFromString(&model, &err, &warn, contents.data(),
                                          length, /*base_dir=*/"");
  return ReadLoaded(loaded, model, err, warn, file, binary, skin_index);
}

}  // namespace reach::import
