#include "tests/testing/pki.h"

#include <openssl/sha.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace reach::testing {

namespace fs = std::filesystem;

namespace {

int Run(const std::string& command) {
  return std::system(("(" + command + ") >/dev/null 2>&1").c_str());
}

}  // namespace

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteFile(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
  }
  fs::rename(tmp, path);
}

fs::path TempDir(const std::string& tag) {
  fs::path dir = fs::temp_directory_path() /
                 absl::StrCat("reach-", tag, "-", getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void Pki::MakeCa(const std::string& name) {
  ASSERT_EQ(Run(absl::StrCat(
                "cd ", dir.string(), " && openssl req -x509 -newkey ec "
                "-pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
                "-subj '/CN=Reach test ", name, "' -keyout ", name,
                ".key -out ", name, ".pem")),
            0)
      << "openssl could not make the CA " << name;
}

void Pki::MakeLeaf(const std::string& name, const std::string& ca,
                   const std::string& usage) {
  const std::string ext = absl::StrCat(name, ".ext");
  {
    std::ofstream out(dir / ext);
    out << "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
        << "basicConstraints=CA:FALSE\n"
        << "extendedKeyUsage=" << usage << "\n";
  }
  ASSERT_EQ(Run(absl::StrCat(
                "cd ", dir.string(), " && openssl req -newkey ec "
                "-pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "
                "'/CN=", name, "' -keyout ", name, ".key -out ", name,
                ".csr && openssl x509 -req -in ", name, ".csr -CA ", ca,
                ".pem -CAkey ", ca, ".key -CAcreateserial -days 2 -out ",
                name, ".pem -extfile ", ext)),
            0)
      << "openssl could not make " << name;
}

std::string Pki::PemPath(const std::string& name) const {
  return (dir / (name + ".pem")).string();
}
std::string Pki::KeyPath(const std::string& name) const {
  return (dir / (name + ".key")).string();
}
std::string Pki::Pem(const std::string& name) const {
  return ReadFile(PemPath(name));
}
std::string Pki::Key(const std::string& name) const {
  return ReadFile(KeyPath(name));
}

std::string Sha256Hex(const std::string& text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(),
         digest);
  return absl::BytesToHexString(absl::string_view(
      reinterpret_cast<const char*>(digest), sizeof(digest)));
}

std::string TokenLine(const std::string& name, const std::string& token,
                      const std::string& roles) {
  return absl::StrCat(name, " ", Sha256Hex(token), " ", roles, "\n");
}

}  // namespace reach::testing
