// Certificates for tests, made by the openssl tool (no checked-in keys),
// and the small file helpers TLS and token tests need.
#ifndef REACH_TESTS_TESTING_PKI_H_
#define REACH_TESTS_TESTING_PKI_H_

#include <filesystem>
#include <string>

namespace reach::testing {

std::string ReadFile(const std::filesystem::path& path);
// Writes `text` to a temporary file beside `path` and renames it over
// `path`, as a deployment replaces a certificate: a reader never sees half.
void WriteFile(const std::filesystem::path& path, const std::string& text);
// An empty directory of this process under the temp directory.
std::filesystem::path TempDir(const std::string& tag);

// A CA, and server and client certificates it signs (ECDSA P-256, valid 2
// days), under `dir`: NAME.pem and NAME.key. Fails the current test (gtest
// fatal failure) when openssl does.
struct Pki {
  std::filesystem::path dir;

  void MakeCa(const std::string& name);
  // `usage`: serverAuth or clientAuth. The names are localhost and
  // 127.0.0.1.
  void MakeLeaf(const std::string& name, const std::string& ca,
                const std::string& usage);
  std::string PemPath(const std::string& name) const;
  std::string KeyPath(const std::string& name) const;
  std::string Pem(const std::string& name) const;
  std::string Key(const std::string& name) const;
};

// SHA-256 of `text`, lower-case hex (OpenSSL, not the server's code).
std::string Sha256Hex(const std::string& text);

// A line of an --auth_tokens_file: `name`, the SHA-256 of `token` in hex
// (computed here with OpenSSL, not by the server's code) and `roles`.
std::string TokenLine(const std::string& name, const std::string& token,
                      const std::string& roles);

}  // namespace reach::testing

#endif  // REACH_TESTS_TESTING_PKI_H_
