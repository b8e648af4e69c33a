#include "server/auth.h"

#include <openssl/evp.h>
#include <openssl/sha.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/address.h"
#include "server/log.h"

namespace reach {
namespace {

// A token file is a short list; anything far larger is a mistake.
constexpr int64_t kMaxTokenFileBytes = 1 << 20;
constexpr size_t kMaxTokenNameBytes = 128;
// Longest token accepted in the metadata (hashing is proportional).
constexpr size_t kMaxTokenBytes = 4096;

// SHA-256 of `text`. OpenSSL 3's one-shot SHA256() looks the algorithm up
// on every call (~0.7 µs); this fetches it once and reuses a context per
// thread (~0.2 µs for a 64-character token).
void Sha256(absl::string_view text, TokenDigest* digest) {
  static EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  struct CtxFree {
    void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
  };
  thread_local const std::unique_ptr<EVP_MD_CTX, CtxFree> ctx(EVP_MD_CTX_new());
  unsigned int size = 0;
  if (md == nullptr || ctx == nullptr ||
      EVP_DigestInit_ex2(ctx.get(), md, nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), text.data(), text.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), digest->data(), &size) != 1) {
    // Out of memory in OpenSSL: the slow path still gives the digest.
    SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(),
           digest->data());
  }
}

// Whether two digests are equal, in time independent of where they differ
// (four 64-bit words, no early exit).
bool DigestsEqual(const TokenDigest& a, const TokenDigest& b) {
  uint64_t diff = 0;
  for (size_t i = 0; i < a.size(); i += sizeof(uint64_t)) {
    uint64_t x, y;
    std::memcpy(&x, a.data() + i, sizeof(x));
    std::memcpy(&y, b.data() + i, sizeof(y));
    diff |= x ^ y;
  }
  return diff == 0;
}

// Adds the role `word` names to `entry`.
absl::Status AddRole(absl::string_view word, TokenEntry* entry) {
  Role role;
  if (word == "metrics") {
    entry->metrics = true;
    return absl::OkStatus();
  } else if (word == "solve") {
    role = Role::kSolve;
  } else if (word == "register") {
    role = Role::kRegister;
  } else if (word == "admin") {
    // Not `metrics`: a scraper's configuration is no place for a token
    // that may delete everything.
    role = Role::kAdmin;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown role '", word.substr(0, 40),
        "' (roles: solve, register, admin, metrics)"));
  }
  if (!entry->role.has_value() || role > *entry->role) entry->role = role;
  return absl::OkStatus();
}

bool ParseDigest(absl::string_view hex, TokenDigest* digest) {
  if (hex.size() != 2 * digest->size()) return false;
  for (char c : hex) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  const std::string bytes = absl::HexStringToBytes(hex);
  std::memcpy(digest->data(), bytes.data(), digest->size());
  return true;
}

}  // namespace

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kSolve:
      return "solve";
    case Role::kRegister:
      return "register";
    case Role::kAdmin:
      return "admin";
  }
  return "unknown";
}

absl::StatusOr<std::vector<TokenEntry>> ParseTokenFile(absl::string_view text,
                                                       absl::string_view path) {
  std::vector<TokenEntry> entries;
  absl::flat_hash_set<std::string> names;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    const auto error = [&](const auto&... what) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_number, ": ", what...));
    };
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() != 3) {
      return error("expected 3 fields (name, sha256 of the token, roles), "
                   "found ", fields.size());
    }
    TokenEntry entry;
    entry.name = std::string(fields[0]);
    if (entry.name.size() > kMaxTokenNameBytes) {
      return error("name longer than ", kMaxTokenNameBytes, " bytes");
    }
    if (!names.insert(entry.name).second) {
      return error("name '", entry.name, "' is used twice");
    }
    if (!ParseDigest(fields[1], &entry.digest)) {
      // Not quoted: what is there instead of a digest may be the token
      // itself, and this message goes to the log.
      return error("the second field (", fields[1].size(),
                   " characters) is not a SHA-256 in hex (64 digits); the "
                   "file holds sha256(token), never the token");
    }
    for (const TokenEntry& other : entries) {
      if (other.digest == entry.digest) {
        return error("the same token as '", other.name, "'");
      }
    }
    for (absl::string_view word : absl::StrSplit(fields[2], ',')) {
      if (absl::Status added = AddRole(word, &entry); !added.ok()) {
        return error(added.message());
      }
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

absl::Status Authorize(const Caller& caller, Role needed,
                       absl::string_view method) {
  if (caller.role.has_value() && *caller.role >= needed) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      method, " needs the '", RoleName(needed), "' role; token '",
      caller.name, "' has ",
      caller.role.has_value()
          ? absl::StrCat("'", RoleName(*caller.role), "'")
          : std::string("only 'metrics'")));
}

std::string PeerOwner(absl::string_view peer) {
  // "ipv4:1.2.3.4:5", "ipv6:[::1]:5", "unix:/path".
  absl::string_view address = peer;
  const size_t colon = address.find(':');
  if (colon != absl::string_view::npos) address.remove_prefix(colon + 1);
  if (!absl::StartsWith(peer, "unix:")) {
    const size_t port = address.rfind(':');
    if (port != absl::string_view::npos && port > 0 &&
        (address[0] != '[' || address[port - 1] == ']')) {
      address = address.substr(0, port);
    }
  }
  // Every loopback address is this machine: one owner, or any local
  // process could take a fresh quota from 127.0.0.2, 127.0.0.3, ...
  if (!absl::StartsWith(peer, "unix:") && IsLoopbackHost(HostOf(address))) {
    return "peer:loopback";
  }
  return absl::StrCat("peer:", address);
}

absl::StatusOr<std::unique_ptr<TokenAuth>> TokenAuth::Open(
    std::string path, absl::Duration reload_interval) {
  std::unique_ptr<TokenAuth> auth(
      new TokenAuth(std::move(path), reload_interval));
  if (!auth->enabled()) return auth;
  if (absl::Status status = auth->Reload(); !status.ok()) return status;
  if (reload_interval > absl::ZeroDuration()) {
    auth->watcher_ = std::thread([raw = auth.get()] { raw->Watch(); });
  }
  return auth;
}

TokenAuth::~TokenAuth() {
  stop_.Notify();
  if (watcher_.joinable()) watcher_.join();
}

absl::Status TokenAuth::Reload() {
  struct stat info{};
  absl::Status loaded = Load(&info);
  {
    absl::MutexLock lock(&mu_);
    // Stamped either way: a bad file is not read again until it changes.
    stamp_ = FileStamp{
        int64_t{info.st_mtim.tv_sec} * 1000000000 + info.st_mtim.tv_nsec,
        info.st_size, info.st_ino};
    if (loaded.ok()) {
      load_error_.clear();
    } else {
      // All or nothing: the tokens of a file that does not load are not
      // known, so none is accepted (keeping the old ones would keep the
      // very token an edit meant to revoke).
      entries_ = std::make_shared<const std::vector<TokenEntry>>();
      load_error_ = std::string(loaded.message());
      ++failures_;
    }
  }
  absl::MutexLock lock(&listener_mu_);
  if (on_change_) on_change_();
  return loaded;
}

void TokenAuth::SetOnChange(std::function<void()> on_change) {
  absl::MutexLock lock(&listener_mu_);
  on_change_ = std::move(on_change);
}

bool TokenAuth::Admits(const Caller& caller) const {
  if (!enabled() || !caller.authenticated) return true;
  absl::MutexLock lock(&mu_);
  for (const TokenEntry& entry : *entries_) {
    if (DigestsEqual(entry.digest, caller.digest) &&
        entry.name == caller.name && entry.role.has_value()) {
      return true;
    }
  }
  return false;
}

std::string TokenAuth::load_error() const {
  absl::MutexLock lock(&mu_);
  return load_error_;
}

int64_t TokenAuth::failures() const {
  absl::MutexLock lock(&mu_);
  return failures_;
}

absl::Status TokenAuth::Load(struct ::stat* stat_out) {
  struct ::stat& info = *stat_out;
  if (stat(path_.c_str(), &info) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--auth_tokens_file=", path_, ": ", std::strerror(errno)));
  }
  if (info.st_size > kMaxTokenFileBytes) {
    return absl::FailedPreconditionError(
        absl::StrCat("--auth_tokens_file=", path_, ": ", info.st_size,
                     " bytes; a token file holds at most ",
                     kMaxTokenFileBytes));
  }
  std::ifstream in(path_, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    return absl::FailedPreconditionError(
        absl::StrCat("--auth_tokens_file=", path_, ": cannot read it"));
  }
  absl::StatusOr<std::vector<TokenEntry>> entries =
      ParseTokenFile(text.str(), path_);
  if (!entries.ok()) return entries.status();
  if (entries->empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--auth_tokens_file=", path_, ": no tokens (nobody could call)"));
  }
  auto shared =
      std::make_shared<const std::vector<TokenEntry>>(*std::move(entries));
  absl::MutexLock lock(&mu_);
  entries_ = std::move(shared);
  ++reloads_;
  return absl::OkStatus();
}

void TokenAuth::Watch() {
  while (!stop_.WaitForNotificationWithTimeout(reload_interval_)) {
    // A file gone (deleted, or replaced by rm and write rather than by a
    // rename) stamps as zeros: a change like any other.
    struct stat info{};
    stat(path_.c_str(), &info);
    const FileStamp now{
        int64_t{info.st_mtim.tv_sec} * 1000000000 + info.st_mtim.tv_nsec,
        info.st_size, info.st_ino};
    {
      absl::MutexLock lock(&mu_);
      if (now == stamp_) continue;
    }
    const absl::Status status = Reload();
    if (status.ok()) {
      LogInfo(absl::StrCat("auth: reloaded ", path_, " (", tokens(),
                           " tokens)"));
    } else {
      LogError(absl::StrCat("auth: accepting no token until the file loads: ",
                            status.message()));
    }
  }
}

int64_t TokenAuth::reloads() const {
  absl::MutexLock lock(&mu_);
  return reloads_;
}

int TokenAuth::tokens() const {
  absl::MutexLock lock(&mu_);
  return entries_ == nullptr ? 0 : static_cast<int>(entries_->size());
}

absl::StatusOr<Caller> TokenAuth::Authenticate(
    absl::string_view authorization, absl::string_view peer) const {
  if (!enabled()) return Caller{PeerOwner(peer), Role::kAdmin, false, true, {}};
  if (authorization.empty()) {
    return absl::UnauthenticatedError(
        "no token: send call metadata 'authorization: Bearer TOKEN'");
  }
  absl::string_view token = authorization;
  if (!absl::ConsumePrefix(&token, "Bearer ") &&
      !absl::ConsumePrefix(&token, "bearer ")) {
    return absl::UnauthenticatedError(
        "authorization: expected 'Bearer TOKEN'");
  }
  token = absl::StripAsciiWhitespace(token);
  if (token.empty() || token.size() > kMaxTokenBytes) {
    return absl::UnauthenticatedError("authorization: empty or oversized token");
  }
  TokenDigest digest;
  Sha256(token, &digest);
  std::shared_ptr<const std::vector<TokenEntry>> entries;
  {
    absl::MutexLock lock(&mu_);
    entries = entries_;
  }
  // Every entry is compared, in constant time, whichever matches.
  const TokenEntry* match = nullptr;
  for (const TokenEntry& entry : *entries) {
    const bool equal = DigestsEqual(entry.digest, digest);
    match = equal ? &entry : match;
  }
  if (match == nullptr) {
    if (entries->empty()) {
      // Fail closed after a reload that did not load (Reload).
      return absl::UnauthenticatedError(
          "the server's token file does not load, so it accepts no token "
          "until an operator fixes it");
    }
    return absl::UnauthenticatedError("unknown token");
  }
  return Caller{match->name, match->role, true, match->metrics, digest};
}

bool TokenAuth::AllowsMetrics(absl::string_view user,
                              absl::string_view password) const {
  if (!enabled()) return true;
  absl::StatusOr<Caller> caller =
      Authenticate(absl::StrCat("Bearer ", password), "");
  return caller.ok() && caller->metrics && caller->name == user;
}

absl::StatusOr<Caller> TokenAuth::Check(const grpc::ServerContextBase& context,
                                        Role needed,
                                        absl::string_view method) const {
  if (!enabled()) {
    // Only registrations are charged to someone: do not build the peer's
    // name for every solve.
    return Caller{needed >= Role::kRegister ? PeerOwner(context.peer())
                                            : std::string(),
                  Role::kAdmin, false, true, {}};
  }
  absl::string_view authorization;
  const auto& metadata = context.client_metadata();
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    authorization = absl::string_view(it->second.data(), it->second.size());
  }
  absl::StatusOr<Caller> caller = Authenticate(authorization, "");
  if (!caller.ok()) return caller;
  if (absl::Status allowed = Authorize(*caller, needed, method);
      !allowed.ok()) {
    return allowed;
  }
  return caller;
}

}  // namespace reach
