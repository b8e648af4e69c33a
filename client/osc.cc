#include "client/osc.h"

#include <cstring>

namespace reach::osc {
namespace {

uint32_t Load32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
         (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

uint64_t Load64(const uint8_t* p) {
  return (uint64_t{Load32(p)} << 32) | Load32(p + 4);
}

// An OSC string at [*at, end): up to its zero, padded to 4 bytes. False
// when the zero or the padding is missing.
bool ReadString(const uint8_t* base, size_t* at, size_t end,
                absl::string_view* out) {
  const size_t start = *at;
  if (start >= end) return false;
  const void* zero = std::memchr(base + start, 0, end - start);
  if (zero == nullptr) return false;
  const size_t length =
      static_cast<size_t>(static_cast<const uint8_t*>(zero) - (base + start));
  const size_t padded = (length + 4) & ~size_t{3};
  if (padded > end - start) return false;
  *out = absl::string_view(reinterpret_cast<const char*>(base + start), length);
  *at = start + padded;
  return true;
}

class Decoder {
 public:
  Decoder(const uint8_t* data, const Limits& limits, Packet* packet)
      : base_(data), limits_(limits), packet_(packet) {}

  DecodeResult Element(size_t at, size_t end, int depth) {
    const size_t size = end - at;
    if (size >= 8 && std::memcmp(base_ + at, "#bundle", 8) == 0) {
      return Bundle(at + 8, end, depth + 1);
    }
    return MessageAt(at, end);
  }

 private:
  DecodeResult Bundle(size_t at, size_t end, int depth) {
    if (depth > limits_.max_depth) return DecodeResult::kTooLarge;
    if (end - at < 8) return DecodeResult::kMalformed;  // The time tag.
    at += 8;
    while (at < end) {
      if (end - at < 4) return DecodeResult::kMalformed;
      const uint32_t size = Load32(base_ + at);
      at += 4;
      if (size == 0 || size % 4 != 0 || size > end - at) {
        return DecodeResult::kMalformed;
      }
      const DecodeResult r = Element(at, at + size, depth);
      if (r != DecodeResult::kOk) return r;
      at += size;
    }
    return DecodeResult::kOk;
  }

  DecodeResult MessageAt(size_t at, size_t end) {
    if ((end - at) % 4 != 0) return DecodeResult::kMalformed;
    Message message;
    if (!ReadString(base_, &at, end, &message.address) ||
        message.address.empty() || message.address[0] != '/') {
      return DecodeResult::kMalformed;
    }
    absl::string_view types;
    if (!ReadString(base_, &at, end, &types) || types.empty() ||
        types[0] != ',') {
      return DecodeResult::kMalformed;
    }
    types.remove_prefix(1);
    if (static_cast<int>(packet_->messages.size()) >= limits_.max_messages ||
        static_cast<int>(types.size()) > limits_.max_arguments) {
      return DecodeResult::kTooLarge;
    }
    message.first_argument = static_cast<int>(packet_->arguments.size());
    for (const char tag : types) {
      Argument a;
      a.type = tag;
      switch (tag) {
        case 'i':
        case 'c':
        case 'r':
        case 'm':
          if (end - at < 4) return DecodeResult::kMalformed;
          a.i = static_cast<int32_t>(Load32(base_ + at));
          at += 4;
          break;
        case 'f': {
          if (end - at < 4) return DecodeResult::kMalformed;
          const uint32_t bits = Load32(base_ + at);
          std::memcpy(&a.f, &bits, 4);
          at += 4;
          break;
        }
        case 'h':
        case 't':
          if (end - at < 8) return DecodeResult::kMalformed;
          a.i = static_cast<int64_t>(Load64(base_ + at));
          at += 8;
          break;
        case 'd': {
          if (end - at < 8) return DecodeResult::kMalformed;
          const uint64_t bits = Load64(base_ + at);
          std::memcpy(&a.d, &bits, 8);
          at += 8;
          break;
        }
        case 's':
        case 'S':
          if (!ReadString(base_, &at, end, &a.bytes)) {
            return DecodeResult::kMalformed;
          }
          break;
        case 'b': {
          if (end - at < 4) return DecodeResult::kMalformed;
          const uint32_t n = Load32(base_ + at);
          at += 4;
          const size_t padded = (size_t{n} + 3) & ~size_t{3};
          if (n > end - at || padded > end - at) {
            return DecodeResult::kMalformed;
          }
          a.bytes =
              absl::string_view(reinterpret_cast<const char*>(base_ + at), n);
          at += padded;
          break;
        }
        case 'T':
        case 'F':
        case 'N':
        case 'I':
          break;
        default:  // Arrays ([ ]) and tags of later versions: sizes unknown.
          return DecodeResult::kMalformed;
      }
      packet_->arguments.push_back(a);
    }
    message.argument_count =
        static_cast<int>(packet_->arguments.size()) - message.first_argument;
    // Bytes after the arguments: ignored (a sender's padding).
    packet_->messages.push_back(message);
    return DecodeResult::kOk;
  }

  const uint8_t* base_;
  const Limits& limits_;
  Packet* packet_;
};

}  // namespace

const char* DecodeResultName(DecodeResult result) {
  switch (result) {
    case DecodeResult::kOk:
      return "ok";
    case DecodeResult::kMalformed:
      return "malformed";
    case DecodeResult::kTooLarge:
      return "too_large";
  }
  return "?";
}

DecodeResult Decode(const uint8_t* data, size_t size, const Limits& limits,
                    Packet* packet) {
  packet->messages.clear();
  packet->arguments.clear();
  packet->bundle = size >= 8 && std::memcmp(data, "#bundle", 8) == 0;
  if (size == 0 || size % 4 != 0) return DecodeResult::kMalformed;
  const DecodeResult r = Decoder(data, limits, packet).Element(0, size, 0);
  if (r != DecodeResult::kOk) {
    packet->messages.clear();
    packet->arguments.clear();
  }
  return r;
}

void Writer::Clear() {
  out_.clear();
  bundles_.clear();
  in_message_ = false;
}

void Writer::Put32(uint32_t v) {
  const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                     static_cast<char>(v >> 8), static_cast<char>(v)};
  out_.append(b, 4);
}

void Writer::AppendPadded(absl::string_view s) {
  out_.append(s.data(), s.size());
  out_.append(4 - s.size() % 4, '\0');
}

void Writer::EndMessage() {
  if (!in_message_) return;
  in_message_ = false;
  const size_t start = out_.size();
  if (!bundles_.empty()) Put32(0);
  AppendPadded(address_);
  AppendPadded(types_);
  out_.append(args_);
  if (!bundles_.empty()) Patch32(start, out_.size() - start - 4);
}

void Writer::Patch32(size_t at, size_t value) {
  const uint32_t n = static_cast<uint32_t>(value);
  for (int k = 0; k < 4; ++k) {
    out_[at + static_cast<size_t>(k)] = static_cast<char>(n >> (24 - 8 * k));
  }
}

Writer& Writer::OpenBundle() {
  EndMessage();
  size_t size_at = std::string::npos;
  if (!bundles_.empty()) {
    size_at = out_.size();
    Put32(0);
  }
  bundles_.push_back(size_at);
  out_.append("#bundle\0", 8);
  Put32(0);
  Put32(1);  // Immediately.
  return *this;
}

Writer& Writer::CloseBundle() {
  EndMessage();
  if (bundles_.empty()) return *this;
  const size_t size_at = bundles_.back();
  bundles_.pop_back();
  if (size_at != std::string::npos) Patch32(size_at, out_.size() - size_at - 4);
  return *this;
}

Writer& Writer::Message(absl::string_view address) {
  EndMessage();
  in_message_ = true;
  address_.assign(address.data(), address.size());
  types_.assign(",");
  args_.clear();
  return *this;
}

Writer& Writer::Int(int32_t v) {
  types_ += 'i';
  const uint32_t u = static_cast<uint32_t>(v);
  const char b[4] = {static_cast<char>(u >> 24), static_cast<char>(u >> 16),
                     static_cast<char>(u >> 8), static_cast<char>(u)};
  args_.append(b, 4);
  return *this;
}

Writer& Writer::Float(float v) {
  types_ += 'f';
  uint32_t u;
  std::memcpy(&u, &v, 4);
  const char b[4] = {static_cast<char>(u >> 24), static_cast<char>(u >> 16),
                     static_cast<char>(u >> 8), static_cast<char>(u)};
  args_.append(b, 4);
  return *this;
}

Writer& Writer::String(absl::string_view v) {
  types_ += 's';
  args_.append(v.data(), v.size());
  args_.append(4 - v.size() % 4, '\0');
  return *this;
}

const uint8_t* Writer::data() {
  EndMessage();
  return reinterpret_cast<const uint8_t*>(out_.data());
}

size_t Writer::size() {
  EndMessage();
  return out_.size();
}

std::string Writer::bytes() {
  EndMessage();
  return out_;
}

}  // namespace reach::osc
