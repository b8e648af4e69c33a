// Fuzz target: the VMC bridge's input path on arbitrary datagrams: the OSC
// decoder (osc::Decode) and the VMC receiver (vmc::VmcReceiver) it feeds,
// exactly what `reach vmc` runs on every UDP packet.
//
// The input is split at each "\n--\n" into datagrams fed in turn to one
// receiver (so its state across packets is fuzzed too: times, reordering,
// gap estimates). Checked: the decoder reads nothing outside the packet
// (ASan; every view it returns lies within it), a refused packet leaves
// nothing behind, every message's address starts with '/' and its
// arguments are in the packet's list; a packet of only i/f/s arguments
// written again by osc::Writer decodes to the same messages; the
// receiver's counts add up (each datagram exactly one of ok, malformed,
// too_large, reordered; frames only from ok packets) and every frame is
// finite with unit rotations.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "client/osc.h"
#include "client/vmc.h"

namespace {

namespace osc = ::reach::osc;

#define CHECK_FUZZ(condition)                                          \
  do {                                                                 \
    if (!(condition)) {                                                \
      std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, \
                   __LINE__, #condition);                              \
      std::abort();                                                    \
    }                                                                  \
  } while (0)

bool Within(const uint8_t* data, size_t size, absl::string_view view) {
  if (view.empty()) return true;
  const auto* p = reinterpret_cast<const uint8_t*>(view.data());
  return p >= data && p + view.size() <= data + size;
}

void CheckPacket(const uint8_t* data, size_t size) {
  osc::Limits limits;
  limits.max_messages = 256;
  osc::Packet packet;
  const osc::DecodeResult result = osc::Decode(data, size, limits, &packet);
  if (result != osc::DecodeResult::kOk) {
    CHECK_FUZZ(packet.messages.empty() && packet.arguments.empty());
    return;
  }
  CHECK_FUZZ(static_cast<int>(packet.messages.size()) <= limits.max_messages);
  bool simple = true;
  int next = 0;
  for (const osc::Message& m : packet.messages) {
    CHECK_FUZZ(!m.address.empty() && m.address[0] == '/');
    CHECK_FUZZ(Within(data, size, m.address));
    CHECK_FUZZ(m.first_argument == next && m.argument_count >= 0);
    next += m.argument_count;
    CHECK_FUZZ(next <= static_cast<int>(packet.arguments.size()));
    for (int k = 0; k < m.argument_count; ++k) {
      const osc::Argument& a = packet.arg(m, k);
      CHECK_FUZZ(Within(data, size, a.bytes));
      if (a.type != 'i' && a.type != 'f' && a.type != 's') simple = false;
      // A string stops at its zero: none inside.
      if (a.type == 's') {
        CHECK_FUZZ(a.bytes.find('\0') == absl::string_view::npos);
      }
    }
  }
  CHECK_FUZZ(next == static_cast<int>(packet.arguments.size()));
  if (!simple) return;
  // Written again (as a bundle, or the one message), it decodes the same.
  osc::Writer w;
  if (packet.bundle) w.OpenBundle();
  for (const osc::Message& m : packet.messages) {
    w.Message(m.address);
    for (int k = 0; k < m.argument_count; ++k) {
      const osc::Argument& a = packet.arg(m, k);
      if (a.type == 'i') w.Int(static_cast<int32_t>(a.i));
      if (a.type == 'f') w.Float(a.f);
      if (a.type == 's') w.String(a.bytes);
    }
  }
  if (packet.bundle) w.CloseBundle();
  if (!packet.bundle && packet.messages.size() != 1) return;
  const std::string again = w.bytes();
  osc::Packet decoded;
  CHECK_FUZZ(osc::Decode(reinterpret_cast<const uint8_t*>(again.data()),
                         again.size(), limits,
                         &decoded) == osc::DecodeResult::kOk);
  CHECK_FUZZ(decoded.messages.size() == packet.messages.size());
  CHECK_FUZZ(decoded.arguments.size() == packet.arguments.size());
  for (size_t i = 0; i < decoded.messages.size(); ++i) {
    CHECK_FUZZ(decoded.messages[i].address == packet.messages[i].address);
  }
  for (size_t k = 0; k < decoded.arguments.size(); ++k) {
    const osc::Argument& a = packet.arguments[k];
    const osc::Argument& b = decoded.arguments[k];
    CHECK_FUZZ(a.type == b.type && a.i == b.i && a.bytes == b.bytes);
    CHECK_FUZZ(std::memcmp(&a.f, &b.f, sizeof a.f) == 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using reach::Transform;
  using reach::vmc::VmcReceiver;
  static const char* kNames[] = {"Hips",         "Spine",    "Chest",
                                 "Neck",         "Head",     "LeftUpperArm",
                                 "LeftLowerArm", "LeftHand", "LeftUpperLeg",
                                 "LeftLowerLeg", "LeftFoot", "RightHand"};
  std::vector<std::string> names(std::begin(kNames), std::end(kNames));
  std::vector<Transform> rest(names.size());
  rest[0].translation = Eigen::Vector3d(0, 0.95, 0);
  osc::Limits limits;
  limits.max_messages = 256;
  VmcReceiver receiver(names, rest, limits);
  // Tracker mode (`reach vmc --trackers`): the same datagrams, and the
  // serials' body parts.
  VmcReceiver trackers({}, {}, limits, /*trackers=*/true);
  // With offsets where trackers sit (`--tracker-offsets`): by part and by
  // serial.
  reach::vmc::TrackerOffsets offsets;
  offsets.by_part[0].translation = Eigen::Vector3d(0, -0.09, -0.11);
  offsets.by_part[0].rotation =
      Eigen::Quaterniond(Eigen::AngleAxisd(0.2, Eigen::Vector3d::UnitX()));
  offsets.by_serial["LHR-PELVIS"].translation = Eigen::Vector3d(0, 0, 0.1);
  reach::vmc::TrackerMap map({"", "", "LHR-PELVIS", "", ""}, offsets);
  uint64_t samples = 0;

  const std::string input(reinterpret_cast<const char*>(data), size);
  size_t at = 0;
  uint64_t datagrams = 0;
  while (at <= input.size()) {
    size_t end = input.find("\n--\n", at);
    if (end == std::string::npos) end = input.size();
    // Its own allocation, so ASan sees reads past its end.
    const std::vector<uint8_t> packet(input.begin() + static_cast<long>(at),
                                      input.begin() + static_cast<long>(end));
    CheckPacket(packet.data(), packet.size());
    const uint64_t frames_before = receiver.counts().frames;
    const VmcReceiver::Outcome outcome =
        receiver.Apply(packet.data(), packet.size());
    ++datagrams;
    const reach::vmc::ReceiveCounts& c = receiver.counts();
    CHECK_FUZZ(c.packets_ok + c.packets_malformed + c.packets_too_large +
                   c.packets_reordered ==
               datagrams);
    CHECK_FUZZ((outcome == VmcReceiver::Outcome::kFrame) ==
               (c.frames == frames_before + 1));
    if (outcome == VmcReceiver::Outcome::kFrame) {
      const reach::vmc::SourceFrame& f = receiver.frame();
      CHECK_FUZZ(f.rotations.size() == names.size());
      for (const Eigen::Quaterniond& q : f.rotations) {
        CHECK_FUZZ(std::isfinite(q.norm()) && std::abs(q.norm() - 1) < 1e-9);
      }
      CHECK_FUZZ(f.root_translation.allFinite());
      CHECK_FUZZ(!f.has_time || std::isfinite(f.time));
    }
    if (trackers.Apply(packet.data(), packet.size()) ==
        VmcReceiver::Outcome::kFrame) {
      CHECK_FUZZ(!trackers.trackers().empty());
      for (const reach::vmc::TrackerSample& t : trackers.trackers()) {
        CHECK_FUZZ(t.pose.translation.allFinite());
        CHECK_FUZZ(std::abs(t.pose.rotation.norm() - 1) < 1e-9);
      }
      samples += trackers.trackers().size();
      map.Apply(trackers.trackers());
      CHECK_FUZZ(map.applied() + map.unknown_serial() == samples);
      for (int p = 0; p < reach::vmc::kBodyParts; ++p) {
        const auto part = static_cast<reach::vmc::BodyPart>(p);
        if (!map.has(part)) continue;
        CHECK_FUZZ(map.pose(part).translation.allFinite());
        CHECK_FUZZ(std::abs(map.pose(part).rotation.norm() - 1) < 1e-9);
      }
    }
    if (end == input.size()) break;
    at = end + 4;
  }
  return 0;
}
