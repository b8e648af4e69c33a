#include "importers/chains.h"

#include <algorithm>
#include <array>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace reach::import {
namespace {

enum class Side { kNone, kLeft, kRight };

// Which side a lower-cased joint name is on, judged around the limb word
// found at `word_pos`.
Side SideOf(absl::string_view name, size_t word_pos) {
  const auto has_side = [&](char s, absl::string_view word) {
    const std::string sc(1, s);
    if (absl::StrContains(name, word)) return true;
    for (const char* sep : {"_", ".", "-", ":"}) {
      // "l_hand", "cc_base_l_hand", "hand_l", "hand.l", "mixamo:l_hand".
      if (absl::StartsWith(name, absl::StrCat(sc, sep))) return true;
      if (absl::StrContains(name, absl::StrCat(sep, sc, sep))) return true;
      if (absl::EndsWith(name, absl::StrCat(sep, sc))) return true;
    }
    // "lhand", "rfoot": the side letter right before the limb word, at the
    // start of the name or after a separator.
    if (word_pos >= 1 && name[word_pos - 1] == s) {
      return word_pos == 1 || !absl::ascii_isalpha(name[word_pos - 2]);
    }
    return false;
  };
  const bool left = has_side('l', "left");
  const bool right = has_side('r', "right");
  if (left == right) return Side::kNone;
  return left ? Side::kLeft : Side::kRight;
}

int Depth(const SkeletonDef& def, int joint) {
  int depth = 0;
  for (int j = def.joints[joint].parent; j >= 0; j = def.joints[j].parent) {
    ++depth;
  }
  return depth;
}

}  // namespace

std::vector<ChainDef> GuessLimbChains(const SkeletonDef& def) {
  struct Limb {
    const char* chain;
    Side side;
    std::array<absl::string_view, 2> words;
  };
  static constexpr std::array<Limb, 4> kLimbs = {{
      {"left_arm", Side::kLeft, {"hand", "wrist"}},
      {"right_arm", Side::kRight, {"hand", "wrist"}},
      {"left_leg", Side::kLeft, {"foot", "ankle"}},
      {"right_leg", Side::kRight, {"foot", "ankle"}},
  }};
  std::vector<ChainDef> chains;
  const int n = static_cast<int>(def.joints.size());
  for (const Limb& limb : kLimbs) {
    int best = -1;
    int best_depth = 0;
    for (int j = 0; j < n; ++j) {
      const std::string name = absl::AsciiStrToLower(def.joints[j].name);
      for (absl::string_view word : limb.words) {
        const size_t pos = absl::string_view(name).find(word);
        if (pos == absl::string_view::npos || SideOf(name, pos) != limb.side) {
          continue;
        }
        const int depth = Depth(def, j);
        if (best < 0 || depth < best_depth) {
          best = j;
          best_depth = depth;
        }
        break;
      }
    }
    if (best < 0 || best_depth < 2) continue;
    const int mid = def.joints[best].parent;
    const int root = def.joints[mid].parent;
    chains.push_back(ChainDef{limb.chain, def.joints[root].name,
                              def.joints[best].name});
  }
  return chains;
}

absl::StatusOr<ChainDef> ParseChainSpec(absl::string_view spec) {
  const auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "chain '", spec,
        "': expected NAME=ROOT:TIP, or NAME=ROOT,TIP when joint names hold "
        "':'"));
  };
  const size_t eq = spec.find('=');
  if (eq == absl::string_view::npos || eq == 0) return bad();
  const absl::string_view joints = spec.substr(eq + 1);
  size_t split = joints.find(',');
  if (split == absl::string_view::npos) {
    split = joints.find(':');
    if (split == absl::string_view::npos ||
        joints.find(':', split + 1) != absl::string_view::npos) {
      return bad();
    }
  }
  if (split == 0 || split + 1 == joints.size()) return bad();
  return ChainDef{std::string(spec.substr(0, eq)),
                  std::string(joints.substr(0, split)),
                  std::string(joints.substr(split + 1))};
}

void ApplyChainOverrides(const std::vector<ChainDef>& overrides,
                         std::vector<ChainDef>* chains) {
  for (const ChainDef& chain : overrides) {
    auto it = std::find_if(chains->begin(), chains->end(),
                           [&](const ChainDef& c) { return c.name == chain.name; });
    if (it == chains->end()) {
      chains->push_back(chain);
    } else {
      *it = chain;
    }
  }
}

}  // namespace reach::import
