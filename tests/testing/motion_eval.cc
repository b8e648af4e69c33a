#include "tests/testing/motion_eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "importers/bvh.h"
#include "solvers/full_body.h"
#include "solvers/solve.h"
#include "tests/testing/full_body.h"
#include "tests/testing/sweep.h"

namespace reach::testing {
namespace {

using Eigen::Quaterniond;
using Eigen::Vector3d;

constexpr double kDeg = 180.0 / M_PI;
constexpr int kLeft = 0;
constexpr int kRight = 1;

// Angle in [0, pi] between two vectors (0 when either is zero).
double AngleBetween(const Vector3d& a, const Vector3d& b) {
  return std::atan2(a.cross(b).norm(), a.dot(b));
}

// Nearest-rank percentile (p in [0, 1]); 0 for no values.
double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(std::ceil(p * values.size()));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

// True when `ancestor` is `joint` or above it.
bool IsAncestorOrSelf(const Skeleton& skeleton, int ancestor, int joint) {
  for (int j = joint; j >= 0; j = skeleton.joint(j).parent) {
    if (j == ancestor) return true;
  }
  return false;
}

// The lowest common ancestor of a and b (-1 when in different trees).
int LowestCommonAncestor(const Skeleton& skeleton, int a, int b) {
  for (int j = a; j >= 0; j = skeleton.joint(j).parent) {
    if (IsAncestorOrSelf(skeleton, j, b)) return j;
  }
  return -1;
}

// The child of `ancestor` on the path down to `joint` (-1 when `ancestor`
// is not a proper ancestor of it).
int ChildToward(const Skeleton& skeleton, int ancestor, int joint) {
  for (int j = joint; j >= 0; j = skeleton.joint(j).parent) {
    if (skeleton.joint(j).parent == ancestor) return j;
  }
  return -1;
}

std::string Basename(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Metres per clip unit from the performer's height in clip units (the
// header's rule).
double GuessMetresPerUnit(double height, std::string* rule) {
  if (height > 100.0) {
    *rule = "centimetres (height > 100 units)";
    return 0.01;
  }
  if (height >= 15.0) {
    *rule = "CMU units, 1/0.45 inch (15 <= height <= 100 units)";
    return 2.54 / 45.0;
  }
  if (height >= 0.5 && height <= 3.0) {
    *rule = "metres (0.5 <= height <= 3 units)";
    return 1.0;
  }
  *rule = "unknown unit: a 1.7 m performer assumed";
  return 1.7 / height;
}

double Height(const UpAxis& up, const Vector3d& p) { return up.dir.dot(p); }

Vector3d OnFloor(const UpAxis& up, const Vector3d& p) {
  return p - up.dir.dot(p) * up.dir;
}

// The bend of a limb: mid minus its projection on the root -> tip line.
Vector3d Bend(const Vector3d& root, const Vector3d& mid, const Vector3d& tip) {
  const Vector3d line = tip - root;
  const Vector3d b = mid - root;
  const double len2 = line.squaredNorm();
  if (len2 <= 0.0) return b;
  return b - (b.dot(line) / len2) * line;
}

struct Effector {
  int joint;
  int priority;
  int foot_side;  // kLeft / kRight for a foot, -1 otherwise.
};

}  // namespace

std::string ModeName(const MotionEvalOptions& options) {
  if (options.trackers) return options.thirty_hz ? "trackers-30hz" : "trackers";
  if (options.sparse) return options.thirty_hz ? "sparse-30hz" : "sparse";
  return absl::StrCat(options.thirty_hz ? "30hz" : "clip",
                      options.orientation ? "" : "-noorient");
}

std::optional<MotionEvalOptions> ModeOptions(const std::string& name) {
  MotionEvalOptions o;
  if (name == "clip") return o;
  if (name == "30hz") {
    o.thirty_hz = true;
    return o;
  }
  if (name == "clip-noorient" || name == "noorient") {
    o.orientation = false;
    return o;
  }
  if (name == "30hz-noorient") {
    o.thirty_hz = true;
    o.orientation = false;
    return o;
  }
  if (name == "sparse" || name == "sparse-30hz") {
    o.sparse = true;
    o.thirty_hz = name == "sparse-30hz";
    return o;
  }
  if (name == "trackers" || name == "trackers-30hz") {
    o.trackers = true;
    o.thirty_hz = name == "trackers-30hz";
    o.solver.plant_feet = true;
    return o;
  }
  return std::nullopt;
}

std::vector<std::string> AllModeNames() {
  return {"clip", "30hz", "clip-noorient", "30hz-noorient", "sparse",
          "trackers"};
}

int FindHeadJoint(const Skeleton& skeleton) {
  for (int j = 0; j < skeleton.num_joints(); ++j) {
    const std::string name = absl::AsciiStrToLower(skeleton.joint(j).name);
    if (absl::EndsWith(name, "head")) return j;
  }
  return -1;
}

UpAxis DeriveUpAxis(const Skeleton& skeleton, int head) {
  const IndependentGlobals rest = IndependentFk(skeleton, RestPose(skeleton));
  const int root = 0;
  const Vector3d d = rest.position[head] - rest.position[root];
  UpAxis up;
  int index = 0;
  d.cwiseAbs().maxCoeff(&index);
  up.index = index;
  up.sign = d[index] < 0.0 ? -1.0 : 1.0;
  up.dir = Vector3d::Zero();
  up.dir[index] = up.sign;
  return up;
}

// Whether `pose` stands: both leg chains' tips (the feet) below the root
// along the axis from the root to the head.
bool Stands(const Skeleton& skeleton, const Pose& pose) {
  const int head = FindHeadJoint(skeleton);
  if (head < 0) return false;
  const IndependentGlobals g = IndependentFk(skeleton, pose);
  const Vector3d trunk = g.position[head] - g.position[0];
  int index = 0;
  trunk.cwiseAbs().maxCoeff(&index);
  const double sign = trunk[index] < 0.0 ? -1.0 : 1.0;
  for (const char* leg : {"left_leg", "right_leg"}) {
    const int c = skeleton.FindChain(leg);
    if (c < 0 || skeleton.chain(c).joints.empty()) return false;
    const int tip = skeleton.chain(c).joints.back();
    if (!(sign * (g.position[tip][index] - g.position[0][index]) < 0.0)) {
      return false;
    }
  }
  return true;
}

absl::StatusOr<BodyRoles> FindBodyRoles(const Skeleton& skeleton) {
  BodyRoles roles;
  const int n = skeleton.num_joints();
  const double size = BodySize(skeleton);
  const double zero = 1e-9 * size;
  roles.pelvis = 0;
  roles.head = FindHeadJoint(skeleton);
  if (roles.head < 0) {
    return absl::NotFoundError("no joint whose name ends in \"head\"");
  }
  roles.up = DeriveUpAxis(skeleton, roles.head);

  // Limbs: socket/shoulder (past zero-length helpers), mid, tip.
  const char* kChains[2][2] = {{"left_leg", "right_leg"},
                               {"left_arm", "right_arm"}};
  std::array<std::array<int, 2>, 2> chain_root{};
  std::vector<char> on_chain(n, 0);
  for (int limb = 0; limb < 2; ++limb) {
    for (int side = 0; side < 2; ++side) {
      const int c = skeleton.FindChain(kChains[limb][side]);
      if (c < 0) {
        return absl::NotFoundError(
            absl::StrCat("no chain ", kChains[limb][side]));
      }
      const std::vector<int>& joints = skeleton.chain(c).joints;
      if (joints.size() < 3) {
        return absl::FailedPreconditionError(
            absl::StrCat("chain ", kChains[limb][side], " has < 3 joints"));
      }
      for (int j : joints) on_chain[j] = 1;
      const size_t mid = joints.size() - 2;
      size_t root = 0;
      while (root + 1 < mid &&
             skeleton.joint(joints[root]).rest.translation.norm() <= zero) {
        ++root;
      }
      std::array<int, 3>& out = limb == 0 ? roles.legs[side] : roles.arms[side];
      out = {joints[root], joints[mid], joints.back()};
      chain_root[limb][side] = joints.front();
    }
  }

  // Chest: where the arms branch; neck base: its child toward the head.
  roles.chest =
      LowestCommonAncestor(skeleton, chain_root[1][kLeft], chain_root[1][kRight]);
  if (roles.chest < 0) return absl::NotFoundError("the arms share no ancestor");
  roles.neck_base = ChildToward(skeleton, roles.chest, roles.head);
  if (roles.neck_base < 0) roles.neck_base = roles.head;
  roles.leg_branch =
      LowestCommonAncestor(skeleton, chain_root[0][kLeft], chain_root[0][kRight]);
  if (roles.leg_branch < 0) {
    return absl::NotFoundError("the legs share no ancestor");
  }

  // Regions.
  roles.region.assign(n, 1);
  for (int side = 0; side < 2; ++side) {
    const int leg = ChildToward(skeleton, roles.leg_branch, chain_root[0][side]);
    const int arm = ChildToward(skeleton, roles.chest, chain_root[1][side]);
    for (int j = 0; j < n; ++j) {
      if (leg >= 0 && IsAncestorOrSelf(skeleton, leg, j)) roles.region[j] = 0;
      if (arm >= 0 && IsAncestorOrSelf(skeleton, arm, j)) {
        roles.region[j] = side == kLeft ? 2 : 3;
      }
    }
  }

  // Spine and clavicles by name.
  for (int j = 0; j < n; ++j) {
    const std::string name = absl::AsciiStrToLower(skeleton.joint(j).name);
    if (on_chain[j] || absl::StrContains(name, "arm")) continue;
    for (const char* word :
         {"spine", "back", "chest", "waist", "clavicle", "collar", "shoulder"}) {
      if (absl::StrContains(name, word)) {
        roles.spine_joints.push_back(j);
        break;
      }
    }
  }

  // End Sites and MPJPE joints.
  std::vector<int> children(n, 0);
  for (int j = 0; j < n; ++j) {
    if (skeleton.joint(j).parent >= 0) ++children[skeleton.joint(j).parent];
  }
  roles.end_site.assign(n, 0);
  roles.mpjpe_joint.assign(n, 1);
  for (int j = 0; j < n; ++j) {
    const Joint& joint = skeleton.joint(j);
    if (children[j] == 0 &&
        ((joint.type == JointType::kFixed && absl::EndsWith(joint.name, "_End")) ||
         joint.rest.translation.norm() <= zero)) {
      roles.end_site[j] = 1;
      roles.mpjpe_joint[j] = 0;
    }
    for (int side = 0; side < 2; ++side) {
      for (int tip : {roles.legs[side][2], roles.arms[side][2]}) {
        if (j != tip && IsAncestorOrSelf(skeleton, tip, j)) {
          roles.mpjpe_joint[j] = 0;
        }
      }
    }
  }
  return roles;
}

absl::StatusOr<MotionReport> EvaluateClip(const std::string& bvh_path,
                                          const MotionEvalOptions& options) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point wall_start = Clock::now();
  absl::StatusOr<import::BvhClip> clip = import::ImportBvh(bvh_path);
  if (!clip.ok()) return clip.status();
  absl::StatusOr<Skeleton> made = Skeleton::Create(clip->skeleton.def);
  if (!made.ok()) return made.status();
  int rest_frame = -1;
  // MotionEvalOptions::standing_rest.
  if (options.standing_rest && !Stands(*made, RestPose(*made))) {
    Pose first;
    clip->FramePose(0, &first);
    if (Stands(*made, first)) {
      if (absl::Status s = clip->UseFrameAsRest(0); !s.ok()) return s;
      made = Skeleton::Create(clip->skeleton.def);
      if (!made.ok()) return made.status();
      rest_frame = 0;
    }
  }
  const Skeleton& skeleton = *made;
  absl::StatusOr<BodyRoles> found = FindBodyRoles(skeleton);
  if (!found.ok()) {
    return absl::Status(found.status().code(),
                        absl::StrCat(bvh_path, ": ", found.status().message()));
  }
  const BodyRoles& roles = *found;
  const UpAxis& up = roles.up;
  const int n = skeleton.num_joints();

  MotionReport report;
  report.clip = Basename(bvh_path);
  report.mode = ModeName(options);
  report.height_units = BodySize(skeleton);
  const double h = report.height_units;
  std::string unit_rule = "given";
  report.metres_per_unit = options.metres_per_unit > 0.0
                               ? options.metres_per_unit
                               : GuessMetresPerUnit(h, &unit_rule);
  const double cm = 100.0 * report.metres_per_unit;  // cm per clip unit.
  if (!(clip->frame_time > 0.0)) {
    return absl::InvalidArgumentError(absl::StrCat(bvh_path, ": no frame time"));
  }
  report.clip_fps = 1.0 / clip->frame_time;
  report.step = options.thirty_hz
                    ? std::max(1, static_cast<int>(std::lround(report.clip_fps / 30.0)))
                    : 1;
  report.fps = report.clip_fps / report.step;
  const double fps = report.fps;
  const int first = std::max(0, options.first_frame);
  int last = clip->num_frames - 1;
  if (options.last_frame >= 0) last = std::min(last, options.last_frame);
  if (first > last) {
    return absl::InvalidArgumentError(absl::StrCat(
        bvh_path, ": no frames from ", first, " to ", last));
  }
  std::vector<int> frame_list;
  for (int f = first; f <= last; f += report.step) frame_list.push_back(f);
  const int frames = static_cast<int>(frame_list.size());
  report.frames = frames;

  auto name = [&](int j) { return skeleton.joint(j).name; };
  report.notes.push_back(absl::StrCat(
      "pelvis ", name(roles.pelvis), ", hips ", name(roles.legs[0][0]), "/",
      name(roles.legs[1][0]), ", knees ", name(roles.legs[0][1]), "/",
      name(roles.legs[1][1]), ", feet ", name(roles.legs[0][2]), "/",
      name(roles.legs[1][2]), ", shoulders ", name(roles.arms[0][0]), "/",
      name(roles.arms[1][0]), ", elbows ", name(roles.arms[0][1]), "/",
      name(roles.arms[1][1]), ", hands ", name(roles.arms[0][2]), "/",
      name(roles.arms[1][2]), ", chest ", name(roles.chest), ", neck base ",
      name(roles.neck_base), ", head ", name(roles.head)));
  {
    std::vector<std::string> spine;
    for (int j : roles.spine_joints) spine.push_back(name(j));
    int mpjpe = 0;
    for (char c : roles.mpjpe_joint) mpjpe += c;
    report.notes.push_back(absl::StrCat(
        "spine/clavicles ", absl::StrJoin(spine, ","), "; up ",
        up.sign > 0 ? "+" : "-", std::string(1, "XYZ"[up.index]),
        "; height ", absl::StrFormat("%.4g", h), " units = ",
        absl::StrFormat("%.3f", h * report.metres_per_unit), " m (", unit_rule,
        "); MPJPE over ", mpjpe, " of ", n, " joints",
        rest_frame >= 0 ? absl::StrCat("; rest pose from frame ", rest_frame,
                                       " (the all-zero pose does not stand)")
                        : ""));
  }

  // The rest pose's bone lengths and hip-socket distance.
  const IndependentGlobals rest = IndependentFk(skeleton, RestPose(skeleton));
  std::vector<double> rest_bone(n, 0.0);
  for (int j = 0; j < n; ++j) {
    const int p = skeleton.joint(j).parent;
    if (p >= 0 && skeleton.joint(j).rest.translation.norm() > 1e-9 * h) {
      rest_bone[j] = (rest.position[j] - rest.position[p]).norm();
    }
  }
  const double rest_hips =
      (rest.position[roles.legs[0][0]] - rest.position[roles.legs[1][0]]).norm();

  // Feet over the whole clip (from the first frame): the floor, and the
  // frames each foot is planted (at the clip's rate).
  Pose source;
  const int clip_frames = clip->num_frames;
  std::vector<std::array<Vector3d, 2>> foot(clip_frames);
  double floor = kInf;
  for (int f = first; f < clip_frames; ++f) {
    clip->FramePose(f, &source);
    const IndependentGlobals g = IndependentFk(skeleton, source);
    for (int s = 0; s < 2; ++s) {
      foot[f][s] = g.position[roles.legs[s][2]];
      floor = std::min(floor, Height(up, foot[f][s]));
    }
  }
  std::vector<std::array<bool, 2>> planted(clip_frames, {false, false});
  for (int f = first; f < clip_frames; ++f) {
    for (int s = 0; s < 2; ++s) {
      double speed = 0.0;
      if (f > first) {
        speed = (foot[f][s] - foot[f - 1][s]).norm() * report.clip_fps;
      } else if (f + 1 < clip_frames) {
        speed = (foot[f + 1][s] - foot[f][s]).norm() * report.clip_fps;
      }
      planted[f][s] = Height(up, foot[f][s]) - floor < 0.05 * h && speed < 0.5 * h;
    }
  }

  const std::vector<Effector> effectors = {
      {roles.legs[kLeft][2], 0, kLeft},
      {roles.legs[kRight][2], 0, kRight},
      {roles.arms[kLeft][2], 1, -1},
      {roles.arms[kRight][2], 1, -1},
      {roles.head, 1, -1},
  };
  const double tolerance = 1e-4 * h;
  FullBodyOptions solver = options.solver;
  solver.max_iterations = options.max_iterations;

  // Per evaluated frame: both bodies' positions, and the spine joints'
  // local rotations.
  std::vector<std::vector<Vector3d>> want_pos(frames), got_pos(frames);
  const size_t ns = roles.spine_joints.size();
  std::vector<std::vector<Quaterniond>> want_spine(frames), got_spine(frames);

  std::vector<double> position_errors, angle_errors;
  double pelvis_sum = 0.0, trunk_sum = 0.0, mpjpe_sum = 0.0;
  std::vector<double> mpjpe_joint_sum(n, 0.0);  // Per joint, cm.
  double cold_iterations = 0.0;
  long iterations = 0;
  double solve_seconds = 0.0;
  Pose pose = RestPose(skeleton);
  Pose cold;
  Workspace ws, cold_ws;
  std::vector<Goal> goals;
  std::vector<int> goal_effector;
  std::vector<GoalResult> results, cold_results;

  for (int i = 0; i < frames; ++i) {
    const int f = frame_list[i];
    clip->FramePose(f, &source);
    const IndependentGlobals want = IndependentFk(skeleton, source);
    goals.clear();
    goal_effector.clear();
    for (size_t k = 0; k < effectors.size(); ++k) {
      const Effector& e = effectors[k];
      if (options.sparse && e.foot_side >= 0 && !planted[f][e.foot_side]) continue;
      if (options.trackers && e.foot_side >= 0 && i > 0) continue;
      if (options.trackers && e.foot_side >= 0 && i == 0 &&
          options.tracker_floor) {
        // The session's calibration: the floor, where the feet stand on
        // the first frame (the lower one).
        const double h0 = Height(up, want.position[e.joint]);
        solver.plant_height = std::isnan(solver.plant_height)
                                  ? h0
                                  : std::min(solver.plant_height, h0);
      }
      Goal g = FullBodyGoal(e.joint, want.position[e.joint], e.priority);
      g.options.tolerance = tolerance;
      if (options.orientation || options.sparse || options.trackers) {
        g.target_orientation = want.rotation[e.joint];
      }
      if (options.sparse && e.foot_side >= 0) ++report.planted_frames[e.foot_side];
      goals.push_back(g);
      goal_effector.push_back(static_cast<int>(k));
    }
    results.assign(goals.size(), GoalResult());
    const Clock::time_point t0 = Clock::now();
    const absl::Status status = Solve(skeleton, goals, ws, &pose,
                                      absl::MakeSpan(results), {}, {}, solver);
    solve_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    if (!status.ok()) {
      if (report.solve_errors == 0) {
        report.notes.push_back(absl::StrCat("frame ", f, ": ", status.ToString()));
      }
      ++report.solve_errors;
    }
    int frame_iterations = 0;
    for (const GoalResult& r : results) {
      frame_iterations = std::max(frame_iterations, r.iterations);
    }
    iterations += frame_iterations;
    const IndependentGlobals got = IndependentFk(skeleton, pose);

    // 1. Effectors.
    for (size_t k = 0; k < goals.size(); ++k) {
      const int j = goals[k].tip_joint;
      position_errors.push_back((got.position[j] - goals[k].target).norm() * cm);
      if (goals[k].target_orientation) {
        report.orientation_used = true;
        angle_errors.push_back(
            got.rotation[j].angularDistance(*goals[k].target_orientation) * kDeg);
      }
      if (!results[k].reached) ++report.unreached;
    }
    report.goals += static_cast<int>(goals.size());  // Goal-frames.

    // 2. Pelvis height.
    const double pelvis_err =
        std::abs(Height(up, got.position[roles.pelvis]) -
                 Height(up, want.position[roles.pelvis])) * cm;
    if (pelvis_err > report.pelvis_height_max_cm || i == 0) {
      report.pelvis_height_max_cm = pelvis_err;
      report.pelvis_height_worst_frame = f;
    }
    pelvis_sum += pelvis_err;
    if (planted[f][kLeft] || planted[f][kRight]) {
      const double got_low =
          std::min(Height(up, got.position[roles.legs[kLeft][2]]),
                   Height(up, got.position[roles.legs[kRight][2]]));
      const double want_low =
          std::min(Height(up, want.position[roles.legs[kLeft][2]]),
                   Height(up, want.position[roles.legs[kRight][2]]));
      report.stand_height_max_cm =
          std::max(report.stand_height_max_cm, (got_low - want_low) * cm);
    }

    // 3. Hip-line heading.
    const Vector3d want_hips = OnFloor(
        up, want.position[roles.legs[kLeft][0]] - want.position[roles.legs[kRight][0]]);
    const Vector3d got_hips = OnFloor(
        up, got.position[roles.legs[kLeft][0]] - got.position[roles.legs[kRight][0]]);
    if (want_hips.norm() > 1e-9 * h && got_hips.norm() > 1e-9 * h) {
      const double heading =
          std::abs(std::atan2(want_hips.cross(got_hips).dot(up.dir),
                              want_hips.dot(got_hips))) * kDeg;
      if (heading > report.heading_max_deg || report.heading_worst_frame < 0) {
        report.heading_max_deg = heading;
        report.heading_worst_frame = f;
      }
      if (heading > 45.0) ++report.heading_over_45;
    }

    // 4. Trunk.
    if (Height(up, got.position[roles.chest]) < Height(up, got.position[roles.pelvis])) {
      ++report.chest_below_pelvis;
    }
    if (Height(up, want.position[roles.chest]) <
        Height(up, want.position[roles.pelvis])) {
      ++report.performer_chest_below_pelvis;
    }
    const double trunk =
        AngleBetween(want.position[roles.neck_base] - want.position[roles.pelvis],
                     got.position[roles.neck_base] - got.position[roles.pelvis]) * kDeg;
    if (trunk > report.trunk_max_deg || i == 0) {
      report.trunk_max_deg = trunk;
      report.trunk_worst_frame = f;
    }
    trunk_sum += trunk;

    // 5. Flips.
    for (int limb = 0; limb < 2; ++limb) {
      for (int s = 0; s < 2; ++s) {
        const std::array<int, 3>& l = limb == 0 ? roles.legs[s] : roles.arms[s];
        const Vector3d wb = Bend(want.position[l[0]], want.position[l[1]],
                                 want.position[l[2]]);
        const Vector3d gb = Bend(got.position[l[0]], got.position[l[1]],
                                 got.position[l[2]]);
        const double upper = (want.position[l[1]] - want.position[l[0]]).norm();
        if (wb.norm() > 0.05 * upper && gb.dot(wb) <= 0.0) {
          ++(limb == 0 ? report.knee_flips[s] : report.elbow_flips[s]);
          ++report.flips;
          if (report.first_flip_frame < 0) report.first_flip_frame = f;
        }
      }
    }

    // 6. Fixed offsets.
    if (rest_hips > 0.0) {
      const double d =
          (got.position[roles.legs[kLeft][0]] - got.position[roles.legs[kRight][0]]).norm();
      report.hip_socket_change =
          std::max(report.hip_socket_change, std::abs(d / rest_hips - 1.0));
    }
    for (int j = 0; j < n; ++j) {
      if (rest_bone[j] <= 0.0) continue;
      const int p = skeleton.joint(j).parent;
      const double d = (got.position[j] - got.position[p]).norm();
      report.bone_length_change =
          std::max(report.bone_length_change, std::abs(d / rest_bone[j] - 1.0));
    }

    // 10. MPJPE.
    {
      double sum = 0.0;
      int count = 0;
      for (int j = 0; j < n; ++j) {
        if (!roles.mpjpe_joint[j]) continue;
        const double d = (got.position[j] - want.position[j]).norm();
        sum += d;
        mpjpe_joint_sum[j] += d * cm;
        ++count;
      }
      const double mean = count > 0 ? sum / count * cm : 0.0;
      mpjpe_sum += mean;
      if (mean > report.mpjpe_max_frame_cm || i == 0) {
        report.mpjpe_max_frame_cm = mean;
        report.mpjpe_worst_frame = f;
      }
    }

    // Cold from rest.
    if (options.cold_every > 0 && i % options.cold_every == 0) {
      cold = RestPose(skeleton);
      cold_results.assign(goals.size(), GoalResult());
      if (Solve(skeleton, goals, cold_ws, &cold, absl::MakeSpan(cold_results),
                {}, {}, solver)
              .ok()) {
        const IndependentGlobals c = IndependentFk(skeleton, cold);
        double worst = 0.0, sum = 0.0;
        int count = 0;
        for (int j = 0; j < n; ++j) {
          if (!roles.mpjpe_joint[j]) continue;
          const double d = (c.position[j] - got.position[j]).norm() * cm;
          worst = std::max(worst, d);
          sum += d;
          ++count;
        }
        report.warm_cold_max_cm = std::max(report.warm_cold_max_cm, worst);
        if (count > 0) {
          report.warm_cold_mean_cm = std::max(report.warm_cold_mean_cm, sum / count);
        }
        int it = 0;
        for (const GoalResult& r : cold_results) it = std::max(it, r.iterations);
        cold_iterations += it;
        ++report.cold_frames;
      }
    }

    want_pos[i] = want.position;
    got_pos[i] = got.position;
    want_spine[i].resize(ns);
    got_spine[i].resize(ns);
    for (size_t k = 0; k < ns; ++k) {
      want_spine[i][k] = source.local[roles.spine_joints[k]].rotation;
      got_spine[i][k] = pose.local[roles.spine_joints[k]].rotation;
    }

    if (options.last_frame >= 0 && i == frames - 1) {
      MotionSnapshot snap;
      snap.frame = f;
      snap.up = up;
      snap.floor_height = floor;
      snap.performer = want.position;
      snap.solved = got.position;
      for (int j = 0; j < n; ++j) {
        snap.parent.push_back(skeleton.joint(j).parent);
        snap.drawn.push_back(skeleton.joint(j).parent >= 0 && rest_bone[j] > 0.0);
      }
      for (const Goal& g : goals) snap.effectors.push_back(g.tip_joint);
      report.snapshot = std::move(snap);
    }
  }

  // 1. Percentiles.
  report.effector_p99_cm = Percentile(position_errors, 0.99);
  for (double e : position_errors) {
    report.effector_max_cm = std::max(report.effector_max_cm, e);
  }
  report.orientation_p99_deg = Percentile(angle_errors, 0.99);
  for (double e : angle_errors) {
    report.orientation_max_deg = std::max(report.orientation_max_deg, e);
  }
  report.pelvis_height_mean_cm = pelvis_sum / frames;
  report.trunk_mean_deg = trunk_sum / frames;
  report.mpjpe_cm = mpjpe_sum / frames;
  report.iterations_mean = static_cast<double>(iterations) / frames;
  report.solve_us_mean = solve_seconds * 1e6 / frames;
  if (report.cold_frames > 0) {
    report.cold_iterations_mean = cold_iterations / report.cold_frames;
  }

  // 7. Jitter.
  {
    const double fps3 = fps * fps * fps;
    const double still = 1e-9 * h * fps3;
    double sum_want = 0.0, sum_got = 0.0;
    for (int j = 0; j < n; ++j) {
      double jw = 0.0, jg = 0.0;
      int count = 0;
      for (int i = 3; i < frames; ++i) {
        auto third = [&](const std::vector<std::vector<Vector3d>>& p) {
          return (p[i][j] - 3.0 * p[i - 1][j] + 3.0 * p[i - 2][j] - p[i - 3][j]).norm();
        };
        jw += third(want_pos);
        jg += third(got_pos);
        ++count;
      }
      if (count == 0) continue;
      jw = jw / count * fps3;
      jg = jg / count * fps3;
      sum_want += jw;
      sum_got += jg;
      if (jw < still) {
        if (jg >= still) ++report.still_joints_moved;
        continue;
      }
      if (jg / jw > report.jitter_ratio_worst) {
        report.jitter_ratio_worst = jg / jw;
        report.jitter_worst_joint = name(j);
      }
    }
    report.jitter_ratio_all = sum_want > 0.0 ? sum_got / sum_want : 0.0;
  }

  // 8. Spine and clavicle angular speed.
  if (frames > 1) {
    bool any = false;
    for (size_t k = 0; k < ns; ++k) {
      double sw = 0.0, sg = 0.0;
      for (int i = 1; i < frames; ++i) {
        sw += want_spine[i][k].angularDistance(want_spine[i - 1][k]);
        sg += got_spine[i][k].angularDistance(got_spine[i - 1][k]);
      }
      sw = sw / (frames - 1) * fps * kDeg;
      sg = sg / (frames - 1) * fps * kDeg;
      const double excess = sg - 1.5 * sw;
      if (!any || excess > report.spine_excess_deg_s) {
        any = true;
        report.spine_excess_deg_s = excess;
        report.spine_excess_joint = name(roles.spine_joints[k]);
        report.spine_solved_deg_s = sg;
        report.spine_performer_deg_s = sw;
      }
    }
  }

  // 9. Per-frame steps by region.
  {
    std::array<double, 4> want_max{}, got_max{};
    std::array<int, 4> got_joint = {-1, -1, -1, -1};
    for (int j = 0; j < n; ++j) {
      const int r = roles.region[j];
      for (int i = 1; i < frames; ++i) {
        want_max[r] = std::max(want_max[r], (want_pos[i][j] - want_pos[i - 1][j]).norm());
        const double g = (got_pos[i][j] - got_pos[i - 1][j]).norm();
        if (g > got_max[r]) {
          got_max[r] = g;
          got_joint[r] = j;
        }
      }
    }
    for (int r = 0; r < 4; ++r) {
      report.region_step_ratio[r] = want_max[r] > 0.0 ? got_max[r] / want_max[r] : 0.0;
      if (report.region_step_ratio[r] > report.region_step_worst ||
          report.region_step_worst_region.empty()) {
        report.region_step_worst = report.region_step_ratio[r];
        report.region_step_worst_region = kRegionNames[r];
        report.region_step_worst_joint = got_joint[r] >= 0 ? name(got_joint[r]) : "";
      }
    }
  }

  {
    // Where the MPJPE comes from: the joints furthest from the
    // performer's on average.
    std::vector<int> order;
    for (int j = 0; j < n; ++j) {
      if (roles.mpjpe_joint[j]) order.push_back(j);
    }
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      return mpjpe_joint_sum[a] > mpjpe_joint_sum[b];
    });
    std::string worst = "MPJPE by joint (cm):";
    for (size_t k = 0; k < order.size() && k < 8; ++k) {
      absl::StrAppendFormat(&worst, " %s %.1f", name(order[k]),
                            mpjpe_joint_sum[order[k]] / frames);
    }
    report.notes.push_back(worst);
    // The spine and clavicle joints' local rotations: how far the
    // performer's are from the rest pose's on average, and the solve's
    // from the performer's (drift a goal does not see shows here).
    std::string spine =
        "spine/clavicle local rotation, mean deg from rest / solve off:";
    for (size_t k = 0; k < ns; ++k) {
      const Quaterniond rest =
          skeleton.joint(roles.spine_joints[k]).rest.rotation;
      double from_rest = 0.0, off = 0.0;
      for (int i = 0; i < frames; ++i) {
        from_rest += want_spine[i][k].angularDistance(rest);
        off += got_spine[i][k].angularDistance(want_spine[i][k]);
      }
      absl::StrAppendFormat(&spine, " %s %.1f/%.1f",
                            name(roles.spine_joints[k]),
                            from_rest / frames * kDeg, off / frames * kDeg);
    }
    report.notes.push_back(spine);
  }
  if (options.sparse) {
    report.notes.push_back(absl::StrCat(
        "planted frames L/R ", report.planted_frames[0], "/",
        report.planted_frames[1], " of ", frames, " (floor ",
        absl::StrFormat("%.2f", floor * cm), " cm)"));
  }
  report.wall_seconds =
      std::chrono::duration<double>(Clock::now() - wall_start).count();
  return report;
}

std::string FormatReport(const MotionReport& r) {
  std::string line = absl::StrFormat(
      "%s %s: %d frames @ %.0f Hz; effector p99/max %.3f/%.3f mm",
      r.clip, r.mode, r.frames, r.fps, r.effector_p99_cm * 10,
      r.effector_max_cm * 10);
  if (r.orientation_used) {
    absl::StrAppendFormat(&line, ", %.4f/%.4f deg", r.orientation_p99_deg,
                          r.orientation_max_deg);
  }
  absl::StrAppendFormat(
      &line,
      " (%d unreached); pelvis height err max/mean %.2f/%.2f cm (worst "
      "frame %d); heading max %.1f deg (frame %d; %d > 45); chest below "
      "pelvis %d (performer %d); trunk max/mean %.1f/%.1f deg (frame %d); "
      "flips knee %d/%d elbow %d/%d (first frame %d); hip sockets %.2g%%, "
      "bones %.2g%%; jitter all/worst %.2f/%.2f (%s), still moved %d; spine "
      "excess %.1f deg/s (%s: %.1f vs %.1f); step ratio %.2f (%s, %s) [legs "
      "%.2f spine %.2f arms %.2f/%.2f]; MPJPE %.2f cm (worst frame %d: %.2f); "
      "warm-cold max %.2f cm, mean %.2f cm (%d, %.1f it); %.2f it, "
      "%.1f us/frame; lower foot above the performer's while one stands "
      "%.2f cm",
      r.unreached, r.pelvis_height_max_cm, r.pelvis_height_mean_cm,
      r.pelvis_height_worst_frame, r.heading_max_deg, r.heading_worst_frame,
      r.heading_over_45, r.chest_below_pelvis, r.performer_chest_below_pelvis,
      r.trunk_max_deg, r.trunk_mean_deg, r.trunk_worst_frame, r.knee_flips[0],
      r.knee_flips[1], r.elbow_flips[0], r.elbow_flips[1], r.first_flip_frame,
      r.hip_socket_change * 100, r.bone_length_change * 100, r.jitter_ratio_all,
      r.jitter_ratio_worst, r.jitter_worst_joint, r.still_joints_moved,
      r.spine_excess_deg_s, r.spine_excess_joint, r.spine_solved_deg_s,
      r.spine_performer_deg_s, r.region_step_worst, r.region_step_worst_region,
      r.region_step_worst_joint, r.region_step_ratio[0], r.region_step_ratio[1],
      r.region_step_ratio[2], r.region_step_ratio[3], r.mpjpe_cm,
      r.mpjpe_worst_frame, r.mpjpe_max_frame_cm, r.warm_cold_max_cm, r.warm_cold_mean_cm,
      r.cold_frames, r.cold_iterations_mean, r.iterations_mean,
      r.solve_us_mean, r.stand_height_max_cm);
  if (r.solve_errors > 0) {
    absl::StrAppendFormat(&line, "; %d SOLVE ERRORS", r.solve_errors);
  }
  return absl::StrCat(line, "\n  ", absl::StrJoin(r.notes, "\n  "));
}

std::string MarkdownHeader() {
  return "| clip | mode | frames | eff p99/max mm | ori p99/max deg | pelvis h "
         "err max/mean cm | heading max deg (>45) | chest<pelvis | trunk "
         "max/mean deg | flips knee/elbow | hip-socket % | jitter all/worst | "
         "spine excess deg/s | step ratio (region) | MPJPE cm | warm-cold cm "
         "| iters | us/frame |\n"
         "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:"
         "|---:|---:|---:|---:|";
}

std::string MarkdownRow(const MotionReport& r) {
  const std::string orientation =
      r.orientation_used ? absl::StrFormat("%.3f/%.3f", r.orientation_p99_deg,
                                           r.orientation_max_deg)
                         : "-";
  std::string clip = r.clip;
  if (absl::EndsWith(clip, ".bvh")) clip.resize(clip.size() - 4);
  return absl::StrFormat(
      "| %s | %s | %d | %.3f/%.3f | %s | %.2f/%.2f | %.1f (%d) | %d | "
      "%.1f/%.1f | %d/%d | %.2g | %.2f/%.2f | %.1f | %.2f (%s) | %.2f | %.2f "
      "| %.2f | %.0f |%s",
      clip, r.mode, r.frames, r.effector_p99_cm * 10, r.effector_max_cm * 10,
      orientation, r.pelvis_height_max_cm, r.pelvis_height_mean_cm,
      r.heading_max_deg, r.heading_over_45, r.chest_below_pelvis,
      r.trunk_max_deg, r.trunk_mean_deg, r.knee_flips[0] + r.knee_flips[1],
      r.elbow_flips[0] + r.elbow_flips[1], r.hip_socket_change * 100,
      r.jitter_ratio_all, r.jitter_ratio_worst, r.spine_excess_deg_s,
      r.region_step_worst, r.region_step_worst_region, r.mpjpe_cm,
      r.warm_cold_max_cm, r.iterations_mean, r.solve_us_mean,
      r.solve_errors > 0 ? absl::StrCat(" ", r.solve_errors, " solve errors")
                         : std::string());
}

std::string SnapshotSvg(const MotionReport& report) {
  if (!report.snapshot) return "";
  const MotionSnapshot& s = *report.snapshot;
  const int n = static_cast<int>(s.parent.size());
  // Screen axes of each view: horizontal model axis, vertical = up.
  int others[2];
  for (int a = 0, k = 0; a < 3; ++a) {
    if (a != s.up.index) others[k++] = a;
  }
  const char kAxis[] = "XYZ";
  constexpr double kWidth = 1200, kHeight = 700, kPanel = 560, kTop = 80;
  // One scale for both views: the larger extent of either body.
  double lo_v = s.floor_height * s.up.sign, hi_v = lo_v;
  std::array<double, 2> lo_h{kInf, kInf}, hi_h{-kInf, -kInf};
  for (const std::vector<Vector3d>* body : {&s.performer, &s.solved}) {
    for (const Vector3d& p : *body) {
      const double v = p[s.up.index] * s.up.sign;
      lo_v = std::min(lo_v, v);
      hi_v = std::max(hi_v, v);
      for (int k = 0; k < 2; ++k) {
        lo_h[k] = std::min(lo_h[k], p[others[k]]);
        hi_h[k] = std::max(hi_h[k], p[others[k]]);
      }
    }
  }
  const double extent =
      std::max({hi_v - lo_v, hi_h[0] - lo_h[0], hi_h[1] - lo_h[1], 1e-9});
  const double scale = 0.85 * std::min(kPanel, kHeight - kTop - 40) / extent;
  const double mid_v = 0.5 * (lo_v + hi_v);
  auto x_of = [&](int view, const Vector3d& p) {
    const double centre = 0.5 * (lo_h[view] + hi_h[view]);
    return 40 + view * (kPanel + 40) + kPanel / 2 + (p[others[view]] - centre) * scale;
  };
  auto y_of = [&](double v) {
    return kTop + (kHeight - kTop) / 2 - (v - mid_v) * scale;
  };
  auto up_of = [&](const Vector3d& p) { return p[s.up.index] * s.up.sign; };

  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
      "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"40\" y=\"32\" font-family=\"sans-serif\" font-size=\"20\">"
      "%s, frame %d, mode %s</text>\n"
      "<text x=\"40\" y=\"56\" font-family=\"sans-serif\" font-size=\"14\" "
      "fill=\"#444\">performer: grey, solved: red, goal targets: circles, "
      "dashed: the clip's lowest ankle height. "
      "Run to this frame: MPJPE %.2f cm, pelvis height err max %.2f cm, "
      "flips %d</text>\n",
      kWidth, kHeight, kWidth, kHeight, report.clip, s.frame, report.mode,
      report.mpjpe_cm, report.pelvis_height_max_cm, report.flips);
  for (int view = 0; view < 2; ++view) {
    const double x0 = 40 + view * (kPanel + 40);
    absl::StrAppendFormat(
        &svg,
        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
        "fill=\"none\" stroke=\"#ccc\"/>\n"
        "<text x=\"%.1f\" y=\"%.1f\" font-family=\"sans-serif\" "
        "font-size=\"14\">%s view: model %c (right) - %s%c (up)</text>\n",
        x0, kTop, kPanel, kHeight - kTop - 10, x0 + 8, kTop + 20,
        view == 0 ? "front" : "side", kAxis[others[view]],
        s.up.sign > 0 ? "+" : "-", kAxis[s.up.index]);
    const double fy = y_of(s.floor_height * s.up.sign);
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                          "y2=\"%.1f\" stroke=\"#8a8\" stroke-dasharray=\"6 4\"/>\n",
                          x0, fy, x0 + kPanel, fy);
    for (int body = 0; body < 2; ++body) {
      const std::vector<Vector3d>& p = body == 0 ? s.performer : s.solved;
      const char* colour = body == 0 ? "#555" : "#d01818";
      const double width = body == 0 ? 5.0 : 2.5;
      for (int j = 0; j < n; ++j) {
        if (!s.drawn[j]) continue;
        const int q = s.parent[j];
        absl::StrAppendFormat(
            &svg,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
            "stroke=\"%s\" stroke-width=\"%.1f\" stroke-linecap=\"round\" "
            "opacity=\"%s\"/>\n",
            x_of(view, p[q]), y_of(up_of(p[q])), x_of(view, p[j]),
            y_of(up_of(p[j])), colour, width, body == 0 ? "0.6" : "0.9");
      }
    }
    for (int j : s.effectors) {
      absl::StrAppendFormat(&svg,
                            "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"6\" "
                            "fill=\"none\" stroke=\"black\" stroke-width=\"1.5\"/>\n",
                            x_of(view, s.performer[j]),
                            y_of(up_of(s.performer[j])));
    }
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace reach::testing
