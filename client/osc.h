// OSC 1.0 (opensoundcontrol.org/spec-1_0): a bounded decoder of packets
// (messages and bundles, nested bundles flattened in order) and a writer.
// No sockets, no gRPC: the VMC bridge (client/vmc*.h) feeds it UDP
// datagrams, and its fuzz target (tests/fuzz/vmc_osc_fuzz.cc) feeds it
// anything.
//
// Decoding never allocates once the Packet's vectors have grown to the
// largest packet seen, never reads outside the bytes given, and refuses a
// whole packet (nothing of it is returned) when any part of it is
// malformed: an element size that is not a positive multiple of 4 or runs
// past its bundle, a string without its terminating zero, an address not
// starting with '/', a type tag string without its ',' or with a tag this
// decoder does not know (it cannot know that argument's size), arguments
// running past the message. Bundles' time tags are read and ignored
// (everything is applied on arrival, as VMC receivers do).
#ifndef REACH_CLIENT_OSC_H_
#define REACH_CLIENT_OSC_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace reach::osc {

struct Limits {
  int max_depth = 8;          // Bundles within bundles.
  int max_messages = 4096;    // In one packet, all bundles together.
  int max_arguments = 256;    // Of one message.
};

// One argument; `type` is its OSC type tag. Numbers land in `i` (i, c, r,
// m as the 32-bit word, h and t as 64-bit), `f` (f) or `d` (d); strings,
// symbols and blobs in `bytes` (views into the packet). T, F, N and I carry
// no data.
struct Argument {
  char type = 0;
  int64_t i = 0;
  float f = 0;
  double d = 0;
  absl::string_view bytes;
};

// One message: its address and its arguments
// (Packet::arguments[first_argument, first_argument + argument_count)).
struct Message {
  absl::string_view address;
  int first_argument = 0;
  int argument_count = 0;
};

// A decoded packet. Views point into the bytes given to Decode: they live
// as long as those bytes.
struct Packet {
  bool bundle = false;  // The packet is a bundle (else one message).
  std::vector<Message> messages;
  std::vector<Argument> arguments;

  const Argument& arg(const Message& m, int k) const {
    return arguments[static_cast<size_t>(m.first_argument + k)];
  }
};

enum class DecodeResult {
  kOk,
  kMalformed,  // Not OSC 1.0 (see above); `packet` is left empty.
  kTooLarge,   // Over the limits (depth, messages, arguments); left empty.
};

const char* DecodeResultName(DecodeResult result);

DecodeResult Decode(const uint8_t* data, size_t size, const Limits& limits,
                    Packet* packet);

// Writes OSC packets into a byte string it keeps (reused across packets).
//
//   Writer w;
//   w.OpenBundle();
//   w.Message("/VMC/Ext/OK").Int(1);
//   w.Message("/VMC/Ext/T").Float(t);
//   w.CloseBundle();
//   send(fd, w.data(), w.size(), 0);
class Writer {
 public:
  void Clear();
  // A bundle with the time tag "immediately" (1); bundles nest.
  Writer& OpenBundle();
  Writer& CloseBundle();
  // Starts a message; its arguments follow. Inside a bundle the message is
  // an element of it; its size is written when the next message, bundle
  // end or data() comes.
  Writer& Message(absl::string_view address);
  Writer& Int(int32_t v);
  Writer& Float(float v);
  Writer& String(absl::string_view v);

  const uint8_t* data();
  size_t size();
  // The bytes so far, as a string (tests, the fuzz target's seeds).
  std::string bytes();

 private:
  void EndMessage();
  void AppendPadded(absl::string_view s);
  void Put32(uint32_t v);
  void Patch32(size_t at, size_t value);

  std::string out_;
  std::string types_;  // Of the open message: ",sfff...".
  std::string args_;   // Its argument bytes.
  std::string address_;
  bool in_message_ = false;
  std::vector<size_t> bundles_;  // Offsets of the open bundles' size words.
};

}  // namespace reach::osc

#endif  // REACH_CLIENT_OSC_H_
