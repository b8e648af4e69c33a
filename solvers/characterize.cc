#include "solvers/characterize.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "solvers/pose.h"

namespace reach {
namespace {

using Eigen::Vector3d;

enum Role {
  kPelvis,
  kSpine,
  kNeck,
  kHead,
  kClavicle,
  kUpperArm,
  kForearm,
  kHand,
  kThigh,
  kShin,
  kFoot,
  kToe,
};
using RoleSet = unsigned;
constexpr RoleSet Bit(Role r) { return 1u << r; }

// A joint name split into words: "mixamorig:LeftUpLeg" -> side left,
// base "upleg"; "CC_Base_L_Calf" -> left, "calf"; "thigh.L" -> left,
// "thigh"; "lhand" -> left, "hand"; "Spine01" -> "spine".
struct NameParts {
  int side = -1;  // kLeft, kRight or -1.
  std::string base;
};

// Words that only prefix a rig's names.
bool IsPrefixWord(const std::string& w) {
  return w == "cc" || w == "base" || w == "b" || w == "mixamorig" ||
         w == "bip01" || w == "bip" || w == "def" || w == "org" || w == "mch" ||
         w == "j" || w == "jnt" || w == "bone";
}

RoleSet RolesOfBase(const std::string& base, bool sided) {
  // Dictionary of the rigs users have (CMU MotionBuilder and 3ds Max, the
  // Boxing rig, Character Creator, Mixamo, UE4/UE5 Mannequin, Rigify,
  // the BCN rig, Godot/VRM humanoid), by base word.
  static const std::pair<const char*, RoleSet> kWords[] = {
      {"hips", Bit(kPelvis)},
      {"pelvis", Bit(kPelvis)},
      {"spine", Bit(kSpine)},
      {"ab", Bit(kSpine)},
      {"abdomen", Bit(kSpine)},
      {"chest", Bit(kSpine)},
      {"upperchest", Bit(kSpine)},
      {"lowerback", Bit(kSpine)},
      {"upperback", Bit(kSpine)},
      {"waist", Bit(kSpine)},
      {"torso", Bit(kSpine)},
      {"neck", Bit(kNeck)},
      {"lowerneck", Bit(kNeck)},
      {"upperneck", Bit(kNeck)},
      {"necktwist", Bit(kNeck)},
      {"head", Bit(kHead)},
      {"clavicle", Bit(kClavicle)},
      {"collar", Bit(kClavicle)},
      {"collarbone", Bit(kClavicle)},
      {"shoulder", Bit(kClavicle) | Bit(kUpperArm)},
      {"arm", Bit(kUpperArm)},
      {"upperarm", Bit(kUpperArm)},
      {"uparm", Bit(kUpperArm)},
      {"humerus", Bit(kUpperArm)},
      {"forearm", Bit(kForearm)},
      {"lowerarm", Bit(kForearm)},
      {"elbow", Bit(kForearm)},
      {"hand", Bit(kHand)},
      {"wrist", Bit(kHand)},
      {"upleg", Bit(kThigh)},
      {"thigh", Bit(kThigh)},
      {"upperleg", Bit(kThigh)},
      {"leg", Bit(kShin)},
      {"shin", Bit(kShin)},
      {"calf", Bit(kShin)},
      {"knee", Bit(kShin)},
      {"lowerleg", Bit(kShin)},
      {"foot", Bit(kFoot)},
      {"ankle", Bit(kFoot)},
      {"toe", Bit(kToe)},
      {"toes", Bit(kToe)},
      {"toebase", Bit(kToe)},
      {"ball", Bit(kToe)},
  };
  // "Hip" alone is the pelvis (CC_Base_Hip); with a side, the thigh
  // (LeftHip in the CMU 3ds Max and Boxing rigs, B_Hip_Left).
  if (base == "hip") return sided ? Bit(kThigh) : Bit(kPelvis);
  for (const auto& [word, roles] : kWords) {
    if (base == word) return roles;
  }
  return 0;
}

bool IsKnownWord(const std::string& w) {
  return RolesOfBase(w, true) != 0 || RolesOfBase(w, false) != 0 ||
         w == "thumb" || w == "fingers" || w == "finger" || w == "hipjoint";
}

NameParts SplitName(absl::string_view name) {
  // The last namespace segment ("mixamorig:Hips" -> "Hips").
  const size_t colon = name.rfind(':');
  if (colon != absl::string_view::npos) name = name.substr(colon + 1);
  // Words: split at separators, at lower-to-upper case changes and
  // between letters and digits; digits are dropped ("Spine01").
  std::vector<std::string> words;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) words.push_back(absl::AsciiStrToLower(word));
    word.clear();
  };
  for (size_t i = 0; i < name.size(); ++i) {
    const char ch = name[i];
    if (!absl::ascii_isalpha(ch)) {
      flush();
      continue;
    }
    if (absl::ascii_isupper(ch) && !word.empty() &&
        absl::ascii_islower(word.back())) {
      flush();
    }
    word.push_back(ch);
  }
  flush();
  NameParts parts;
  std::string base;
  for (std::string& w : words) {
    if (w == "left" || w == "l") {
      parts.side = kLeft;
      continue;
    }
    if (w == "right" || w == "r") {
      parts.side = kRight;
      continue;
    }
    // A side letter glued to a word: "lhand", "RThumb", "LHip".
    if (w.size() > 2 && (w[0] == 'l' || w[0] == 'r') &&
        IsKnownWord(w.substr(1))) {
      parts.side = w[0] == 'l' ? kLeft : kRight;
      w = w.substr(1);
    }
    if (base.empty() && IsPrefixWord(w)) continue;
    base += w;
  }
  parts.base = std::move(base);
  return parts;
}

RoleSet NameRoles(const NameParts& parts) {
  return RolesOfBase(parts.base, parts.side >= 0);
}

// The shape of the skeleton's rest pose.
struct Shape {
  const Skeleton& skeleton;
  std::vector<std::vector<int>> children;
  std::vector<Vector3d> at;   // Rest position, model space.
  std::vector<double> bone;   // Distance to the parent (0 at roots).
  std::vector<double> reach;  // Longest path down to a leaf.
  std::vector<int> farthest;  // The child on that path (-1 at leaves).
  double size = 0.0;          // Largest distance between two joints.

  std::vector<int> count;      // Joints in the subtree (end markers out).
  std::vector<RoleSet> names;  // The roles each joint's name allows.
  std::vector<int> sides;      // The side each joint's name says, or -1.

  Shape(const Skeleton& s, const Pose* reference) : skeleton(s) {
    const int n = s.num_joints();
    children.resize(n);
    at.resize(n);
    bone.assign(n, 0.0);
    reach.assign(n, 0.0);
    farthest.assign(n, -1);
    count.assign(n, 1);
    std::vector<std::vector<int>> all_children(n);
    std::vector<Transform> globals(n);
    if (reference != nullptr) {
      ComputeGlobals(s, *reference, absl::MakeSpan(globals));
    }
    for (int j = 0; j < n; ++j) {
      const NameParts parts = SplitName(s.joint(j).name);
      names.push_back(NameRoles(parts));
      sides.push_back(parts.side);
      at[j] = reference != nullptr ? globals[j].translation
                                   : s.rest_globals()[j].translation;
      const int p = s.joint(j).parent;
      if (p >= 0) {
        all_children[p].push_back(j);
        bone[j] = (at[j] - at[p]).norm();
      }
    }
    // A fixed leaf (a BVH End Site, a fixed toe or finger tip) marks where
    // a bone ends and has nothing to turn: it is no joint of the shape.
    for (int j = 0; j < n; ++j) {
      for (int c : all_children[j]) {
        if (!IsMarker(c, all_children)) children[j].push_back(c);
      }
    }
    for (int j = n - 1; j >= 0; --j) {
      const int p = s.joint(j).parent;
      if (p >= 0 && IsMarker(j, all_children)) continue;
      if (p >= 0) count[p] += count[j];
      for (int c : children[j]) {
        if (bone[c] + reach[c] > reach[j] || farthest[j] < 0) {
          reach[j] = bone[c] + reach[c];
          farthest[j] = c;
        }
      }
    }
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b) {
        size = std::max(size, (at[a] - at[b]).norm());
      }
    }
  }
  bool IsMarker(int j, const std::vector<std::vector<int>>& all) const {
    return skeleton.joint(j).type == JointType::kFixed && all[j].empty();
  }
  double Branch(int c) const { return bone[c] + reach[c]; }
  // Where a limb ends along `path` (hand, foot): the first joint that
  // stops, fans out into short bones (fingers, toes: two or more, each
  // under 0.8 of the bone that reaches the joint), or goes on by one short
  // bone only (a toe: under half of it). -1 if none does.
  int LimbEnd(const std::vector<int>& path) const {
    for (size_t i = 1; i < path.size(); ++i) {
      const int j = path[i];
      const std::vector<int>& kids = children[j];
      if (kids.empty()) return static_cast<int>(i);
      double longest = 0.0;
      for (int c : kids) longest = std::max(longest, Branch(c));
      if (kids.size() >= 2 ? longest < 0.8 * bone[j]
                           : longest < 0.5 * bone[j]) {
        return static_cast<int>(i);
      }
    }
    return -1;
  }
  // The path from `j` down its longest branch to a leaf.
  std::vector<int> PathDown(int j) const {
    std::vector<int> path;
    for (; j >= 0; j = farthest[j]) path.push_back(j);
    return path;
  }
  Vector3d End(int j) const { return at[PathDown(j).back()]; }
  bool IsAncestorOrSelf(int a, int j) const {
    for (; j >= 0; j = skeleton.joint(j).parent) {
      if (j == a) return true;
    }
    return false;
  }
  int CommonAncestor(int a, int b) const {
    for (int j = a; j >= 0; j = skeleton.joint(j).parent) {
      if (IsAncestorOrSelf(j, b)) return j;
    }
    return -1;
  }
};

// Two child branches of one joint that mirror each other: long (a fifth
// of the body at least), as many joints, and the bones along their
// longest paths alike within 15% (legs, arms; not a leg and the spine).
// `lenient`, for rigs no pair of which passes that (fingers 22% apart left
// to right, a helper bone on one side): only the limbs proper must be alike
// (the bones down to where each ends, at the hand or foot, within 15%);
// below the end, and in side branches shorter than half of what the limb
// reaches on from there (a helper bone, not an arm off a spine), the two
// may differ. CompareMirror then says how, as a warning.
struct Pair {
  int junction = -1;
  int a = -1, b = -1;
  double length = 0.0;
};

bool BonesAlike(const Shape& s, int a, int b) {
  return std::abs(s.bone[a] - s.bone[b]) <=
         0.15 * std::max(s.bone[a], s.bone[b]) + 1e-3 * s.size;
}

bool Mirrored(const Shape& s, int a, int b, bool lenient) {
  const double la = s.Branch(a), lb = s.Branch(b);
  if (std::abs(la - lb) > 0.15 * std::max(la, lb)) return false;
  if (!lenient && s.count[a] != s.count[b]) return false;
  const std::vector<int> pa = s.PathDown(a), pb = s.PathDown(b);
  if (!lenient) {
    if (pa.size() != pb.size()) return false;
    for (size_t i = 0; i < pa.size(); ++i) {
      if (!BonesAlike(s, pa[i], pb[i])) return false;
    }
    return true;
  }
  const int end = s.LimbEnd(pa);
  if (end < 0 || end != s.LimbEnd(pb)) return false;
  for (int i = 0; i <= end; ++i) {
    if (!BonesAlike(s, pa[i], pb[i])) return false;
  }
  for (const std::vector<int>* path : {&pa, &pb}) {
    for (int i = 0; i < end; ++i) {
      const int j = (*path)[i];
      for (int c : s.children[j]) {
        if (c != (*path)[i + 1] && s.Branch(c) >= 0.5 * s.reach[j]) {
          return false;
        }
      }
    }
  }
  return true;
}

std::vector<Pair> FindPairs(const Shape& s, bool lenient) {
  std::vector<Pair> pairs;
  for (int j = 0; j < s.skeleton.num_joints(); ++j) {
    Pair best;
    const std::vector<int>& kids = s.children[j];
    for (size_t x = 0; x < kids.size(); ++x) {
      for (size_t y = x + 1; y < kids.size(); ++y) {
        const int a = kids[x], b = kids[y];
        const double length = std::min(s.Branch(a), s.Branch(b));
        if (length < 0.2 * s.size || !Mirrored(s, a, b, lenient)) continue;
        if (length > best.length) best = {j, a, b, length};
      }
    }
    if (best.junction >= 0) pairs.push_back(best);
  }
  std::sort(pairs.begin(), pairs.end(),
            [](const Pair& x, const Pair& y) { return x.length > y.length; });
  return pairs;
}

// Walks two mirrored branches from `a` and `b` together, each joint's
// children paired longest branch first: writes the bones that differ by
// more than 15% to `differ` and the joints one side has and the other
// lacks (with what hangs below them) to `extra`.
void CompareMirror(const Shape& s, int a, int b,
                   std::vector<std::string>* differ,
                   std::vector<std::string>* extra) {
  const auto name = [&s](int j) { return s.skeleton.joint(j).name; };
  if (!BonesAlike(s, a, b)) {
    differ->push_back(absl::StrCat("'", name(a), "' ", s.bone[a], " / '",
                                   name(b), "' ", s.bone[b]));
  }
  auto sorted = [&s](int j) {
    // Longest first; ties in joint order. (std::sort: stable_sort's
    // temporary buffer is allocated where the allocation tests count.)
    std::vector<int> kids = s.children[j];
    std::sort(kids.begin(), kids.end(), [&s](int x, int y) {
      return s.Branch(x) != s.Branch(y) ? s.Branch(x) > s.Branch(y) : x < y;
    });
    return kids;
  };
  const std::vector<int> ka = sorted(a), kb = sorted(b);
  const size_t both = std::min(ka.size(), kb.size());
  for (size_t i = 0; i < both; ++i)
    CompareMirror(s, ka[i], kb[i], differ, extra);
  for (const std::vector<int>* kids : {&ka, &kb}) {
    for (size_t i = both; i < kids->size(); ++i) {
      const int k = (*kids)[i];
      extra->push_back(s.count[k] > 1 ? absl::StrCat("'", name(k), "' (and ",
                                                     s.count[k] - 1, " below)")
                                      : absl::StrCat("'", name(k), "'"));
    }
  }
}

// A warning when the two branches of `pair` (`what`: "arms", "legs") are
// not mirror images of each other, naming what differs; "" when they are.
std::string MirrorWarning(const Shape& s, const Pair& pair,
                          absl::string_view what) {
  std::vector<std::string> differ, extra;
  CompareMirror(s, pair.a, pair.b, &differ, &extra);
  if (differ.empty() && extra.empty()) return "";
  std::string out = absl::StrCat("the ", what, " are not mirror images (",
                                 "retargeted by their limbs proper):");
  if (!differ.empty()) {
    absl::StrAppend(
        &out, " bones more than 15% apart: ", absl::StrJoin(differ, ", "), ";");
  }
  if (!extra.empty()) {
    absl::StrAppend(&out, " on one side only: ", absl::StrJoin(extra, ", "),
                    ";");
  }
  out.pop_back();
  return out;
}

// How well the limb roles `roles` (in order along the limb) sit at
// `start` on `path`: +1 per joint whose name allows its role, -1 per
// named joint that does not.
int NameScore(const std::vector<RoleSet>& names, int start,
              const std::vector<Role>& roles) {
  int score = 0;
  for (size_t r = 0; r < roles.size(); ++r) {
    const int i = start + static_cast<int>(r);
    if (i < 0 || i >= static_cast<int>(names.size())) continue;
    if (names[i] == 0) continue;
    score += (names[i] & Bit(roles[r])) != 0 ? 1 : -1;
  }
  return score;
}

// Places (before, first, second, end[, after]) on a limb path: `first`
// and `second` (upper arm and forearm, thigh and shin) are consecutive,
// `end` (hand, foot) follows; `before` (clavicle) precedes, `after` (toe)
// follows. Names decide where they can; otherwise the shape: the end at
// the limb's LimbEnd, then the two longest consecutive bones.
// Returns the index on `path` of the upper arm / thigh, -1 if none fits.
int PlaceLimb(const Shape& s, const std::vector<int>& path,
              const std::vector<Role>& roles, int first_role) {
  std::vector<RoleSet> names;
  for (int j : path) names.push_back(s.names[j]);
  int best = -1;
  int best_names = 0;
  double best_bones = -1.0;
  const int n = static_cast<int>(path.size());
  const int end = s.LimbEnd(path);
  for (int u = 0; u + 2 < n; ++u) {
    const int names_score = NameScore(names, u - first_role, roles);
    // The shape: the limb's end (hand, foot) where it forks into short
    // bones or stops, then the longer two bones before it.
    const double bones =
        (u + 2 == end ? 1e6 : 0.0) + s.bone[path[u + 1]] + s.bone[path[u + 2]];
    if (best < 0 || names_score > best_names ||
        (names_score == best_names && bones > best_bones)) {
      best = u;
      best_names = names_score;
      best_bones = bones;
    }
  }
  return best;
}

std::string SideName(int side) { return side == kLeft ? "left" : "right"; }

// The fingers below `hand`: chains that follow single children from each
// of the hand's children, and from each child of a joint where a chain
// forks (the forking joint, a palm, is no finger's); joints in `taken`
// (other roles) stop a chain. Named as Finger says.
std::vector<Finger> FindFingers(const Shape& s, int hand,
                                const std::vector<char>& taken) {
  std::vector<Finger> fingers;
  std::vector<int> starts;
  for (int c : s.children[hand]) starts.push_back(c);
  for (size_t i = 0; i < starts.size(); ++i) {
    std::vector<int> chain;
    int j = starts[i];
    while (j >= 0 && !taken[j]) {
      chain.push_back(j);
      const std::vector<int>& kids = s.children[j];
      if (kids.size() == 1) {
        j = kids[0];
        continue;
      }
      if (kids.size() > 1) {
        starts.insert(starts.end(), kids.begin(), kids.end());
        chain.clear();  // A palm: its fingers start below it.
      }
      j = -1;
    }
    if (!chain.empty()) fingers.push_back({"", std::move(chain), false});
  }
  // Names: the word in the joints' names, else the shape.
  auto lower = [](std::string text) {
    for (char& ch : text) ch = static_cast<char>(std::tolower(ch));
    return text;
  };
  int thumb = -1;
  for (size_t f = 0; f < fingers.size(); ++f) {
    std::string name;
    for (int j : fingers[f].joints) {
      absl::StrAppend(&name, lower(s.skeleton.joint(j).name), " ");
    }
    for (const auto& [word, role] :
         {std::pair{"thumb", "thumb"}, std::pair{"pollex", "thumb"},
          std::pair{"index", "index"}, std::pair{"middle", "middle"},
          std::pair{"ring", "ring"}, std::pair{"pinky", "pinky"},
          std::pair{"little", "pinky"}}) {
      if (name.find(word) != std::string::npos) {
        fingers[f].name = role;
        fingers[f].named = true;
        break;
      }
    }
    if (fingers[f].name == "thumb") thumb = static_cast<int>(f);
  }
  if (thumb < 0 && fingers.size() >= 2) {
    // The thumb leaves the hand farthest from the others' mean direction.
    Vector3d mean = Vector3d::Zero();
    for (const Finger& f : fingers) {
      mean += (s.at[f.joints.back()] - s.at[hand]).normalized();
    }
    double widest = -1.0;
    for (size_t f = 0; f < fingers.size(); ++f) {
      const Vector3d d =
          (s.at[fingers[f].joints.back()] - s.at[hand]).normalized();
      const double off = (d - mean.normalized()).norm();
      if (fingers[f].name.empty() && off > widest) {
        widest = off;
        thumb = static_cast<int>(f);
      }
    }
    if (thumb >= 0) fingers[thumb].name = "thumb";
  }
  // Thumb first, then nearest it (or in the hand's order).
  const Vector3d from =
      thumb >= 0 ? s.at[fingers[thumb].joints[0]] : s.at[hand];
  std::sort(fingers.begin(), fingers.end(),
            [&](const Finger& a, const Finger& b) {
              if ((a.name == "thumb") != (b.name == "thumb")) {
                return a.name == "thumb";
              }
              const double da = (s.at[a.joints[0]] - from).norm();
              const double db = (s.at[b.joints[0]] - from).norm();
              return da != db ? da < db : a.joints[0] < b.joints[0];
            });
  int unnamed = 0;
  for (Finger& f : fingers) {
    if (f.name.empty()) f.name = absl::StrCat("finger", ++unnamed);
  }
  return fingers;
}

}  // namespace

absl::string_view DecidedName(Decided how) {
  switch (how) {
    case Decided::kName:
      return "name";
    case Decided::kNameOrder:
      return "name, placed by its neighbours";
    case Decided::kShape:
      return "shape";
    case Decided::kOverride:
      return "override";
  }
  return "";
}

absl::StatusOr<Characterization> Characterize(
    const Skeleton& skeleton, absl::Span<const RoleOverride> overrides,
    const Pose* reference) {
  if (reference != nullptr) {
    const absl::Status valid = ValidatePose(skeleton, *reference);
    if (!valid.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("reference pose: ", valid.message()));
    }
  }
  const Shape s(skeleton, reference);
  const int n = skeleton.num_joints();
  std::vector<Pair> pairs = FindPairs(s, /*lenient=*/false);
  if (pairs.size() < 2) pairs = FindPairs(s, /*lenient=*/true);
  if (pairs.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "skeleton: not a humanoid: found ", pairs.size(),
        " joint(s) with two long mirrored branches, need two (the legs' "
        "and the arms')"));
  }
  // Of the two longest mirrored pairs, the arms' junction (the chest) has
  // a short third branch, the neck and head; the legs' has none (or the
  // long spine). When both or neither do, the legs are the longer limbs
  // (their two longest bones: thigh and shin against upper arm and
  // forearm), whatever the rest pose (T, A, or arms down).
  auto has_neck = [&](const Pair& p) {
    for (int k : s.children[p.junction]) {
      if (k != p.a && k != p.b && s.Branch(k) < 0.6 * p.length) return true;
    }
    return false;
  };
  auto limb_bones = [&](const Pair& p) {
    double first = 0.0, second = 0.0;
    for (int j : s.PathDown(p.a)) {
      const double b = j == p.a ? 0.0 : s.bone[j];
      if (b > first) {
        second = first;
        first = b;
      } else if (b > second) {
        second = b;
      }
    }
    return first + second;
  };
  Pair legs = pairs[0], arms = pairs[1];
  if (has_neck(legs) != has_neck(arms)) {
    if (has_neck(legs)) std::swap(legs, arms);
  } else if (limb_bones(arms) > limb_bones(legs)) {
    std::swap(legs, arms);
  }
  if (legs.junction == arms.junction ||
      s.IsAncestorOrSelf(arms.a, legs.junction) ||
      s.IsAncestorOrSelf(arms.b, legs.junction) ||
      s.IsAncestorOrSelf(legs.a, arms.junction) ||
      s.IsAncestorOrSelf(legs.b, arms.junction)) {
    return absl::InvalidArgumentError(
        "skeleton: not a humanoid: the legs and arms found are not on "
        "separate branches");
  }

  Characterization c;
  for (const auto& [pair, what] :
       {std::pair{arms, "arms"}, std::pair{legs, "legs"}}) {
    std::string warning = MirrorWarning(s, pair, what);
    if (!warning.empty()) c.warnings.push_back(std::move(warning));
  }
  c.pelvis = s.CommonAncestor(legs.junction, arms.junction);
  for (int j = arms.junction; j != c.pelvis; j = skeleton.joint(j).parent) {
    c.spine.push_back(j);
  }
  std::reverse(c.spine.begin(), c.spine.end());
  const Vector3d feet = 0.5 * (s.End(legs.a) + s.End(legs.b));
  c.up = (s.at[arms.junction] - feet).normalized();

  // Limbs along their longest paths.
  const std::vector<Role> arm_roles = {kClavicle, kUpperArm, kForearm, kHand};
  const std::vector<Role> leg_roles = {kThigh, kShin, kFoot, kToe};
  std::array<std::vector<int>, 2> arm_paths = {s.PathDown(arms.a),
                                               s.PathDown(arms.b)};
  std::array<std::vector<int>, 2> leg_paths = {s.PathDown(legs.a),
                                               s.PathDown(legs.b)};
  std::array<int, 2> arm_at, leg_at;  // Where the upper arm, thigh sit.
  for (int k = 0; k < 2; ++k) {
    arm_at[k] = PlaceLimb(s, arm_paths[k], arm_roles, 1);
    leg_at[k] = PlaceLimb(s, leg_paths[k], leg_roles, 0);
    if (arm_at[k] < 0 || leg_at[k] < 0) {
      return absl::InvalidArgumentError(
          "skeleton: not a humanoid: a limb has fewer than three joints");
    }
  }
  // The head: the highest branch of the chest that is not an arm, down to
  // the joint its name says is the head, else the first joint above the
  // chest where it forks (face bones) or ends.
  int neck_start = -1;
  double top = -1e300;
  std::vector<double> highest(n, -1e300);
  for (int j = n - 1; j >= 0; --j) {
    highest[j] = std::max(highest[j], s.at[j].dot(c.up));
    const int p = skeleton.joint(j).parent;
    if (p >= 0) highest[p] = std::max(highest[p], highest[j]);
  }
  auto holds_head = [&](int k) {
    for (int j = 0; j < n; ++j) {
      if (s.names[j] == Bit(kHead) && s.IsAncestorOrSelf(k, j)) {
        return true;
      }
    }
    return false;
  };
  for (int k : s.children[arms.junction]) {
    if (k == arms.a || k == arms.b) continue;
    if (holds_head(k)) {
      neck_start = k;
      break;
    }
    if (highest[k] > top) {
      top = highest[k];
      neck_start = k;
    }
  }
  Decided head_how = Decided::kShape;
  if (neck_start >= 0) {
    std::vector<int> up_path;
    for (int j = neck_start; j >= 0;) {
      up_path.push_back(j);
      int next = -1;
      for (int k : s.children[j]) {
        if (next < 0 || highest[k] > highest[next]) next = k;
      }
      j = next;
    }
    for (int j : up_path) {
      if (s.names[j] == Bit(kHead)) {
        c.head = j;
        head_how = Decided::kName;
        break;
      }
    }
    if (c.head < 0) {
      // The head is where the chain forks (face bones, a jaw, hair) or
      // ends. An end well above the shoulders is the head's top (a glTF
      // rig's "HeadTop_End", a joint like any other there; a BVH End Site
      // is no joint of the shape): the head is the joint below it, whose
      // bone runs up through the skull. The skull's base sits within 0.4
      // of an arm's length above the shoulders on a human (0.06-0.1 of
      // the height against an arm's 0.33-0.36), its top 0.5-0.65 above.
      double shoulders = 0.0, arm = 0.0;
      for (int k = 0; k < 2; ++k) {
        const std::vector<int>& path = arm_paths[k];
        const int u = arm_at[k];
        shoulders += 0.5 * s.at[path[u]].dot(c.up);
        arm += 0.5 * (s.bone[path[u + 1]] + s.bone[path[u + 2]]);
      }
      for (size_t i = 0; i < up_path.size(); ++i) {
        const int j = up_path[i];
        if (s.children[j].size() == 1) continue;
        c.head = j;
        if (s.children[j].empty() && i > 0 &&
            s.at[j].dot(c.up) - shoulders > 0.4 * arm) {
          c.head = up_path[i - 1];
        }
        break;
      }
    }
    for (int j : up_path) {
      if (j == c.head) break;
      c.neck.push_back(j);
    }
  }

  // Forward: heel to toe, where the feet have toes; else the model's +Z.
  Vector3d forward = Vector3d::Zero();
  for (int k = 0; k < 2; ++k) {
    const std::vector<int>& path = leg_paths[k];
    const int foot = leg_at[k] + 2;
    if (foot + 1 < static_cast<int>(path.size())) {
      forward += s.at[path[foot + 1]] - s.at[path[foot]];
    }
  }
  forward -= forward.dot(c.up) * c.up;
  if (forward.norm() < 1e-3 * s.size) {
    forward = Vector3d::UnitZ() - c.up.z() * c.up;
  }
  c.forward = forward.normalized();
  c.left = c.up.cross(c.forward).normalized();

  // Sides: from the names when they tell the two branches apart, else by
  // the character's left.
  auto side_by_names = [&](const std::vector<int>& path) {
    int side = -1;
    for (int j : path) {
      const int s_j = s.sides[j];
      if (s_j < 0) continue;
      if (side >= 0 && side != s_j) return -1;
      side = s_j;
    }
    return side;
  };
  auto order = [&](const std::array<std::vector<int>, 2>& paths, int junction) {
    const int na = side_by_names(paths[0]), nb = side_by_names(paths[1]);
    if (na >= 0 && nb >= 0 && na != nb)
      return std::make_pair(na == kLeft, true);
    const double la = (s.End(paths[0].front()) - s.at[junction]).dot(c.left);
    const double lb = (s.End(paths[1].front()) - s.at[junction]).dot(c.left);
    return std::make_pair(la >= lb, false);
  };
  const auto [arm_a_left, arm_named] = order(arm_paths, arms.junction);
  const auto [leg_a_left, leg_named] = order(leg_paths, legs.junction);
  c.sides_from_names = arm_named && leg_named;
  if (!arm_a_left) {
    std::swap(arm_paths[0], arm_paths[1]);
    std::swap(arm_at[0], arm_at[1]);
  }
  if (!leg_a_left) {
    std::swap(leg_paths[0], leg_paths[1]);
    std::swap(leg_at[0], leg_at[1]);
  }
  for (int k = 0; k < 2; ++k) {
    const std::vector<int>& ap = arm_paths[k];
    const int u = arm_at[k];
    Arm& arm = c.arms[k];
    arm.clavicle = u >= 1 ? ap[u - 1] : -1;
    arm.upper_arm = ap[u];
    arm.forearm = ap[u + 1];
    arm.hand = ap[u + 2];
    const std::vector<int>& lp = leg_paths[k];
    const int t = leg_at[k];
    Leg& leg = c.legs[k];
    leg.thigh = lp[t];
    leg.shin = lp[t + 1];
    leg.foot = lp[t + 2];
    leg.toe = t + 3 < static_cast<int>(lp.size()) ? lp[t + 3] : -1;
  }

  // Roles, in order, and how each was decided.
  // A joint whose name allows its role was named; one whose name allows
  // two roles was placed by its neighbours; the rest by the shape.
  auto how_of_name = [&](int joint, Role role) {
    const RoleSet roles = s.names[joint];
    if ((roles & Bit(role)) == 0) return Decided::kShape;
    return (roles & (roles - 1)) != 0 ? Decided::kNameOrder : Decided::kName;
  };
  c.roles.push_back({"pelvis", c.pelvis, how_of_name(c.pelvis, kPelvis)});
  for (size_t i = 0; i < c.spine.size(); ++i) {
    c.roles.push_back({absl::StrCat("spine.", i), c.spine[i],
                       how_of_name(c.spine[i], kSpine)});
  }
  for (size_t i = 0; i < c.neck.size(); ++i) {
    c.roles.push_back(
        {absl::StrCat("neck.", i), c.neck[i], how_of_name(c.neck[i], kNeck)});
  }
  if (c.head >= 0) c.roles.push_back({"head", c.head, head_how});
  for (int k = 0; k < 2; ++k) {
    const Arm& a = c.arms[k];
    const std::string side = SideName(k);
    if (a.clavicle >= 0) {
      c.roles.push_back(
          {side + ".clavicle", a.clavicle, how_of_name(a.clavicle, kClavicle)});
    }
    c.roles.push_back({side + ".upper_arm", a.upper_arm,
                       how_of_name(a.upper_arm, kUpperArm)});
    c.roles.push_back(
        {side + ".forearm", a.forearm, how_of_name(a.forearm, kForearm)});
    c.roles.push_back({side + ".hand", a.hand, how_of_name(a.hand, kHand)});
  }
  for (int k = 0; k < 2; ++k) {
    const Leg& l = c.legs[k];
    const std::string side = SideName(k);
    c.roles.push_back({side + ".thigh", l.thigh, how_of_name(l.thigh, kThigh)});
    c.roles.push_back({side + ".shin", l.shin, how_of_name(l.shin, kShin)});
    c.roles.push_back({side + ".foot", l.foot, how_of_name(l.foot, kFoot)});
    if (l.toe >= 0) {
      c.roles.push_back({side + ".toe", l.toe, how_of_name(l.toe, kToe)});
    }
  }

  // Overrides.
  for (size_t i = 0; i < overrides.size(); ++i) {
    const RoleOverride& o = overrides[i];
    const int joint = skeleton.FindJoint(o.joint);
    if (joint < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "overrides[", i, "].joint: no joint named \"", o.joint, "\""));
    }
    int* slot = nullptr;
    if (o.role == "pelvis") slot = &c.pelvis;
    if (o.role == "head") slot = &c.head;
    for (int k = 0; k < 2 && slot == nullptr; ++k) {
      const std::string side = SideName(k) + ".";
      Arm& a = c.arms[k];
      Leg& l = c.legs[k];
      const std::pair<std::string, int*> named[] = {
          {"clavicle", &a.clavicle}, {"upper_arm", &a.upper_arm},
          {"forearm", &a.forearm},   {"hand", &a.hand},
          {"thigh", &l.thigh},       {"shin", &l.shin},
          {"foot", &l.foot},         {"toe", &l.toe}};
      for (const auto& [name, where] : named) {
        if (o.role == side + name) slot = where;
      }
    }
    if (slot == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "overrides[", i, "].role: \"", o.role,
          "\" is not a single-joint role (pelvis, head, left.|right. + "
          "clavicle, upper_arm, forearm, hand, thigh, shin, foot, toe)"));
    }
    // The joint leaves any role it had.
    for (RoleAssignment& r : c.roles) {
      if (r.joint == joint && r.role != o.role) r.joint = -1;
    }
    auto clear = [&](int& j) {
      if (j == joint) j = -1;
    };
    clear(c.pelvis);
    clear(c.head);
    for (int k = 0; k < 2; ++k) {
      clear(c.arms[k].clavicle), clear(c.arms[k].upper_arm);
      clear(c.arms[k].forearm), clear(c.arms[k].hand);
      clear(c.legs[k].thigh), clear(c.legs[k].shin);
      clear(c.legs[k].foot), clear(c.legs[k].toe);
    }
    c.spine.erase(std::remove(c.spine.begin(), c.spine.end(), joint),
                  c.spine.end());
    c.neck.erase(std::remove(c.neck.begin(), c.neck.end(), joint),
                 c.neck.end());
    *slot = joint;
    bool found = false;
    for (RoleAssignment& r : c.roles) {
      if (r.role == o.role) {
        r.joint = joint;
        r.how = Decided::kOverride;
        found = true;
      }
    }
    if (!found) c.roles.push_back({o.role, joint, Decided::kOverride});
  }
  c.roles.erase(
      std::remove_if(c.roles.begin(), c.roles.end(),
                     [](const RoleAssignment& r) { return r.joint < 0; }),
      c.roles.end());

  std::vector<char> mapped(n, 0);
  for (const RoleAssignment& r : c.roles) mapped[r.joint] = 1;
  for (int k = 0; k < 2; ++k) {
    if (c.arms[k].hand < 0) continue;
    c.fingers[k] = FindFingers(s, c.arms[k].hand, mapped);
    for (const Finger& f : c.fingers[k]) {
      for (size_t i = 0; i < f.joints.size(); ++i) {
        const int j = f.joints[i];
        c.roles.push_back({absl::StrCat(SideName(k), ".", f.name, ".", i), j,
                           f.named ? Decided::kName : Decided::kShape});
        mapped[j] = 1;
      }
    }
  }
  for (int j = 0; j < n; ++j) {
    if (!mapped[j]) c.unmapped.push_back(j);
  }
  return c;
}

std::string RoleOf(const Characterization& c, int joint) {
  for (const RoleAssignment& r : c.roles) {
    if (r.joint == joint) return r.role;
  }
  return "";
}

std::string FormatCharacterization(const Skeleton& skeleton,
                                   const Characterization& c) {
  std::string out;
  for (const RoleAssignment& r : c.roles) {
    absl::StrAppend(&out, r.role, " = ", skeleton.joint(r.joint).name, " (",
                    DecidedName(r.how), ")\n");
  }
  auto vec = [](const Vector3d& v) {
    return absl::StrCat("(", std::round(v.x() * 1000) / 1000, ", ",
                        std::round(v.y() * 1000) / 1000, ", ",
                        std::round(v.z() * 1000) / 1000, ")");
  };
  absl::StrAppend(
      &out, "up ", vec(c.up), ", forward ", vec(c.forward), ", left ",
      vec(c.left), "; sides from ",
      c.sides_from_names ? "names" : "the shape (left = up x forward)", "\n");
  std::vector<std::string> names;
  for (int j : c.unmapped) names.push_back(skeleton.joint(j).name);
  absl::StrAppend(&out, "unmapped (", c.unmapped.size(),
                  "): ", absl::StrJoin(names, " "), "\n");
  for (const std::string& warning : c.warnings) {
    absl::StrAppend(&out, "warning: ", warning, "\n");
  }
  return out;
}

}  // namespace reach
