#include "storage/segment_format.h"

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace orrery {
namespace {

std::vector<std::byte> Encode(const SegmentHeader& h) {
  std::vector<std::byte> page(kSegmentPageSize);
  EncodeSegmentHeader(h, page);
  return page;
}

TEST(SegmentFormat, PlanAssignsCanonicalPageAlignedOffsets) {
  const SegmentSectionSpec specs[] = {{"a", 10}, {"empty", 0}, {"page", 4096}, {"big", 5000}};
  auto h = PlanSegment(3, 42, "resnet50/v1", specs);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_EQ(h->sections.size(), 4u);
  EXPECT_EQ(h->sections[0].offset, 4096u);
  EXPECT_EQ(h->sections[1].offset, 8192u);  // empty: takes no space
  EXPECT_EQ(h->sections[2].offset, 8192u);
  EXPECT_EQ(h->sections[3].offset, 12288u);
  EXPECT_EQ(h->payload_size, 12288u + 8192u - 4096u);
  EXPECT_EQ(h->file_size(), 20480u);
  EXPECT_EQ(h->Find("page")->size, 4096u);
  EXPECT_EQ(h->Find("nope"), nullptr);

  auto none = PlanSegment(1, 0, "", {});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->file_size(), kSegmentPageSize);
}

TEST(SegmentFormat, PlanRejectsBadNamesKeysAndCounts) {
  auto code = [](std::string_view key, std::vector<SegmentSectionSpec> specs) {
    return PlanSegment(1, 1, key, specs).status().code();
  };
  EXPECT_EQ(code("k", {{"", 1}}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("k", {{std::string(41, 'n'), 1}}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("k", {{"x", 1}, {"x", 2}}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("k", {{std::string_view("a\0b", 3), 1}}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(std::string(65, 'k'), {}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(std::string(64, 'k'), {{std::string(40, 'n'), 1}}), StatusCode::kOk);
  std::vector<std::string> names;
  std::vector<SegmentSectionSpec> many;
  for (size_t i = 0; i <= kSegmentMaxSections; ++i) names.push_back(std::to_string(i) + "s");
  for (const auto& n : names) many.push_back({n, 1});
  auto too_many = PlanSegment(1, 1, "k", many);
  EXPECT_EQ(too_many.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_many.status().message().find("sections"), std::string::npos);
  many.pop_back();
  EXPECT_TRUE(PlanSegment(1, 1, "k", many).ok());
}

TEST(SegmentFormat, EncodeDecodeRoundTrip) {
  const SegmentSectionSpec specs[] = {{"weights", 123456}, {"empty", 0}, {"bias", 7}};
  auto h = PlanSegment(9, 0xDEADBEEFCAFEF00Dull, "tenant/model/3", specs);
  ASSERT_TRUE(h.ok());
  h->sections[0].crc32c = 0x11111111;
  h->sections[2].crc32c = 0x22222222;
  const auto page = Encode(*h);
  EXPECT_EQ(std::memcmp(page.data(), "ORRERYSG", 8), 0);
  auto d = DecodeSegmentHeader(page);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->format_version, kSegmentFormatVersion);
  EXPECT_EQ(d->layout_version, 9u);
  EXPECT_EQ(d->content_id, 0xDEADBEEFCAFEF00Dull);
  EXPECT_EQ(d->key, "tenant/model/3");
  EXPECT_EQ(d->payload_size, h->payload_size);
  ASSERT_EQ(d->sections.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(d->sections[i].name, h->sections[i].name);
    EXPECT_EQ(d->sections[i].offset, h->sections[i].offset);
    EXPECT_EQ(d->sections[i].size, h->sections[i].size);
    EXPECT_EQ(d->sections[i].crc32c, h->sections[i].crc32c);
  }
}

TEST(SegmentFormat, DecodeRejectsMagicVersionChecksumAndShortPage) {
  const SegmentSectionSpec specs[] = {{"w", 100}};
  auto h = PlanSegment(1, 5, "k", specs);
  ASSERT_TRUE(h.ok());
  const auto good = Encode(*h);

  auto bad_magic = good;
  bad_magic[0] = std::byte{'X'};
  auto r = DecodeSegmentHeader(bad_magic);
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("magic"), std::string::npos) << r.status().message();

  auto newer = good;
  newer[8] = std::byte{2};  // format version 2
  r = DecodeSegmentHeader(newer);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("version 2"), std::string::npos) << r.status().message();

  auto flipped = good;
  flipped[45] ^= std::byte{0x01};  // inside the key
  r = DecodeSegmentHeader(flipped);
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("checksum"), std::string::npos) << r.status().message();

  r = DecodeSegmentHeader(std::span<const std::byte>(good).first(100));
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
}

TEST(SegmentFormat, DecodeRejectsNonCanonicalTableEvenWithValidChecksum) {
  // A forged header whose checksum is right but whose offsets break the rules.
  const SegmentSectionSpec specs[] = {{"a", 100}, {"b", 100}};
  auto h = PlanSegment(1, 5, "k", specs);
  ASSERT_TRUE(h.ok());
  h->sections[1].offset += 1;
  auto r = DecodeSegmentHeader(Encode(*h));
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("\"b\""), std::string::npos) << r.status().message();

  h->sections[1].offset -= 1;
  h->payload_size += kSegmentPageSize;
  r = DecodeSegmentHeader(Encode(*h));
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace orrery
