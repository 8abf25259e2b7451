// The ledger journal alone: staging, taking, consuming across laps of the
// ring, and what a recovery reads from the file at any point (the mapping
// is shared, so the file is what a kill -9 would leave).
#include "storage/ledger_journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/common/temp_dir.h"

namespace orrery {
namespace {

using orrery::testing::TempDir;

std::string Payload(int i, size_t size) {
  std::string s = "entry " + std::to_string(i) + " ";
  s.resize(size, static_cast<char>('a' + i % 26));
  return s;
}

std::vector<uint64_t> Seqs(const std::vector<LedgerJournal::Record>& records) {
  std::vector<uint64_t> out;
  for (const auto& r : records) out.push_back(r.seq);
  return out;
}

TEST(LedgerJournalTest, RecoversExactlyWhatIsNotConsumedAcrossLaps) {
  TempDir dir;
  const std::string path = dir.path() + "/journal";
  auto created = LedgerJournal::Create(path, 64 << 10, 100);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::unique_ptr<LedgerJournal> j = std::move(created).value();
  EXPECT_EQ(j->capacity(), 64u << 10);
  uint64_t next = 100;
  // 40 rounds of 7 records of ~1.5-3 KiB: ~12 laps of the 64 KiB ring,
  // with wrap markers at varying offsets.
  for (int round = 0; round < 40; ++round) {
    std::vector<std::string> staged;
    for (int i = 0; i < 7; ++i) {
      staged.push_back(Payload(round * 7 + i, 1500 + 211 * ((round + i) % 8)));
      Result<LedgerJournal::Staged> seq = j->Append(staged.back());
      ASSERT_TRUE(seq.ok()) << "round " << round << ": " << seq.status().ToString();
      EXPECT_EQ(seq->seq, next++);
      EXPECT_EQ(seq->used_bytes, j->used_bytes());
    }
    // A kill now leaves all 7 to recover; applied ones are filtered.
    auto recovered = LedgerJournal::Recover(path, 0);
    ASSERT_TRUE(recovered.ok()) << recovered.status().ToString();
    ASSERT_EQ(recovered->size(), 7u) << "round " << round;
    for (int i = 0; i < 7; ++i) {
      EXPECT_EQ((*recovered)[i].payload, staged[i]);
      EXPECT_EQ((*recovered)[i].seq, next - 7 + i);
    }
    auto after = LedgerJournal::Recover(path, next - 3);
    ASSERT_TRUE(after.ok());
    EXPECT_EQ(Seqs(*after), (std::vector<uint64_t>{next - 2, next - 1}));

    LedgerJournal::Pending p = j->Take();
    ASSERT_EQ(p.records.size(), 7u);
    EXPECT_EQ(p.records.front().payload, staged.front());
    EXPECT_EQ(p.records.back().seq, next - 1);
    j->Consume(p.end_pos);
    EXPECT_EQ(j->used_bytes(), 0u);
    // What remains in the file is applied (the catalog consumes only after
    // applying, and recovers with its applied mark): all of it at most that.
    recovered = LedgerJournal::Recover(path, next - 1);
    ASSERT_TRUE(recovered.ok());
    EXPECT_TRUE(recovered->empty()) << "round " << round << ": " << recovered->size() << " consumed records came back";
    recovered = LedgerJournal::Recover(path, 0);
    ASSERT_TRUE(recovered.ok());
    for (const auto& r : *recovered) EXPECT_LT(r.seq, next) << "round " << round;
  }
}

TEST(LedgerJournalTest, FullRefusesWithoutWritingUntilConsumed) {
  TempDir dir;
  const std::string path = dir.path() + "/journal";
  auto j = std::move(LedgerJournal::Create(path, 64 << 10, 1)).value();
  int staged = 0;
  Status refused;
  while (true) {
    Result<LedgerJournal::Staged> seq = j->Append(Payload(staged, 4000));
    if (!seq.ok()) {
      refused = seq.status();
      break;
    }
    ++staged;
  }
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted) << refused.ToString();
  EXPECT_NE(refused.message().find("ledger journal full"), std::string::npos) << refused.ToString();
  EXPECT_EQ(staged, 16);  // 64 KiB / 4016 bytes a record
  auto recovered = LedgerJournal::Recover(path, 0);
  ASSERT_TRUE(recovered.ok());
  EXPECT_EQ(recovered->size(), static_cast<size_t>(staged)) << "a refused append wrote something";
  LedgerJournal::Pending p = j->Take();
  j->Consume(p.end_pos);
  Result<LedgerJournal::Staged> seq = j->Append(Payload(99, 4000));
  ASSERT_TRUE(seq.ok()) << seq.status().ToString();
  EXPECT_EQ(seq->seq, static_cast<uint64_t>(staged) + 1);
}

TEST(LedgerJournalTest, RejectsEmptyAndOversizeRecords) {
  TempDir dir;
  auto j = std::move(LedgerJournal::Create(dir.path() + "/journal", 64 << 10, 1)).value();
  EXPECT_EQ(j->Append("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(j->Append(std::string((16 << 10) + 1, 'x')).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(j->Append(std::string(16 << 10, 'x')).ok());
}

TEST(LedgerJournalTest, ACorruptRecordEndsRecovery) {
  TempDir dir;
  const std::string path = dir.path() + "/journal";
  auto j = std::move(LedgerJournal::Create(path, 64 << 10, 1)).value();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(j->Append(Payload(i, 100)).ok());
  // The second record's payload starts at 4096 (header) + 128 (the first,
  // 16 + 100 rounded up to 16) + 16 (its own header).
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  ASSERT_EQ(::pwrite(fd.get(), "X", 1, 4096 + 128 + 16 + 5), 1);
  auto recovered = LedgerJournal::Recover(path, 0);
  ASSERT_TRUE(recovered.ok());
  EXPECT_EQ(Seqs(*recovered), (std::vector<uint64_t>{1}));
}

TEST(LedgerJournalTest, NoFileOrNotAJournalRecoversNothing) {
  TempDir dir;
  auto none = LedgerJournal::Recover(dir.path() + "/missing", 0);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  const std::string path = dir.path() + "/garbage";
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  ASSERT_TRUE(fd.valid());
  const std::string junk(10000, 'j');
  ASSERT_EQ(::write(fd.get(), junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
  auto garbage = LedgerJournal::Recover(path, 0);
  ASSERT_TRUE(garbage.ok()) << garbage.status().ToString();
  EXPECT_TRUE(garbage->empty());
  // Create replaces whatever was there.
  auto j = LedgerJournal::Create(path, 1, 7);
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)->capacity(), 64u << 10);  // the minimum
  EXPECT_EQ((*j)->Append("x")->seq, 7u);
}

}  // namespace
}  // namespace orrery
