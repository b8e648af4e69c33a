// URDF -> SkeletonDef. The format: http://wiki.ros.org/urdf/XML (robot,
// link, joint); only the kinematic tree is read (links' inertial, visual and
// collision elements, transmissions and gazebo tags are ignored).
#include "importers/urdf.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tinyxml2.h"

namespace reach::import {
namespace {

using tinyxml2::XMLElement;

constexpr double kTwoPi = 2.0 * M_PI;

// One <joint> as written, before the tree is ordered.
struct UrdfJoint {
  std::string name;
  int line = 0;
  std::string parent_link;
  std::string child_link;
  JointDef def;  // name, rest, type, axis and limits; parent set later.
};

struct UrdfLink {
  std::string name;
  int line = 0;
};

std::string JointElement(absl::string_view name) {
  return absl::StrCat("joint '", name, "'");
}

std::string LinkElement(absl::string_view name) {
  return absl::StrCat("link '", name, "'");
}

// Parses exactly `count` whitespace-separated finite numbers. Strict: "1 2"
// for three numbers, "1.0 abc", "1,2,3", "nan" and "inf" all fail.
bool ParseNumbers(absl::string_view text, int count, double* out) {
  int n = 0;
  for (absl::string_view token :
       absl::StrSplit(text, absl::ByAnyChar(" \t\r\n"), absl::SkipEmpty())) {
    if (n == count) return false;
    if (!absl::SimpleAtod(token, &out[n]) || !std::isfinite(out[n])) {
      return false;
    }
    ++n;
  }
  return n == count;
}

// Reads the file's elements; `file` only names the source in errors.
class UrdfReader {
 public:
  explicit UrdfReader(absl::string_view file) : file_(file) {}

  absl::StatusOr<ImportedSkeleton> Read(absl::string_view text);

 private:
  absl::Status Error(int line, absl::string_view element,
                     absl::string_view message) const {
    return ImportError(file_, line, element, message);
  }

  // A required, non-empty attribute of `e`.
  absl::Status Attribute(const XMLElement* e, const char* attribute,
                         absl::string_view element, std::string* out) const;
  // An optional attribute of `count` numbers; `out` keeps its value when the
  // attribute is absent.
  absl::Status Numbers(const XMLElement* e, const char* attribute, int count,
                       absl::string_view element, double* out) const;
  absl::Status Vector(const XMLElement* e, const char* attribute,
                      absl::string_view element, Eigen::Vector3d* out) const;

  absl::Status ReadLink(const XMLElement* e);
  absl::Status ReadJoint(const XMLElement* e);
  // The <parent link="..."/> or <child link="..."/> of a joint.
  absl::Status ReadJointLink(const XMLElement* joint, const char* tag,
                             absl::string_view element, std::string* out) const;
  absl::Status ReadLimit(const XMLElement* joint, absl::string_view element,
                         JointDef* def) const;
  absl::Status BuildTree(ImportedSkeleton* out) const;

  std::string file_;
  std::vector<UrdfLink> links_;
  std::vector<UrdfJoint> joints_;
  absl::flat_hash_map<std::string, int> link_index_;
  absl::flat_hash_map<std::string, int> joint_index_;
};

absl::Status UrdfReader::Attribute(const XMLElement* e, const char* attribute,
                                   absl::string_view element,
                                   std::string* out) const {
  const char* value = e->Attribute(attribute);
  if (value == nullptr || *value == '\0') {
    return Error(
        e->GetLineNum(), element,
        absl::StrCat("<", e->Name(), "> has no '", attribute, "' attribute"));
  }
  *out = value;
  return absl::OkStatus();
}

absl::Status UrdfReader::Numbers(const XMLElement* e, const char* attribute,
                                 int count, absl::string_view element,
                                 double* out) const {
  const char* value = e->Attribute(attribute);
  if (value == nullptr) return absl::OkStatus();
  if (!ParseNumbers(value, count, out)) {
    return Error(e->GetLineNum(), element,
                 absl::StrCat("<", e->Name(), " ", attribute, "=\"", value,
                              "\">: expected ", count,
                              count == 1 ? " finite number"
                                         : " finite numbers separated by "
                                           "spaces"));
  }
  return absl::OkStatus();
}

absl::Status UrdfReader::Vector(const XMLElement* e, const char* attribute,
                                absl::string_view element,
                                Eigen::Vector3d* out) const {
  return Numbers(e, attribute, 3, element, out->data());
}

absl::Status UrdfReader::ReadLink(const XMLElement* e) {
  UrdfLink link;
  link.line = e->GetLineNum();
  if (auto s = Attribute(e, "name", "link", &link.name); !s.ok()) return s;
  const auto [it, inserted] =
      link_index_.emplace(link.name, static_cast<int>(links_.size()));
  if (!inserted) {
    return Error(link.line, LinkElement(link.name),
                 absl::StrCat("duplicate link name (first defined at line ",
                              links_[it->second].line, ")"));
  }
  links_.push_back(std::move(link));
  return absl::OkStatus();
}

absl::Status UrdfReader::ReadJointLink(const XMLElement* joint, const char* tag,
                                       absl::string_view element,
                                       std::string* out) const {
  const XMLElement* e = joint->FirstChildElement(tag);
  if (e == nullptr) {
    return Error(joint->GetLineNum(), element,
                 absl::StrCat("missing <", tag, " link=\"...\"/>"));
  }
  return Attribute(e, "link", element, out);
}

absl::Status UrdfReader::ReadLimit(const XMLElement* joint,
                                   absl::string_view element,
                                   JointDef* def) const {
  const XMLElement* limit = joint->FirstChildElement("limit");
  if (limit == nullptr) {
    return Error(joint->GetLineNum(), element,
                 "a revolute joint needs <limit lower=\"...\" upper=\"...\"/> "
                 "(use type 'continuous' for an unlimited one)");
  }
  // The URDF spec makes lower and upper optional with default 0 (and
  // requires effort and velocity, which kinematics does not need).
  double lower = 0.0, upper = 0.0;
  if (auto s = Numbers(limit, "lower", 1, element, &lower); !s.ok()) return s;
  if (auto s = Numbers(limit, "upper", 1, element, &upper); !s.ok()) return s;
  if (lower > upper) {
    return Error(
        limit->GetLineNum(), element,
        absl::StrCat("<limit> lower ", lower, " exceeds upper ", upper));
  }
  if (upper - lower >= kTwoPi) {
    // A range of a full turn or more allows every rotation (UR arms write
    // +-6.28318530718, a hair beyond the +-2pi a Reach hinge range allows).
    return absl::OkStatus();
  }
  if (lower < -kTwoPi || upper > kTwoPi) {
    return Error(limit->GetLineNum(), element,
                 absl::StrCat("<limit> [", lower, ", ", upper,
                              "] reaches beyond [-2pi, 2pi], the range of a "
                              "Reach hinge"));
  }
  def->min_angle_rad = lower;
  def->max_angle_rad = upper;
  return absl::OkStatus();
}

absl::Status UrdfReader::ReadJoint(const XMLElement* e) {
  UrdfJoint joint;
  joint.line = e->GetLineNum();
  if (auto s = Attribute(e, "name", "joint", &joint.name); !s.ok()) return s;
  const std::string element = JointElement(joint.name);
  const auto [it, inserted] =
      joint_index_.emplace(joint.name, static_cast<int>(joints_.size()));
  if (!inserted) {
    return Error(joint.line, element,
                 absl::StrCat("duplicate joint name (first defined at line ",
                              joints_[it->second].line, ")"));
  }

  std::string type;
  if (auto s = Attribute(e, "type", element, &type); !s.ok()) return s;
  JointDef& def = joint.def;
  def.name = joint.name;
  if (type == "revolute" || type == "continuous") {
    def.type = JointType::kHinge;
  } else if (type == "fixed") {
    def.type = JointType::kFixed;
  } else if (type == "prismatic" || type == "floating" || type == "planar") {
    return Error(joint.line, element,
                 absl::StrCat("type '", type,
                              "' is not supported (Reach joints rotate; "
                              "supported: revolute, continuous, fixed)"));
  } else {
    return Error(joint.line, element,
                 absl::StrCat("unknown joint type '", type,
                              "' (URDF types: revolute, continuous, "
                              "prismatic, fixed, floating, planar)"));
  }

  if (auto s = ReadJointLink(e, "parent", element, &joint.parent_link);
      !s.ok()) {
    return s;
  }
  if (auto s = ReadJointLink(e, "child", element, &joint.child_link); !s.ok()) {
    return s;
  }

  // <origin xyz="x y z" rpy="roll pitch yaw"/>: the child link's frame in
  // the parent link's frame. rpy are fixed-axis rotations about X, then Y,
  // then Z, so R = Rz(yaw) * Ry(pitch) * Rx(roll).
  if (const XMLElement* origin = e->FirstChildElement("origin")) {
    Eigen::Vector3d rpy = Eigen::Vector3d::Zero();
    if (auto s = Vector(origin, "xyz", element, &def.rest.translation);
        !s.ok()) {
      return s;
    }
    if (auto s = Vector(origin, "rpy", element, &rpy); !s.ok()) return s;
    def.rest.rotation = Eigen::AngleAxisd(rpy.z(), Eigen::Vector3d::UnitZ()) *
                        Eigen::AngleAxisd(rpy.y(), Eigen::Vector3d::UnitY()) *
                        Eigen::AngleAxisd(rpy.x(), Eigen::Vector3d::UnitX());
  }

  if (def.type == JointType::kHinge) {
    // <axis xyz=...>, in the joint frame (after the origin's rotation), as
    // JointDef::axis is; the URDF default is +X.
    def.axis = Eigen::Vector3d::UnitX();
    if (const XMLElement* axis = e->FirstChildElement("axis")) {
      if (auto s = Vector(axis, "xyz", element, &def.axis); !s.ok()) return s;
      if (def.axis.norm() < 1e-9) {
        return Error(axis->GetLineNum(), element,
                     "<axis xyz> is zero; a revolute or continuous joint "
                     "needs a rotation axis");
      }
    }
    if (type == "revolute") {
      if (auto s = ReadLimit(e, element, &def); !s.ok()) return s;
    }
  }
  // <mimic> joints are imported as ordinary joints: Reach has no coupled
  // joints, so a mimic joint moves independently of the joint it copies.
  joints_.push_back(std::move(joint));
  return absl::OkStatus();
}

// Orders the joints parent-before-child below a fixed root joint named after
// the root link, and adds one chain per leaf joint.
absl::Status UrdfReader::BuildTree(ImportedSkeleton* out) const {
  const int num_links = static_cast<int>(links_.size());
  const int num_joints = static_cast<int>(joints_.size());

  // Each link's parent joint (-1 for none) and child joints.
  std::vector<int> parent_joint(num_links, -1);
  std::vector<std::vector<int>> child_joints(num_links);
  std::vector<int> joint_parent_link(num_joints);
  for (int j = 0; j < num_joints; ++j) {
    const UrdfJoint& joint = joints_[j];
    const std::string element = JointElement(joint.name);
    const auto parent = link_index_.find(joint.parent_link);
    if (parent == link_index_.end()) {
      return Error(
          joint.line, element,
          absl::StrCat("parent link '", joint.parent_link, "' is not defined"));
    }
    const auto child = link_index_.find(joint.child_link);
    if (child == link_index_.end()) {
      return Error(
          joint.line, element,
          absl::StrCat("child link '", joint.child_link, "' is not defined"));
    }
    if (parent->second == child->second) {
      return Error(
          joint.line, element,
          absl::StrCat("connects link '", joint.child_link, "' to itself"));
    }
    int& p = parent_joint[child->second];
    if (p >= 0) {
      return Error(joint.line, element,
                   absl::StrCat("link '", joint.child_link,
                                "' is already the child of joint '",
                                joints_[p].name, "' (line ", joints_[p].line,
                                "); a link has one parent joint"));
    }
    p = j;
    joint_parent_link[j] = parent->second;
    child_joints[parent->second].push_back(j);
  }

  // Cycles: every link has at most one parent joint, so walking up from a
  // link either ends at a root or comes back to a link of the same walk.
  {
    enum { kUnseen, kOnPath, kDone };
    std::vector<int> state(num_links, kUnseen);
    std::vector<int> path;
    for (int start = 0; start < num_links; ++start) {
      path.clear();
      int link = start;
      while (link >= 0 && state[link] == kUnseen) {
        state[link] = kOnPath;
        path.push_back(link);
        link = parent_joint[link] >= 0 ? joint_parent_link[parent_joint[link]]
                                       : -1;
      }
      if (link >= 0 && state[link] == kOnPath) {
        // path[k..] is the cycle, walked child -> parent. Report it parent
        // -> child at its first joint in document order, from that joint's
        // parent link.
        size_t k = 0;
        while (path[k] != link) ++k;
        std::vector<int> cycle(path.rbegin(), path.rend() - k);
        int first_joint = num_joints;
        for (int l : cycle)
          first_joint = std::min(first_joint, parent_joint[l]);
        std::rotate(cycle.begin(),
                    std::find(cycle.begin(), cycle.end(),
                              joint_parent_link[first_joint]),
                    cycle.end());
        cycle.push_back(cycle.front());
        std::vector<std::string> names;
        for (int l : cycle) {
          names.push_back(absl::StrCat("'", links_[l].name, "'"));
        }
        return Error(joints_[first_joint].line,
                     JointElement(joints_[first_joint].name),
                     absl::StrCat("the joints form a cycle through links ",
                                  absl::StrJoin(names, " -> ")));
      }
      for (int l : path) state[l] = kDone;
    }
  }

  // Exactly one root link: without cycles there is at least one (when there
  // are links at all).
  int root = -1;
  for (int l = 0; l < num_links; ++l) {
    if (parent_joint[l] >= 0) continue;
    if (root >= 0) {
      return Error(
          links_[l].line, LinkElement(links_[l].name),
          absl::StrCat("is a second root link (no joint's child), "
                       "besides '",
                       links_[root].name, "' (line ", links_[root].line,
                       "); a robot must be a single tree"));
    }
    root = l;
  }
  if (root < 0) return Error(0, "robot", "has no root link");
  const std::string& root_name = links_[root].name;
  if (const auto it = joint_index_.find(root_name); it != joint_index_.end()) {
    const UrdfJoint& clash = joints_[it->second];
    return Error(clash.line, JointElement(clash.name),
                 "has the name of the root link, which names the "
                 "skeleton's root joint");
  }

  // The fixed root joint, then a depth-first walk in document order, which
  // keeps a serial arm's joints in their natural order.
  SkeletonDef& def = out->def;
  def.joints.reserve(num_joints + 1);
  JointDef& base = def.joints.emplace_back();
  base.name = root_name;
  base.type = JointType::kFixed;
  std::vector<int> def_index(num_joints, -1);
  std::vector<int> depth(num_joints + 1, 1);  // By def index; root is 1.
  std::vector<std::pair<int, int>> stack;     // (joint, parent def index)
  for (auto it = child_joints[root].rbegin(); it != child_joints[root].rend();
       ++it) {
    stack.emplace_back(*it, 0);
  }
  while (!stack.empty()) {
    const auto [j, parent] = stack.back();
    stack.pop_back();
    const int index = static_cast<int>(def.joints.size());
    def_index[j] = index;
    JointDef& joint = def.joints.emplace_back(joints_[j].def);
    joint.parent = parent;
    depth[index] = depth[parent] + 1;
    const std::vector<int>& children =
        child_joints[link_index_.at(joints_[j].child_link)];
    for (auto it = children.rbegin(); it != children.rend(); ++it) {
      stack.emplace_back(*it, index);
    }
  }

  // One chain per leaf joint, root to leaf, in joint order.
  std::vector<int> leaves;  // Def indices.
  for (int j = 0; j < num_joints; ++j) {
    if (!child_joints[link_index_.at(joints_[j].child_link)].empty()) continue;
    const int index = def_index[j];
    if (depth[index] > kMaxChainJoints) {
      return Error(
          joints_[j].line, JointElement(joints_[j].name),
          absl::StrCat("the chain from the root link to this leaf has ",
                       depth[index], " joints; a Reach chain has at most ",
                       kMaxChainJoints));
    }
    leaves.push_back(index);
  }
  std::sort(leaves.begin(), leaves.end());
  for (int index : leaves) {
    const std::string& name = def.joints[index].name;
    def.chains.push_back({name, root_name, name});
  }
  return absl::OkStatus();
}

absl::StatusOr<ImportedSkeleton> UrdfReader::Read(absl::string_view text) {
  tinyxml2::XMLDocument doc;
  if (doc.Parse(text.data(), text.size()) != tinyxml2::XML_SUCCESS) {
    return Error(doc.ErrorLineNum(), "",
                 absl::StrCat("malformed XML: ", doc.ErrorStr()));
  }
  const XMLElement* robot = doc.RootElement();
  if (robot == nullptr) return Error(0, "", "no XML element");
  if (absl::string_view(robot->Name()) != "robot") {
    return Error(
        robot->GetLineNum(), "",
        absl::StrCat("the root element is <", robot->Name(), ">, not <robot>"));
  }
  ImportedSkeleton out;
  if (auto s = Attribute(robot, "name", "robot", &out.name); !s.ok()) return s;

  // Only <robot>'s own children: a <transmission> holds <joint> elements of
  // its own, which name joints rather than define them.
  for (const XMLElement* e = robot->FirstChildElement("link"); e != nullptr;
       e = e->NextSiblingElement("link")) {
    if (auto s = ReadLink(e); !s.ok()) return s;
  }
  for (const XMLElement* e = robot->FirstChildElement("joint"); e != nullptr;
       e = e->NextSiblingElement("joint")) {
    if (auto s = ReadJoint(e); !s.ok()) return s;
  }
  if (links_.empty()) {
    return Error(robot->GetLineNum(), absl::StrCat("robot '", out.name, "'"),
                 "has no <link>");
  }
  if (auto s = BuildTree(&out); !s.ok()) return s;
  if (auto s = CheckCreatable(file_, absl::StrCat("robot '", out.name, "'"),
                              out.def);
      !s.ok()) {
    return s;
  }
  return out;
}

}  // namespace

absl::StatusOr<ImportedSkeleton> ParseUrdf(absl::string_view text,
                                           absl::string_view file) {
  return UrdfReader(file).Read(text);
}

absl::StatusOr<ImportedSkeleton> ImportUrdf(const std::string& path) {
  std::string text;
  if (auto s = ReadFile(path, &text); !s.ok()) return s;
  return ParseUrdf(text, path);
}

}  // namespace reach::import
