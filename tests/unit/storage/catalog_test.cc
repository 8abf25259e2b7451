#include "storage/catalog.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <latch>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include "tests/unit/storage/catalog_test_util.h"

namespace orrery {
namespace {


// ---- child processes (fork + exec of this binary, so the child starts with a
// clean RocksDB environment instead of a forked copy of the parent's threads)

constexpr char kChildModeEnv[] = "ORRERY_STORAGE_TEST_CHILD_MODE";
constexpr char kChildDirEnv[] = "ORRERY_STORAGE_TEST_CHILD_DIR";
constexpr char kChildFdEnv[] = "ORRERY_STORAGE_TEST_CHILD_FD";

struct Child {
  pid_t pid = -1;
  int read_fd = -1;
};

Child SpawnChild(const std::string& mode, const std::string& dir) {
  int fds[2];
  if (::pipe(fds) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return {};
  }
  ::fcntl(fds[0], F_SETFD, FD_CLOEXEC);
  // Everything the child needs is prepared before fork().
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  env_strings.push_back(std::string(kChildModeEnv) + "=" + mode);
  env_strings.push_back(std::string(kChildDirEnv) + "=" + dir);
  env_strings.push_back(std::string(kChildFdEnv) + "=" + std::to_string(fds[1]));
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string arg0 = "storage_tests";
  std::string arg1 = "--gtest_filter=CatalogChild.Run";
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);

  pid_t pid = ::fork();
  if (pid == 0) {
    if (devnull >= 0) ::dup2(devnull, STDOUT_FILENO);
    ::execve("/proc/self/exe", argv, envp.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  if (devnull >= 0) ::close(devnull);
  EXPECT_GT(pid, 0) << std::strerror(errno);
  return {pid, fds[0]};
}

// Reads one '\n'-terminated line from the child (timeout in ms).
std::string ReadLine(int fd, int timeout_ms) {
  std::string line;
  while (true) {
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, timeout_ms);
    if (r <= 0) return line + "<timeout>";
    char c;
    ssize_t n = ::read(fd, &c, 1);
    if (n <= 0) return line;
    if (c == '\n') return line;
    line.push_back(c);
  }
}

int WaitChild(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

void ChildWrite(int fd, const std::string& s) {
  std::string line = s + "\n";
  ASSERT_EQ(::write(fd, line.data(), line.size()), static_cast<ssize_t>(line.size()));
}

// The child modes' catalog, or null after telling the parent why not.
std::unique_ptr<Catalog> OpenInChild(const std::string& dir, Catalog::Options options, int fd) {
  auto r = Catalog::Open(dir, options);
  if (!r.ok()) {
    ChildWrite(fd, "open: " + r.status().ToString());
    return nullptr;
  }
  return std::move(r).value();
}

// Appends INFERENCE entries r0 .. r<n-1> of one microdollar for t_crash;
// the first error.
Status AppendCrashEntries(Catalog* c, int n, LedgerAppendOptions options) {
  for (int i = 0; i < n; ++i) {
    LedgerEntry e;
    e.set_kind(LedgerEntry::INFERENCE);
    e.set_tenant_id("t_crash");
    std::string rid = "r";
    rid += std::to_string(i);
    e.set_request_id(rid);
    e.set_cost_micros(1);
    Result<bool> st = c->AppendLedger(&e, options);
    if (!st.ok()) return st.status();
  }
  return Status::Ok();
}

// Runs only inside a spawned child; skipped in a normal test run.
TEST(CatalogChild, Run) {
  const char* mode = std::getenv(kChildModeEnv);
  if (mode == nullptr) GTEST_SKIP() << "helper for the multi-process tests";
  const std::string dir = std::getenv(kChildDirEnv);
  const int fd = std::atoi(std::getenv(kChildFdEnv));
  if (std::string(mode) == "lock") {
    auto r = Catalog::Open(dir);
    ChildWrite(fd, r.ok() ? "OK" : r.status().ToString());
    return;
  }
  if (std::string(mode) == "crash") {
    auto r = Catalog::Open(dir);
    if (!r.ok()) {
      ChildWrite(fd, "open: " + r.status().ToString());
      return;
    }
    std::unique_ptr<Catalog> c = std::move(r).value();
    Status st = AddTenant(c.get(), "t_crash", "crash-tenant", 1);
    if (!st.ok()) {
      ChildWrite(fd, "tenant: " + st.ToString());
      return;
    }
    ModelRecord m = MakeModel("t_crash", "crash-model");
    st = c->PutModel(&m, std::string(10000, 'z'));
    if (!st.ok()) {
      ChildWrite(fd, "model: " + st.ToString());
      return;
    }
    ChildWrite(fd, "ACKED");
    // Wait to be killed; never close the catalog cleanly.
    for (;;) ::pause();
  }
  if (std::string(mode) == "ledger-crash") {
    // Ledger appends that return before any fsync (the background one is
    // an hour away): kill -9 right after must not lose them.
    std::unique_ptr<Catalog> c = OpenInChild(dir, Catalog::Options{.ledger_sync_interval_ms = 3'600'000}, fd);
    if (c == nullptr) return;
    if (Status st = AppendCrashEntries(c.get(), 100, {}); !st.ok()) {
      ChildWrite(fd, "ledger: " + st.ToString());
      return;
    }
    ChildWrite(fd, c->ledger_wal_syncs() == 0 ? "ACKED" : "an append waited for an fsync");
    for (;;) ::pause();
  }
  if (std::string(mode) == "ledger-journal-crash") {
    // Entries staged in the journal (no background move for an hour; a
    // 64 KiB ring, so appends also move it when full): kill -9 right
    // after must lose none.
    std::unique_ptr<Catalog> c = OpenInChild(
        dir, Catalog::Options{.ledger_sync_interval_ms = 3'600'000, .ledger_journal_bytes = 64 << 10}, fd);
    if (c == nullptr) return;
    if (Status st = AppendCrashEntries(c.get(), 1000, {.new_request_id = true}); !st.ok()) {
      ChildWrite(fd, "ledger: " + st.ToString());
      return;
    }
    const Catalog::LedgerJournalStats s = c->ledger_journal_stats();
    std::string ack = "ACKED";
    if (s.staged != 1000 || s.used_bytes == 0) {
      ack = "staged ";
      ack += std::to_string(s.staged);
      ack += ", bytes pending ";
      ack += std::to_string(s.used_bytes);
    }
    ChildWrite(fd, ack);
    for (;;) ::pause();
  }
  FAIL() << "unknown child mode " << mode;
}

// ---- schema

TEST(CatalogTest, WritesAndReadsSchemaVersion) {
  TempDir tmp;
  {
    auto c = MustOpen(tmp.db());
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->schema_version(), Catalog::kSchemaVersion);
  }
  {
    RawDb raw(tmp.db());
    for (const char* cf : {"meta", "tenants", "keys", "models", "blobs", "uploads", "cost_profiles", "ledger"}) {
      EXPECT_NE(std::find(raw.names().begin(), raw.names().end(), cf), raw.names().end()) << cf;
    }
    std::string v = raw.Get("meta", "schema_version");
    ASSERT_EQ(v.size(), 4u);
    EXPECT_EQ(v, std::string("\x02\x00\x00\x00", 4));
  }
  auto c = MustOpen(tmp.db());
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->schema_version(), 2u);
}

TEST(CatalogTest, NewerSchemaVersionRejected) {
  TempDir tmp;
  MustOpen(tmp.db()).reset();
  {
    RawDb raw(tmp.db());
    raw.Put("meta", "schema_version", std::string("\x07\x00\x00\x00", 4));
  }
  auto r = Catalog::Open(tmp.db());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("schema version 7"), std::string::npos) << r.status().message();
  // Rejecting did not leave the DB locked.
  {
    RawDb raw(tmp.db());
    raw.Put("meta", "schema_version", std::string("\x01\x00\x00\x00", 4));
  }
  EXPECT_NE(MustOpen(tmp.db()), nullptr);
}

TEST(CatalogTest, InvalidSchemaRecordIsDataLoss) {
  TempDir tmp;
  MustOpen(tmp.db()).reset();
  {
    RawDb raw(tmp.db());
    raw.Put("meta", "schema_version", "xy");
  }
  auto r = Catalog::Open(tmp.db());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
}

TEST(CatalogTest, OpensDatabaseWithExtraColumnFamily) {
  TempDir tmp;
  MustOpen(tmp.db()).reset();
  {
    rocksdb::DB* raw_db = nullptr;
    std::vector<std::string> names;
    ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), tmp.db(), &names).ok());
    std::vector<rocksdb::ColumnFamilyDescriptor> descs;
    for (const auto& n : names) descs.emplace_back(n, rocksdb::ColumnFamilyOptions());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::DBOptions(), tmp.db(), descs, &handles, &raw_db).ok());
    std::unique_ptr<rocksdb::DB> db(raw_db);
    rocksdb::ColumnFamilyHandle* extra = nullptr;
    ASSERT_TRUE(db->CreateColumnFamily(rocksdb::ColumnFamilyOptions(), "future_cf", &extra).ok());
    handles.push_back(extra);
    for (auto* h : handles) ASSERT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
    ASSERT_TRUE(db->Close().ok());
  }
  EXPECT_NE(MustOpen(tmp.db()), nullptr);
}

// ---- persistence

TEST(CatalogTest, ReopenPersistsTenantsKeysAndModels) {
  TempDir tmp;
  const std::string blob = "onnx-bytes-v1";
  {
    auto c = MustOpen(tmp.db());
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(AddTenant(c.get(), "t_1", "acme", 1).ok());
    auto v = Put(c.get(), "t_1", "resnet", blob);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(*v, 1u);
  }
  auto c = MustOpen(tmp.db());
  ASSERT_NE(c, nullptr);
  auto t = c->GetTenant("t_1");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->name(), "acme");
  EXPECT_EQ(t->created_unix_ms(), 1234);
  auto by_name = c->GetTenantByName("acme");
  ASSERT_TRUE(by_name.ok());
  EXPECT_EQ(by_name->id(), "t_1");
  auto k = c->GetKey(Digest(1));
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_EQ(k->tenant_id(), "t_1");
  EXPECT_EQ(k->key_id(), "k_t_1");
  auto m = c->GetModel("t_1", "resnet");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->version(), 1u);
  EXPECT_EQ(m->size_bytes(), blob.size());
  EXPECT_EQ(m->opset(), 17);
  ASSERT_EQ(m->inputs_size(), 1);
  EXPECT_EQ(m->inputs(0).shape_size(), 2);
  EXPECT_GT(m->created_unix_ms(), 0);
  auto b = c->GetModelBlob("t_1", "resnet", 1);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, blob);
}

TEST(CatalogTest, NotFoundLookups) {
  TempDir tmp;
  auto c = MustOpen(tmp.db());
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->GetTenant("t_x").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c->GetTenantByName("x").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c->GetKey(Digest(9)).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c->GetModel("t_x", "m").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c->GetModelBlob("t_x", "m", 1).status().code(), StatusCode::kNotFound);
  auto list = c->ListModels("t_x");
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
  auto tenants = c->ListTenants();
  ASSERT_TRUE(tenants.ok());
  EXPECT_TRUE(tenants->empty());
}

// ---- tenants

TEST(CatalogTest, DuplicateTenantNameAlreadyExists) {
  TempDir tmp;
  auto c = MustOpen(tmp.db());
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(AddTenant(c.get(), "t_1", "acme", 1).ok());
  Status st = AddTenant(c.get(), "t_2", "acme", 2);
  EXPECT_EQ(st.code(), StatusCode::kAlreadyExists) << st.ToString();
  EXPECT_EQ(AddTenant(c.get(), "t_1", "other", 3).code(), StatusCode::kAlreadyExists);  // same id
  EXPECT_EQ(AddTenant(c.get(), "t_3", "other", 1).code(), StatusCode::kAlreadyExists);  // same key
  // Nothing of the failed attempts was written.
  EXPECT_EQ(c->GetTenant("t_2").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c->GetKey(Digest(2)).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c->GetTenantByName("other").status().code(), StatusCode::kNotFound);
}

TEST(CatalogTest, CreateTenantRejectsBadArguments) {
  TempDir tmp;
  auto c = MustOpen(tmp.db());
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->CreateTenant(MakeTenant("", "a"), Digest(1), MakeKey("k", "")).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(c->CreateTenant(MakeTenant("t_1", "a"), "short", MakeKey("k", "t_1")).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(c->CreateTenant(MakeTenant("t_1", "a"), Digest(1), MakeKey("k", "t_2")).code(),
            StatusCode::kInvalidArgument);
}

TEST(CatalogTest, ListTenantsByName) {
  TempDir tmp;
  auto c = MustOpen(tmp.db());
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(AddTenant(c.get(), "t_1", "zeta", 1).ok());
  ASSERT_TRUE(AddTenant(c.get(), "t_2", "alpha", 2).ok());
  ASSERT_TRUE(AddTenant(c.get(), "t_3", "mid", 3).ok());
  auto list = c->ListTenants();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].name(), "alpha");
  EXPECT_EQ((*list)[1].name(), "mid");
  EXPECT_EQ((*list)[2].name(), "zeta");
  EXPECT_EQ((*list)[0].id(), "t_2");
}

TEST(CatalogTest, SetTenantDisabled) {
  TempDir tmp;
  auto c = MustOpen(tmp.db());
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(AddTenant(c.get(), "t_1", "acme", 1).ok());
  ASSERT_TRUE(c->SetTenantDisabled("t_1", true).ok());
  EXPECT_TRUE(c->GetTenant("t_1")->disabled());
  ASSERT_TRUE(c->SetTenantDisabled("t_1", false).ok());
  EXPECT_FALSE(c->GetTenant("t_1")->disabled());
  EXPECT_EQ(c->SetTenantDisabled("t_nope", true).code(), StatusCode::kNotFound);
}

TEST(CatalogTest, ConcurrentCreateTenantSameNameOneWins) {
  TempDir tmp;
  auto c = MustOpen(tmp.db(), Catalog::Options{.sync_writes = false});
  ASSERT_NE(c, nullptr);
  constexpr int kThreads = 8;
  for (int round = 0; round < 5; ++round) {
    std::latch start(kThreads);
    std::vector<Status> results(kThreads);
    std::vector<std::thread> threads;
    const std::string name = "contested-" + std::to_string(round);
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        const int seed = round * 100 + i;
        results[i] = AddTenant(c.get(), "t_" + std::to_string(seed), name, seed);
      });
    }
    for (auto& t : threads) t.join();
    int ok = 0;
    for (const Status& st : results) {
      if (st.ok()) {
        ++ok;
      } else {
        EXPECT_EQ(st.code(), StatusCode::kAlreadyExists) << st.ToString();
      }
    }
    EXPECT_EQ(ok, 1) << "round " << round;
  }
  auto list = c->ListTenants();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 5u);
}

// ---- models

TEST(CatalogTest, PutModelAssignsVersionsAndGetModelFindsThem) {
  TempDir tmp;
  auto c = MustOpen(tmp.db());
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(AddTenant(c.get(), "t_1", "acme", 1).ok());
  for (uint64_t want = 1; want <= 3; ++want) {
    auto v = Put(c.get(), "t_1", "m", "bytes-" + std::to_string(want));
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(*v, want);
  }
  auto other = Put(c.get(), "t_1", "other", "x");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(*other, 1u);

  auto latest = c->GetModel("t_1", "m");
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->version(), 3u);
  auto v2 = c->GetModel("t_1", "m", 2);
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ(v2->version(), 2u);
  EXPECT_EQ(v2->size_bytes(), 7u);
  EXPECT_EQ(*c->GetModelBlob("t_1", "m", 2), "bytes-2");
  EXPECT_EQ(*c->GetModelBlob("t_1", "m", 0), "bytes-3");  // 0 = latest
  EXPECT_EQ(c->GetModel("t_1", "m", 4).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c->GetModel("t_1", "nope").status().code(), StatusCode::kNotFound);
  // "m" is a prefix of "m2" in key space only up to the separator.
  EXPECT_EQ(c->GetModel("t_1", "o").status().code(), StatusCode::kNotFound);
}

TEST(CatalogTest, PutModelValidates) {
  TempDir tmp;
  auto c = MustOpen(tmp.db());
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(Put(c.get(), "t_missing", "m", "x").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(AddTenant(c.get(), "t_1", "acme", 1).ok());
  EXPECT_EQ(Put(c.get(), "t_1", "", "x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Put(c.get(), "t_1", std::string("a\0b", 3), "x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c->PutModel(nullptr, "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c->GetModel("", "m").status().code(), StatusCode::kInvalidArgument);
}

TEST(CatalogTest, ListModelsOrderedAndSeparatedByTenant) {
  TempDir tmp;
  auto c = MustOpen(tmp.db(), Catalog::Options{.sync_writes = false});
  ASSERT_NE(c, nullptr);
  // "t_a" is a prefix of "t_ab": their models must never mix.
  ASSERT_TRUE(AddTenant(c.get(), "t_a", "a", 1).ok());
  ASSERT_TRUE(AddTenant(c.get(), "t_ab", "ab", 2).ok());
  ASSERT_TRUE(AddTenant(c.get(), "t_b", "b", 3).ok());
  for (const char* name : {"zeta", "alpha", "alpha.v2", "alpha", "b", "zeta"}) {
    ASSERT_TRUE(Put(c.get(), "t_a", name, "x").ok());
  }
  ASSERT_TRUE(Put(c.get(), "t_ab", "alpha", "y").ok());
  ASSERT_TRUE(Put(c.get(), "t_ab", "only-ab", "y").ok());
  // Versions past 255 sort numerically (big-endian encoding).
  for (int i = 0; i < 260; ++i) ASSERT_TRUE(Put(c.get(), "t_b", "many", "z").ok());

  auto a = c->ListModels("t_a");
  ASSERT_TRUE(a.ok());
  std::vector<std::pair<std::string, uint64_t>> got;
  for (const auto& m : *a) {
    EXPECT_EQ(m.tenant_id(), "t_a");
    got.emplace_back(m.name(), m.version());
  }
  std::vector<std::pair<std::string, uint64_t>> want = {
      {"alpha", 1}, {"alpha", 2}, {"alpha.v2", 1}, {"b", 1}, {"zeta", 1}, {"zeta", 2}};
  EXPECT_EQ(got, want);

  auto ab = c->ListModels("t_ab");
  ASSERT_TRUE(ab.ok());
  ASSERT_EQ(ab->size(), 2u);
  EXPECT_EQ((*ab)[0].name(), "alpha");
  EXPECT_EQ((*ab)[0].version(), 1u);
  EXPECT_EQ((*ab)[1].name(), "only-ab");
  for (const auto& m : *ab) EXPECT_EQ(m.tenant_id(), "t_ab");
  EXPECT_EQ(c->GetModel("t_ab", "zeta").status().code(), StatusCode::kNotFound);

  auto b = c->ListModels("t_b");
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->size(), 260u);
  for (size_t i = 0; i < b->size(); ++i) EXPECT_EQ((*b)[i].version(), i + 1);
  EXPECT_EQ(c->GetModel("t_b", "many")->version(), 260u);

  EXPECT_TRUE(c->ListModels("t_")->empty());
  EXPECT_TRUE(c->ListModels("t_c")->empty());
}

TEST(CatalogTest, FiveMegabyteBlobRoundTrip) {
  TempDir tmp;
  std::string blob(5 * 1024 * 1024, '\0');
  std::mt19937_64 rng(42);
  for (size_t i = 0; i + 8 <= blob.size(); i += 8) {
    uint64_t v = rng();
    std::memcpy(&blob[i], &v, 8);
  }
  {
    auto c = MustOpen(tmp.db());
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(AddTenant(c.get(), "t_1", "acme", 1).ok());
    ASSERT_TRUE(Put(c.get(), "t_1", "big", blob).ok());
    auto got = c->GetModelBlob("t_1", "big", 1);
    ASSERT_TRUE(got.ok());
    EXPECT_TRUE(*got == blob);
    EXPECT_EQ(c->GetModel("t_1", "big")->size_bytes(), blob.size());
  }
  // After reopen (WAL replayed and flushed) the value lives in a blob file.
  auto c = MustOpen(tmp.db());
  ASSERT_NE(c, nullptr);
  auto got = c->GetModelBlob("t_1", "big", 1);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), blob.size());
  EXPECT_TRUE(*got == blob);
  bool has_blob_file = false;
  for (const auto& e : std::filesystem::directory_iterator(tmp.db())) {
    if (e.path().extension() == ".blob") has_blob_file = true;
  }
  EXPECT_TRUE(has_blob_file);
}

TEST(CatalogTest, DeleteModel) {
  TempDir tmp;
  auto c = MustOpen(tmp.db());
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(AddTenant(c.get(), "t_1", "acme", 1).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Put(c.get(), "t_1", "m", "v" + std::to_string(i + 1)).ok());
  ASSERT_TRUE(Put(c.get(), "t_1", "keep", "k").ok());

  ASSERT_TRUE(c->DeleteModel("t_1", "m", 2).ok());
  EXPECT_EQ(c->GetModel("t_1", "m", 2).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c->GetModelBlob("t_1", "m", 2).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c->DeleteModel("t_1", "m", 2).code(), StatusCode::kNotFound);
  EXPECT_EQ(c->GetModel("t_1", "m")->version(), 3u);
  EXPECT_EQ(c->ListModels("t_1")->size(), 3u);

  ASSERT_TRUE(c->DeleteModel("t_1", "m").ok());  // all remaining versions
  EXPECT_EQ(c->GetModel("t_1", "m").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c->GetModelBlob("t_1", "m", 1).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c->GetModelBlob("t_1", "m", 3).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c->DeleteModel("t_1", "m").code(), StatusCode::kNotFound);
  auto rest = c->ListModels("t_1");
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->size(), 1u);
  EXPECT_EQ((*rest)[0].name(), "keep");
  EXPECT_EQ(c->DeleteModel("t_1", "never").code(), StatusCode::kNotFound);
}

// ---- locking, corruption, crashes

TEST(CatalogTest, SecondOpenWhileOpenFailsCleanly) {
  TempDir tmp;
  auto c = MustOpen(tmp.db());
  ASSERT_NE(c, nullptr);
  auto second = Catalog::Open(tmp.db());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition) << second.status().ToString();
  EXPECT_NE(second.status().message().find("locked"), std::string::npos);

  // Another process gets the same answer.
  Child child = SpawnChild("lock", tmp.db());
  ASSERT_GT(child.pid, 0);
  std::string line = ReadLine(child.read_fd, 30000);
  ::close(child.read_fd);
  int status = WaitChild(child.pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(line.rfind("FAILED_PRECONDITION", 0), 0u) << line;

  // The first handle still works, and after closing it the DB opens again.
  EXPECT_TRUE(AddTenant(c.get(), "t_1", "acme", 1).ok());
  c.reset();
  EXPECT_NE(MustOpen(tmp.db()), nullptr);
}

TEST(CatalogTest, CorruptRecordsAreDataLoss) {
  TempDir tmp;
  {
    auto c = MustOpen(tmp.db());
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(AddTenant(c.get(), "t_1", "acme", 1).ok());
    ASSERT_TRUE(Put(c.get(), "t_1", "m", "x").ok());
  }
  // Wire type 7 does not exist, so this never parses.
  const std::string garbage("\xff\xff\xff\xff\x0f", 5);
  {
    RawDb raw(tmp.db());
    raw.Put("tenants", "id/t_1", garbage);
    raw.Put("models", ModelKey("t_1", "m", 1), garbage);
    raw.Put("keys", Digest(1), garbage);
  }
  auto c = MustOpen(tmp.db());
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->GetTenant("t_1").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(c->GetTenantByName("acme").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(c->ListTenants().status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(c->GetKey(Digest(1)).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(c->GetModel("t_1", "m").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(c->GetModel("t_1", "m", 1).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(c->ListModels("t_1").status().code(), StatusCode::kDataLoss);
}

// Runs the child `mode` on `dir` and SIGKILLs it as soon as it reports
// "ACKED" (its writes were acknowledged).
void KillChildAfterAck(const std::string& mode, const std::string& dir) {
  Child child = SpawnChild(mode, dir);
  ASSERT_GT(child.pid, 0);
  std::string line = ReadLine(child.read_fd, 30000);
  ::kill(child.pid, SIGKILL);  // immediately after the acknowledgement
  ::close(child.read_fd);
  int status = WaitChild(child.pid);
  ASSERT_EQ(line, "ACKED");
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
}

TEST(CatalogTest, AcknowledgedWritesSurviveKill9) {
  TempDir tmp;
  ASSERT_NO_FATAL_FAILURE(KillChildAfterAck("crash", tmp.db()));

  auto c = MustOpen(tmp.db());
  ASSERT_NE(c, nullptr);
  auto t = c->GetTenantByName("crash-tenant");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->id(), "t_crash");
  EXPECT_TRUE(c->GetKey(Digest(1)).ok());
  auto m = c->GetModel("t_crash", "crash-model");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->version(), 1u);
  auto b = c->GetModelBlob("t_crash", "crash-model", 1);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, std::string(10000, 'z'));
}

TEST(CatalogTest, LedgerAppendsWithoutFsyncSurviveKill9) {
  TempDir tmp;
  ASSERT_NO_FATAL_FAILURE(KillChildAfterAck("ledger-crash", tmp.db()));

  auto c = MustOpen(tmp.db());
  ASSERT_NE(c, nullptr);
  auto totals = c->GetLedgerTotals("t_crash");
  ASSERT_TRUE(totals.ok()) << totals.status().ToString();
  EXPECT_EQ(totals->entries(), 100u);
  EXPECT_TRUE(c->GetLedgerEntry("t_crash", "r99").ok());
}

TEST(CatalogTest, LedgerEntriesStagedInTheJournalSurviveKill9) {
  TempDir tmp;
  ASSERT_NO_FATAL_FAILURE(KillChildAfterAck("ledger-journal-crash", tmp.db()));
  for (int reopen = 0; reopen < 2; ++reopen) {  // the second finds nothing left to move
    auto c = MustOpen(tmp.db());
    ASSERT_NE(c, nullptr);
    auto totals = c->GetLedgerTotals("t_crash");
    ASSERT_TRUE(totals.ok()) << totals.status().ToString();
    EXPECT_EQ(totals->entries(), 1000u) << "reopen " << reopen;
    EXPECT_EQ(totals->cost_micros(), 1000);
    for (int i = 0; i < 1000; i += 111) EXPECT_TRUE(c->GetLedgerEntry("t_crash", "r" + std::to_string(i)).ok()) << i;
    auto listed = c->ListLedger("t_crash", 0, 0);
    ASSERT_TRUE(listed.ok());
    EXPECT_EQ(listed->size(), 1000u);
  }
}

}  // namespace
}  // namespace orrery
