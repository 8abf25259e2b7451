#include "storage/segment_store.h"

#include <algorithm>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "storage/segment_recovery.h"

namespace orrery {
namespace {

namespace fs = std::filesystem;

class SegmentStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "segment-store-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    data_dir_ = tmpl;
    auto store = SegmentStore::Open(data_dir_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    for (size_t i = 0; i < 10000; ++i) payload_.push_back(static_cast<std::byte>(i * 7 % 251));
  }
  void TearDown() override { fs::remove_all(data_dir_); }

  std::string PathOf(const std::string& name) const { return store_->dir() + "/" + name; }

  void FlipByte(const std::string& name, size_t offset) {
    std::fstream f(PathOf(name), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x5a);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(&c, 1);
  }

  std::string data_dir_;
  std::unique_ptr<SegmentStore> store_;
  std::vector<std::byte> payload_;
};

TEST_F(SegmentStoreTest, WriteThenReadVerifiesAndReturnsThePayload) {
  EXPECT_EQ(store_->dir(), data_dir_ + "/segments");
  const std::string name = SegmentStore::NewName();
  EXPECT_NE(name, SegmentStore::NewName());
  auto info = store_->Write(name, 3, 42, payload_);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->name, name);
  EXPECT_EQ(info->bytes % kSegmentPageSize, 0u);
  EXPECT_EQ(info->bytes, fs::file_size(PathOf(name)));
  EXPECT_EQ(info->format_version, kSegmentFormatVersion);
  EXPECT_NE(info->header_crc32c, 0u);

  AlignedBuffer buffer;
  auto read = store_->Read(name, {.layout_version = 3, .content_id = 42, .header_crc32c = info->header_crc32c},
                           &buffer);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->size(), payload_.size());
  EXPECT_TRUE(std::equal(read->begin(), read->end(), payload_.begin()));
}

TEST_F(SegmentStoreTest, CorruptTruncatedOrForeignSegmentsAreDataLoss) {
  const std::string name = SegmentStore::NewName();
  auto info = store_->Write(name, 3, 42, payload_);
  ASSERT_TRUE(info.ok());
  const SegmentExpectation want{.layout_version = 3, .content_id = 42, .header_crc32c = info->header_crc32c};
  AlignedBuffer buffer;

  // Another content id, layout, or recorded header CRC: not this record's segment.
  EXPECT_EQ(store_->Read(name, {.layout_version = 3, .content_id = 43}, &buffer).status().code(),
            StatusCode::kDataLoss);
  EXPECT_EQ(store_->Read(name, {.layout_version = 4, .content_id = 42}, &buffer).status().code(),
            StatusCode::kDataLoss);
  EXPECT_EQ(store_->Read(name, {.layout_version = 3, .content_id = 42, .header_crc32c = info->header_crc32c ^ 1},
                         &buffer)
                .status()
                .code(),
            StatusCode::kDataLoss);

  // A segment renamed to another record's name carries the wrong key.
  const std::string other = SegmentStore::NewName();
  fs::copy_file(PathOf(name), PathOf(other));
  EXPECT_EQ(store_->Read(other, {.layout_version = 3, .content_id = 42}, &buffer).status().code(),
            StatusCode::kDataLoss);

  // One flipped payload byte.
  FlipByte(name, kSegmentPageSize + 123);
  Result<std::span<const std::byte>> r = store_->Read(name, want, &buffer);
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find(name), std::string::npos) << r.status().message();

  // Truncated.
  ASSERT_TRUE(store_->Write(name, 3, 42, payload_).ok());
  ASSERT_TRUE(store_->Read(name, want, &buffer).ok());
  fs::resize_file(PathOf(name), kSegmentPageSize);
  EXPECT_EQ(store_->Read(name, want, &buffer).status().code(), StatusCode::kDataLoss);

  EXPECT_EQ(store_->Read(SegmentStore::NewName(), want, &buffer).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->Read("../x.seg", want, &buffer).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(SegmentStoreTest, RecoverRemovesOrphansAndTempFilesAndKeepsLiveOnes) {
  const std::string live = SegmentStore::NewName();
  const std::string orphan = SegmentStore::NewName();
  ASSERT_TRUE(store_->Write(live, 1, 1, payload_).ok());
  ASSERT_TRUE(store_->Write(orphan, 1, 2, payload_).ok());
  // A temp file as a writer killed mid-write leaves it (another pid's name).
  const std::string temp = "." + orphan + ".tmp-0123456789abcdef.999999-1";
  std::ofstream(PathOf(temp)) << "partial";
  ASSERT_TRUE(fs::exists(PathOf(temp)));

  size_t temps = 0;
  auto removed = store_->Recover({live}, &temps);
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(*removed, std::vector<std::string>{orphan});
  EXPECT_EQ(temps, 1u);
  EXPECT_TRUE(fs::exists(PathOf(live)));
  EXPECT_FALSE(fs::exists(PathOf(orphan)));
  EXPECT_FALSE(fs::exists(PathOf(temp)));

  // Remove is idempotent.
  EXPECT_TRUE(store_->Remove(live).ok());
  EXPECT_FALSE(fs::exists(PathOf(live)));
  EXPECT_TRUE(store_->Remove(live).ok());
}

TEST_F(SegmentStoreTest, SectionsWriteAndReadVerifiedByName) {
  const std::string name = SegmentStore::NewName();
  const std::vector<std::byte> a(5000, std::byte{1}), b(3, std::byte{2});
  const SegmentSectionData sections[] = {{"model_image", a}, {"packed_weights", b}};
  auto info = store_->WriteSections(name, 2, 42, sections);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  AlignedBuffer buffer;
  // Layout 0 accepts any layout; the caller reads it from the header.
  auto header = store_->ReadVerified(name, {.layout_version = 0, .content_id = 42,
                                            .header_crc32c = info->header_crc32c}, &buffer);
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  EXPECT_EQ(header->layout_version, 2u);
  auto sa = SegmentStore::Section(*header, buffer, "model_image");
  auto sb = SegmentStore::Section(*header, buffer, "packed_weights");
  ASSERT_TRUE(sa.ok() && sb.ok());
  EXPECT_TRUE(std::equal(sa->begin(), sa->end(), a.begin(), a.end()));
  EXPECT_TRUE(std::equal(sb->begin(), sb->end(), b.begin(), b.end()));
  // Sections start page-aligned in the buffer (packed data can be borrowed).
  EXPECT_EQ(reinterpret_cast<uintptr_t>(sb->data()) % 4096, 0u);
  auto missing = SegmentStore::Section(*header, buffer, "nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
  // A named layout must match; so must the content id.
  EXPECT_EQ(store_->ReadVerified(name, {.layout_version = 1, .content_id = 42}, &buffer).status().code(),
            StatusCode::kDataLoss);
  EXPECT_EQ(store_->ReadVerified(name, {.layout_version = 0, .content_id = 41}, &buffer).status().code(),
            StatusCode::kDataLoss);
  // Read (one packed_weights section) still works on a sectioned file.
  auto payload = store_->Read(name, {.layout_version = 2, .content_id = 42}, &buffer);
  ASSERT_TRUE(payload.ok());
  EXPECT_EQ(payload->size(), 3u);
}

}  // namespace
}  // namespace orrery
