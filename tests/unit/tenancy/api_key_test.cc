#include "tenancy/api_key.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/unit/tenancy/hex_match.h"
#include "tests/common/temp_dir.h"

namespace orrery {
namespace {

using orrery::testing::TempDir;

// Sets or unsets ORRERY_ADMIN_TOKEN for the scope, restoring the old value.
class ScopedAdminEnv {
 public:
  explicit ScopedAdminEnv(const char* value) {
    if (const char* old = std::getenv(kVar)) old_ = old;
    if (value == nullptr) {
      ::unsetenv(kVar);
    } else {
      ::setenv(kVar, value, 1);
    }
  }
  ~ScopedAdminEnv() {
    if (old_) {
      ::setenv(kVar, old_->c_str(), 1);
    } else {
      ::unsetenv(kVar);
    }
  }

 private:
  static constexpr char kVar[] = "ORRERY_ADMIN_TOKEN";
  std::optional<std::string> old_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::trunc);
  out << content;
}

TEST(ApiKeyTest, FormatIsOrkPlus64Hex) {
  for (int i = 0; i < 10; ++i) {
    std::string key = GenerateApiKey();
    EXPECT_EQ(key.size(), 68u);
    EXPECT_TRUE(IsPrefixedHex(key, "ork_", 64)) << key;
  }
}

TEST(ApiKeyTest, ThousandKeysAreUnique) {
  std::set<std::string> keys;
  for (int i = 0; i < 1000; ++i) keys.insert(GenerateApiKey());
  EXPECT_EQ(keys.size(), 1000u);
}

TEST(ApiKeyTest, Sha256KnownVectors) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::string raw = Sha256("abc");
  ASSERT_EQ(raw.size(), 32u);
  EXPECT_EQ(static_cast<unsigned char>(raw[0]), 0xba);
  EXPECT_EQ(static_cast<unsigned char>(raw[31]), 0xad);
  EXPECT_EQ(Sha256(std::string("a\0b", 3)).size(), 32u);
  EXPECT_NE(Sha256(std::string("a\0b", 3)), Sha256("a"));
}

TEST(ApiKeyTest, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("secret", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secreT"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "Secret"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secret2"));
  EXPECT_FALSE(ConstantTimeEquals("secret", ""));
  EXPECT_TRUE(ConstantTimeEquals(std::string("a\0b", 3), std::string("a\0b", 3)));
  EXPECT_FALSE(ConstantTimeEquals(std::string("a\0b", 3), std::string("a\0c", 3)));
}

TEST(ApiKeyTest, RandomHexLengthAndAlphabet) {
  for (size_t n : {0u, 1u, 15u, 16u, 17u, 64u}) {
    std::string h = RandomHex(n);
    EXPECT_EQ(h.size(), n);
    EXPECT_TRUE(IsPrefixedHex(h, "", -1)) << h;
  }
  EXPECT_NE(RandomHex(16), RandomHex(16));
}

TEST(AdminTokenTest, CreatesFileWithMode0600AndReusesIt) {
  ScopedAdminEnv env(nullptr);
  TempDir tmp;
  std::string created;
  auto t1 = LoadOrCreateAdminToken(tmp.path(), &created);
  ASSERT_TRUE(t1.ok()) << t1.status().ToString();
  const std::string path = tmp.path() + "/admin.token";
  EXPECT_EQ(created, path);
  ASSERT_EQ(t1->substr(0, 4), "ora_");
  EXPECT_TRUE(IsPrefixedHex(*t1, "ora_", 64)) << *t1;

  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(ReadFile(path), *t1 + "\n");
  // No temp files left behind.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(tmp.path())) ++entries;
  EXPECT_EQ(entries, 1);

  std::string created2;
  auto t2 = LoadOrCreateAdminToken(tmp.path(), &created2);
  ASSERT_TRUE(t2.ok());
  EXPECT_EQ(*t2, *t1);
  EXPECT_EQ(created2, path);
  EXPECT_TRUE(LoadOrCreateAdminToken(tmp.path(), nullptr).ok());
}

TEST(AdminTokenTest, CreatesMissingDataDir) {
  ScopedAdminEnv env(nullptr);
  TempDir tmp;
  auto t = LoadOrCreateAdminToken(tmp.path() + "/a/b", nullptr);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(std::filesystem::exists(tmp.path() + "/a/b/admin.token"));
}

TEST(AdminTokenTest, EnvironmentOverrides) {
  ScopedAdminEnv env("from-env-token");
  TempDir tmp;
  std::string created = "stale";
  auto t = LoadOrCreateAdminToken(tmp.path(), &created);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, "from-env-token");
  EXPECT_EQ(created, "");
  EXPECT_FALSE(std::filesystem::exists(tmp.path() + "/admin.token"));
}

TEST(AdminTokenTest, EmptyEnvironmentIsIgnored) {
  ScopedAdminEnv env("");
  TempDir tmp;
  auto t = LoadOrCreateAdminToken(tmp.path(), nullptr);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->substr(0, 4), "ora_");
}

TEST(AdminTokenTest, ExistingFileIsTrimmed) {
  ScopedAdminEnv env(nullptr);
  TempDir tmp;
  WriteFile(tmp.path() + "/admin.token", "  my-operator-token\r\n\n");
  auto t = LoadOrCreateAdminToken(tmp.path(), nullptr);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, "my-operator-token");
}

TEST(AdminTokenTest, EmptyOrCorruptFileIsFailedPrecondition) {
  ScopedAdminEnv env(nullptr);
  for (const std::string& content : {std::string(""), std::string(" \n\t"), std::string("two words"),
                                    std::string("bin\x01ary", 7)}) {
    TempDir tmp;
    const std::string path = tmp.path() + "/admin.token";
    WriteFile(path, content);
    auto t = LoadOrCreateAdminToken(tmp.path(), nullptr);
    ASSERT_FALSE(t.ok()) << content;
    EXPECT_EQ(t.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(t.status().message().find(path), std::string::npos) << t.status().message();
    EXPECT_EQ(ReadFile(path), content);  // never overwritten
  }
}

}  // namespace
}  // namespace orrery
