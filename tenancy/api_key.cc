#include "tenancy/api_key.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

namespace orrery {
namespace {

constexpr char kHex[] = "0123456789abcdef";

std::string ToHex(const unsigned char* data, size_t n) {
  std::string out;
  out.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kHex[data[i] >> 4]);
    out.push_back(kHex[data[i] & 0xf]);
  }
  return out;
}

std::string ErrnoText(int err) { return std::strerror(err); }

// Closes a file descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

bool IsTokenChar(char c) { return c > 0x20 && c < 0x7f; }

// Reads the token file. NOT_FOUND if it does not exist.
Result<std::string> ReadTokenFile(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    int err = errno;
    if (err == ENOENT) return Status::NotFound(path);
    return Status::FailedPrecondition("cannot read admin token file " + path + ": " + ErrnoText(err));
  }
  std::string content;
  std::array<char, 4096> buf;
  for (;;) {
    ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FailedPrecondition("cannot read admin token file " + path + ": " + ErrnoText(errno));
    }
    if (n == 0) break;
    content.append(buf.data(), static_cast<size_t>(n));
    if (content.size() > 64 * 1024) break;  // not a token file
  }
  const char* ws = " \t\r\n\v\f";
  size_t begin = content.find_first_not_of(ws);
  size_t end = content.find_last_not_of(ws);
  std::string token = begin == std::string::npos ? std::string() : content.substr(begin, end - begin + 1);
  bool valid = !token.empty() && token.size() <= 1024;
  for (char c : token) valid = valid && IsTokenChar(c);
  if (!valid) {
    return Status::FailedPrecondition("admin token file " + path +
                                      " is empty or corrupt; delete it to generate a new token, or set "
                                      "ORRERY_ADMIN_TOKEN");
  }
  return token;
}

Status WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::Internal(ErrnoText(errno));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

void SyncDir(const std::string& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() >= 0) ::fsync(fd.get());
}

// Creates `path` holding a fresh token, atomically: the token is written and
// fsynced to a private temp file (O_CREAT|O_EXCL, 0600), then link()ed into
// place, which fails with EEXIST if another process won the race. Readers
// therefore never see a partially written file. ALREADY_EXISTS if it lost.
Result<std::string> CreateTokenFile(const std::string& dir, const std::string& path) {
  const std::string token = "ora_" + RandomHex(64);
  const std::string tmp = path + ".tmp." + RandomHex(16);
  {
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (fd.get() < 0) {
      return Status::FailedPrecondition("cannot create admin token file " + tmp + ": " + ErrnoText(errno));
    }
    Status st = WriteAll(fd.get(), token + "\n");
    if (st.ok() && ::fchmod(fd.get(), 0600) != 0) st = Status::Internal(ErrnoText(errno));
    if (st.ok() && ::fsync(fd.get()) != 0) st = Status::Internal(ErrnoText(errno));
    if (st.ok() && ::close(fd.release()) != 0) st = Status::Internal(ErrnoText(errno));
    if (!st.ok()) {
      ::unlink(tmp.c_str());
      return st.WithPrefix("write admin token file " + tmp);
    }
  }
  int rc = ::link(tmp.c_str(), path.c_str());
  int err = errno;
  ::unlink(tmp.c_str());
  if (rc != 0) {
    if (err == EEXIST) return Status::AlreadyExists(path);
    return Status::FailedPrecondition("cannot create admin token file " + path + ": " + ErrnoText(err));
  }
  SyncDir(dir);
  return token;
}

}  // namespace

std::string RandomHex(size_t n) {
  std::string bytes((n + 1) / 2, '\0');
  if (!bytes.empty() &&
      RAND_bytes(reinterpret_cast<unsigned char*>(bytes.data()), static_cast<int>(bytes.size())) != 1) {
    // The OS CSPRNG is unavailable: nothing secure can be generated.
    std::fputs("orrery: RAND_bytes failed; cannot generate secrets\n", stderr);
    std::abort();
  }
  std::string hex = ToHex(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  hex.resize(n);
  return hex;
}

std::string GenerateApiKey() { return "ork_" + RandomHex(64); }

std::string Sha256(std::string_view data) {
  // Every authenticated RPC hashes its key: the digest is fetched from the
  // provider once and each thread reuses one context, as EVP_Digest with
  // EVP_sha256() fetched and allocated on every call (~9 us, most of it
  // not hashing).
  struct Ctx {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    ~Ctx() { EVP_MD_CTX_free(ctx); }
  };
  static EVP_MD* const sha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  thread_local Ctx t;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (sha256 == nullptr || t.ctx == nullptr || EVP_DigestInit_ex2(t.ctx, sha256, nullptr) != 1 ||
      EVP_DigestUpdate(t.ctx, data.data(), data.size()) != 1 || EVP_DigestFinal_ex(t.ctx, md, &len) != 1 ||
      len != 32) {
    std::fputs("orrery: SHA-256 failed\n", stderr);
    std::abort();
  }
  return std::string(reinterpret_cast<const char*>(md), len);
}

std::string Sha256Hex(std::string_view data) {
  const std::string raw = Sha256(data);
  return ToHex(reinterpret_cast<const unsigned char*>(raw.data()), raw.size());
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // The length is not secret (keys have a fixed format).
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Result<std::string> LoadOrCreateAdminToken(const std::string& data_dir, std::string* created_path) {
  if (created_path != nullptr) created_path->clear();
  if (const char* env = std::getenv("ORRERY_ADMIN_TOKEN"); env != nullptr && env[0] != '\0') {
    return std::string(env);
  }
  if (data_dir.empty()) return Status::InvalidArgument("data directory must not be empty");
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  if (ec) return Status::FailedPrecondition("cannot create data directory " + data_dir + ": " + ec.message());
  const std::string path = data_dir + "/admin.token";

  // Two rounds cover losing a creation race to another process.
  for (int attempt = 0; attempt < 2; ++attempt) {
    Result<std::string> existing = ReadTokenFile(path);
    if (existing.ok() || existing.status().code() != StatusCode::kNotFound) {
      if (existing.ok() && created_path != nullptr) *created_path = path;
      return existing;
    }
    Result<std::string> created = CreateTokenFile(data_dir, path);
    if (created.ok() || created.status().code() != StatusCode::kAlreadyExists) {
      if (created.ok() && created_path != nullptr) *created_path = path;
      return created;
    }
  }
  return Status::FailedPrecondition("admin token file " + path + " keeps disappearing");
}

}  // namespace orrery
