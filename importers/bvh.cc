#include "importers/bvh.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "importers/chains.h"
#include "wire/convert.h"

namespace reach::import {
namespace {

constexpr double kDegToRad = M_PI / 180.0;

// Whitespace-separated tokens with their line numbers. Handles LF, CRLF and
// mixed line endings.
class Lexer {
 public:
  explicit Lexer(absl::string_view text) : text_(text) {}

  // The next token, or an empty view at the end of the text.
  absl::string_view Next() {
    SkipSpace();
    const size_t start = pos_;
    while (pos_ < text_.size() && !IsSpace(text_[pos_])) ++pos_;
    token_line_ = line_;
    return text_.substr(start, pos_ - start);
  }

  // The rest of the current line, trimmed (joint names may hold spaces).
  absl::string_view RestOfLine() {
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
    return absl::StripAsciiWhitespace(text_.substr(start, pos_ - start));
  }

  // The next line, trimmed, skipping blank lines; false at the end.
  bool NextLine(absl::string_view* line) {
    while (pos_ < text_.size()) {
      if (text_[pos_] == '\n') {
        ++pos_;
        ++line_;
        continue;
      }
      token_line_ = line_;
      const absl::string_view rest = RestOfLine();
      if (!rest.empty()) {
        *line = rest;
        return true;
      }
    }
    return false;
  }

  // Line of the last token or line returned.
  int line() const { return token_line_; }

 private:
  static bool IsSpace(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' ||
           c == '\v';
  }
  void SkipSpace() {
    while (pos_ < text_.size() && IsSpace(text_[pos_])) {
      if (text_[pos_] == '\n') ++line_;
      ++pos_;
    }
  }

  absl::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
  int token_line_ = 1;
};

bool ParseFinite(absl::string_view token, double* value) {
  return absl::SimpleAtod(token, value) && std::isfinite(*value);
}

// A line of the MOTION section: its count of numbers, or the first token
// that is not a finite number (then the count so far).
struct FrameLine {
  int values = 0;
  absl::string_view bad;
};
// Reads `line`, appending up to `keep` of its values to `out`.
FrameLine ReadFrameLine(absl::string_view line, int keep,
                        std::vector<double>* out) {
  FrameLine read;
  for (absl::string_view token :
       absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
    double value;
    if (!ParseFinite(token, &value)) {
      read.bad = token;
      return read;
    }
    if (read.values < keep) out->push_back(value);
    ++read.values;
  }
  return read;
}

class BvhParser {
 public:
  BvhParser(absl::string_view text, absl::string_view file)
      : lex_(text), file_(file), text_size_(text.size()) {}

  absl::StatusOr<BvhClip> Parse() {
    if (absl::Status s = Expect("HIERARCHY", "the file"); !s.ok()) return s;
    if (absl::Status s = Expect("ROOT", "HIERARCHY"); !s.ok()) return s;
    if (absl::Status s = ParseHierarchy(); !s.ok()) return s;
    if (absl::Status s = ParseMotion(); !s.ok()) return s;
    clip_.skeleton.def.chains = GuessLimbChains(clip_.skeleton.def);
    clip_.skeleton.name = FileStem(file_);
    if (absl::Status s =
            CheckCreatable(file_, "HIERARCHY", clip_.skeleton.def);
        !s.ok()) {
      return s;
    }
    return std::move(clip_);
  }

 private:
  absl::Status Error(absl::string_view element, absl::string_view message) {
    return ImportError(file_, lex_.line(), element, message);
  }

  absl::Status Expect(absl::string_view keyword, absl::string_view where) {
    const absl::string_view token = lex_.Next();
    if (token == keyword) return absl::OkStatus();
    return Error(where, token.empty()
                            ? absl::StrCat("file ends where '", keyword,
                                           "' was expected")
                            : absl::StrCat("expected '", keyword,
                                           "', found '",
                                           ClientString(token, 40), "'"));
  }

  std::string JointElement(int joint) const {
    return absl::StrCat("joint '", clip_.skeleton.def.joints[joint].name, "'");
  }

  // Adds a joint below `parent` (-1 for the root) named `name`.
  absl::StatusOr<int> AddJoint(absl::string_view name, int parent) {
    if (name.empty()) return Error("JOINT", "the joint has no name");
    if (!names_.insert(std::string(name)).second) {
      return Error(absl::StrCat("joint '", name, "'"),
                   "the name is used by an earlier joint");
    }
    JointDef joint;
    joint.name = std::string(name);
    joint.parent = parent;
    clip_.skeleton.def.joints.push_back(std::move(joint));
    clip_.joints.emplace_back();
    has_offset_.push_back(false);
    has_channels_.push_back(false);
    return static_cast<int>(clip_.skeleton.def.joints.size()) - 1;
  }

  absl::Status ParseOffset(int joint, absl::string_view element) {
    Eigen::Vector3d offset;
    for (int i = 0; i < 3; ++i) {
      const absl::string_view token = lex_.Next();
      if (!ParseFinite(token, &offset[i])) {
        return Error(element,
                     absl::StrCat("OFFSET needs three finite numbers, found '",
                                  token, "'"));
      }
    }
    clip_.skeleton.def.joints[joint].rest.translation = offset;
    has_offset_[joint] = true;
    return absl::OkStatus();
  }

  absl::Status ParseChannels(int joint) {
    const std::string element = JointElement(joint);
    BvhJointChannels& channels = clip_.joints[joint];
    if (has_channels_[joint]) return Error(element, "CHANNELS is given twice");
    has_channels_[joint] = true;
    channels.first = clip_.num_channels;
    const absl::string_view count_token = lex_.Next();
    int count = 0;
    if (!absl::SimpleAtoi(count_token, &count) || count < 0 || count > 6) {
      return Error(element, absl::StrCat("CHANNELS count must be 0 to 6, found '",
                                         count_token, "'"));
    }
    int positions = 0;
    for (int c = 0; c < count; ++c) {
      const absl::string_view name = lex_.Next();
      const int frame_index = clip_.num_channels + c;
      if (name.size() == 9 && name.substr(1) == "position" &&
          (name[0] == 'X' || name[0] == 'Y' || name[0] == 'Z')) {
        int& slot = channels.position[name[0] - 'X'];
        if (slot >= 0) return Error(element, absl::StrCat(name, " is listed twice"));
        slot = frame_index;
        ++positions;
      } else if (name.size() == 9 && name.substr(1) == "rotation" &&
                 (name[0] == 'X' || name[0] == 'Y' || name[0] == 'Z')) {
        const int axis = name[0] - 'X';
        for (int r = 0; r < channels.num_rotations; ++r) {
          if (channels.axis[r] == axis) {
            return Error(element, absl::StrCat(name, " is listed twice"));
          }
        }
        channels.rotation[channels.num_rotations] = frame_index;
        channels.axis[channels.num_rotations] = axis;
        ++channels.num_rotations;
      } else {
        return Error(element,
                     absl::StrCat("CHANNELS ", count, " lists ", c,
                                  " channel names, then '", name,
                                  "' (channels are Xposition, Yposition, "
                                  "Zposition, Xrotation, Yrotation, Zrotation)"));
      }
    }
    if (positions != 0 && positions != 3) {
      return Error(element, "position channels must be all of X, Y and Z");
    }
    if (positions == 3 && clip_.skeleton.def.joints[joint].parent >= 0) {
      return Error(element,
                   "only the root may have position channels (a pose "
                   "carries one root translation)");
    }
    channels.count = count;
    clip_.num_channels += count;
    return absl::OkStatus();
  }

  absl::Status ParseHierarchy() {
    struct Open {
      int joint;
      bool end_site;
    };
    std::vector<Open> open;  // Joints whose '{' is open, innermost last.
    absl::StatusOr<int> root = AddJoint(lex_.RestOfLine(), -1);
    if (!root.ok()) return root.status();
    if (absl::Status s = Expect("{", JointElement(*root)); !s.ok()) return s;
    open.push_back({*root, false});
    while (!open.empty()) {
      const absl::string_view token = lex_.Next();
      const Open current = open.back();
      const std::string element =
          current.end_site
              ? absl::StrCat("End Site of joint '",
                             clip_.skeleton.def
                                 .joints[clip_.skeleton.def.joints[current.joint]
                                             .parent]
                                 .name,
                             "'")
              : JointElement(current.joint);
      if (token.empty()) {
        return Error(element, "file ends inside the joint (missing '}')");
      }
      if (token == "}") {
        if (!has_offset_[current.joint]) return Error(element, "no OFFSET");
        open.pop_back();
      } else if (token == "OFFSET") {
        if (absl::Status s = ParseOffset(current.joint, element); !s.ok()) {
          return s;
        }
      } else if (current.end_site &&
                 (token == "CHANNELS" || token == "JOINT" || token == "End")) {
        return Error(element, absl::StrCat("an End Site holds only an OFFSET, "
                                           "found '", token, "'"));
      } else if (token == "CHANNELS") {
        if (absl::Status s = ParseChannels(current.joint); !s.ok()) return s;
      } else if (token == "JOINT") {
        absl::StatusOr<int> joint = AddJoint(lex_.RestOfLine(), current.joint);
        if (!joint.ok()) return joint.status();
        if (absl::Status s = Expect("{", JointElement(*joint)); !s.ok()) return s;
        open.push_back({*joint, false});
      } else if (token == "End") {
        if (absl::Status s = Expect("Site", element); !s.ok()) return s;
        std::string name = absl::StrCat(
            clip_.skeleton.def.joints[current.joint].name, "_End");
        while (names_.contains(name)) name += "_";
        absl::StatusOr<int> site = AddJoint(name, current.joint);
        if (!site.ok()) return site.status();
        clip_.skeleton.def.joints[*site].type = JointType::kFixed;
        if (absl::Status s = Expect("{", element); !s.ok()) return s;
        open.push_back({*site, true});
      } else {
        return Error(element, absl::StrCat("unknown keyword '", token,
                                           "' (expected OFFSET, CHANNELS, "
                                           "JOINT, End Site or '}')"));
      }
      if (open.size() > 1000) return Error(element, "joints nest too deep");
    }
    return absl::OkStatus();
  }

  absl::Status ParseMotion() {
    const absl::string_view token = lex_.Next();
    if (token == "ROOT") {
      return Error("HIERARCHY", "several ROOTs are not supported");
    }
    if (token != "MOTION") {
      return Error("HIERARCHY",
                   token.empty() ? std::string("file ends before MOTION")
                                 : absl::StrCat("expected MOTION after the "
                                                "hierarchy, found '", token, "'"));
    }
    if (absl::Status s = Expect("Frames:", "MOTION"); !s.ok()) return s;
    const absl::string_view count = lex_.Next();
    int frames = 0;
    if (!absl::SimpleAtoi(count, &frames) || frames < 0) {
      return Error("MOTION", absl::StrCat("Frames: needs a count, found '",
                                          count, "'"));
    }
    if (absl::Status s = Expect("Frame", "MOTION"); !s.ok()) return s;
    if (absl::Status s = Expect("Time:", "MOTION"); !s.ok()) return s;
    const absl::string_view time = lex_.Next();
    if (!ParseFinite(time, &clip_.frame_time) || clip_.frame_time <= 0) {
      return Error("MOTION", absl::StrCat("Frame Time: needs a positive number "
                                          "of seconds, found '", time, "'"));
    }
    clip_.num_frames = frames;
    const int n = clip_.num_channels;
    // Never reserve more than the text could hold (two bytes per value).
    clip_.values.reserve(std::min<size_t>(static_cast<size_t>(frames) * n,
                                          text_size_ / 2 + 1));
    absl::string_view line;
    for (int f = 0; f < frames; ++f) {
      if (!lex_.NextLine(&line)) {
        return ImportError(file_, lex_.line(), "MOTION",
                           absl::StrCat("file ends after ", f, " of ", frames,
                                        " frames"));
      }
      const FrameLine read = ReadFrameLine(line, n, &clip_.values);
      if (!read.bad.empty()) {
        return Error(absl::StrCat("frame ", f),
                     absl::StrCat("'", read.bad, "' is not a finite number"));
      }
      if (read.values != n) {
        return Error(absl::StrCat("frame ", f),
                     absl::StrCat("has ", read.values, " values; the hierarchy "
                                  "declares ", n, " channels"));
      }
    }
    // Whole frames beyond the declared count are ignored and counted, as
    // Assimp and Blender read such files (assimp's own Boxing_Toes.bvh
    // declares 3069 frames and holds 3070); anything else is an error.
    while (lex_.NextLine(&line)) {
      const FrameLine read = ReadFrameLine(line, 0, nullptr);
      if (!read.bad.empty() || read.values != n) {
        return Error("MOTION",
                     absl::StrCat("after the ", frames,
                                  " frames of Frames:, a line that is not a "
                                  "frame of ", n, " numbers"));
      }
      ++clip_.extra_frame_lines;
    }
    return absl::OkStatus();
  }

  Lexer lex_;
  absl::string_view file_;
  size_t text_size_;
  BvhClip clip_;
  absl::flat_hash_set<std::string> names_;
  std::vector<bool> has_offset_;
  std::vector<bool> has_channels_;
};

}  // namespace

void BvhClip::FramePose(int frame, Pose* pose) const {
  const std::vector<JointDef>& defs = skeleton.def.joints;
  pose->local.resize(defs.size());
  const double* v = values.data() + static_cast<size_t>(frame) * num_channels;
  for (size_t j = 0; j < defs.size(); ++j) {
    Transform& local = pose->local[j];
    local.translation = defs[j].rest.translation;
    local.rotation = Eigen::Quaterniond::Identity();
    local.scale = defs[j].rest.scale;
    const BvhJointChannels& c = joints[j];
    if (c.position[0] >= 0) {
      local.translation = Eigen::Vector3d(v[c.position[0]], v[c.position[1]],
                                          v[c.position[2]]);
    }
    for (int r = 0; r < c.num_rotations; ++r) {
      local.rotation = local.rotation *
                       AxisAngle(Eigen::Vector3d::Unit(c.axis[r]),
                                 v[c.rotation[r]] * kDegToRad);
    }
    local.rotation.normalize();
  }
}

absl::Status BvhClip::UseFrameAsRest(int frame) {
  if (frame < 0 || frame >= num_frames) {
    return absl::InvalidArgumentError(
        absl::StrCat("rest_frame ", frame, " is beyond the clip's ",
                     num_frames, " frames"));
  }
  Pose rest;
  FramePose(frame, &rest);
  for (size_t j = 0; j < rest.local.size(); ++j) {
    skeleton.def.joints[j].rest.rotation = rest.local[j].rotation;
  }
  return absl::OkStatus();
}

// What a file that is not BVH looks like, by its first bytes; "" when it
// looks like nothing else.
absl::string_view OtherFormat(absl::string_view text) {
  if (absl::StartsWith(text, "glTF")) return "a binary glTF (.glb)";
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == absl::string_view::npos) return "";
  if (text[first] == '{') return "JSON (glTF or a skeleton file)";
  if (text[first] == '<') return "XML (URDF?)";
  for (size_t i = first; i < std::min(text.size(), first + 64); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 && c != '\t' && c != '\r' && c != '\n') return "binary data";
  }
  return "";
}

absl::StatusOr<BvhClip> ParseBvh(absl::string_view text,
                                 absl::string_view file,
                                 const BvhOptions& options) {
  if (!absl::StartsWith(absl::StripLeadingAsciiWhitespace(text),
                        "HIERARCHY")) {
    if (const absl::string_view other = OtherFormat(text); !other.empty()) {
      return ImportError(file, 1, "the file",
                         absl::StrCat("not BVH: it starts like ", other,
                                      "; a BVH clip starts with HIERARCHY"));
    }
  }
  absl::StatusOr<BvhClip> clip = BvhParser(text, file).Parse();
  if (!clip.ok() || options.rest_frame < 0) return clip;
  if (absl::Status s = clip->UseFrameAsRest(options.rest_frame); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", s.message()));
  }
  return clip;
}

absl::StatusOr<BvhClip> ImportBvh(const std::string& path,
                                  const BvhOptions& options) {
  std::string text;
  if (absl::Status s = ReadFile(path, &text); !s.ok()) return s;
  return ParseBvh(text, path, options);
}

Eigen::Vector3d EulerZyxDegrees(const Eigen::Quaterniond& q) {
  const Eigen::Matrix3d r = q.normalized().toRotationMatrix();
  const double sin_y = std::clamp(-r(2, 0), -1.0, 1.0);
  double z, y, x;
  if (std::abs(sin_y) > 1.0 - 1e-12) {
    // Gimbal lock: Z and X turn about the same axis; put it all on X.
    z = 0.0;
    y = std::copysign(M_PI / 2, sin_y);
    x = std::atan2(-r(1, 2), r(1, 1));
  } else {
    z = std::atan2(r(1, 0), r(0, 0));
    y = std::asin(sin_y);
    x = std::atan2(r(2, 1), r(2, 2));
  }
  return Eigen::Vector3d(z, y, x) / kDegToRad;
}

absl::StatusOr<std::string> WriteBvh(const Skeleton& skeleton,
                                     absl::Span<const Pose> poses,
                                     double frame_time) {
  const int n = skeleton.num_joints();
  std::vector<std::vector<int>> children(n);
  for (int j = 1; j < n; ++j) {
    if (skeleton.joint(j).parent < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "joints[", j, "] ('", skeleton.joint(j).name,
          "') is a second root; BVH holds one"));
    }
    children[skeleton.joint(j).parent].push_back(j);
  }
  for (size_t f = 0; f < poses.size(); ++f) {
    if (static_cast<int>(poses[f].local.size()) != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("poses[", f, "] has ", poses[f].local.size(),
                       " joints; the skeleton has ", n));
    }
  }
  const auto is_end_site = [&](int j) {
    return skeleton.joint(j).type == JointType::kFixed && children[j].empty() &&
           j != 0;
  };

  std::string out = "HIERARCHY\n";
  std::vector<int> channel_order;  // Joints with channels, in file order.
  // Depth-first, iteratively: (joint, depth, children written so far).
  struct Frame {
    int joint;
    int depth;
    size_t next_child;
  };
  std::vector<Frame> stack = {{0, 0, 0}};
  const auto offset = [&](int j) {
    const Eigen::Vector3d& t = skeleton.joint(j).rest.translation;
    return absl::StrFormat("OFFSET %.6f %.6f %.6f\n", t.x(), t.y(), t.z());
  };
  const auto open = [&](int j, int depth) {
    const std::string indent(depth, '\t');
    if (is_end_site(j)) {
      absl::StrAppend(&out, indent, "End Site\n", indent, "{\n", indent, "\t",
                      offset(j));
      return;
    }
    absl::StrAppend(&out, indent, j == 0 ? "ROOT " : "JOINT ",
                    skeleton.joint(j).name, "\n", indent, "{\n", indent, "\t",
                    offset(j), indent, "\t",
                    j == 0 ? "CHANNELS 6 Xposition Yposition Zposition "
                             "Zrotation Yrotation Xrotation\n"
                           : "CHANNELS 3 Zrotation Yrotation Xrotation\n");
    channel_order.push_back(j);
    if (children[j].empty()) {
      absl::StrAppend(&out, indent, "\tEnd Site\n", indent, "\t{\n", indent,
                      "\t\tOFFSET 0.000000 0.000000 0.000000\n", indent,
                      "\t}\n");
    }
  };
  open(0, 0);
  while (!stack.empty()) {
    Frame& top = stack.back();
    if (top.next_child < children[top.joint].size()) {
      const int child = children[top.joint][top.next_child++];
      const int depth = top.depth + 1;
      open(child, depth);
      stack.push_back({child, depth, 0});
    } else {
      absl::StrAppend(&out, std::string(top.depth, '\t'), "}\n");
      stack.pop_back();
    }
  }

  absl::StrAppend(&out, "MOTION\nFrames: ", poses.size(), "\n",
                  absl::StrFormat("Frame Time: %.7f\n", frame_time));
  for (const Pose& pose : poses) {
    const Eigen::Vector3d& root = pose.local[0].translation;
    absl::StrAppend(&out, absl::StrFormat("%.6f %.6f %.6f", root.x(), root.y(),
                                          root.z()));
    for (int j : channel_order) {
      const Eigen::Vector3d zyx = EulerZyxDegrees(pose.local[j].rotation);
      absl::StrAppend(&out, absl::StrFormat(" %.6f %.6f %.6f", zyx[0], zyx[1],
                                            zyx[2]));
    }
    out += "\n";
  }
  return out;
}

}  // namespace reach::import
