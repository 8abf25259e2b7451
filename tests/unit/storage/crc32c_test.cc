#include "storage/crc32c.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace orrery {
namespace {

TEST(Crc32c, KnownVectors) {
  // The CRC-32C check value and the iSCSI vectors of RFC 3720 B.4.
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xFF), inc(32);
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(Crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(inc.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(nullptr, 0), 0u);
}

TEST(Crc32c, PortableAndHardwareAgreeAtEveryAlignmentAndLength) {
  std::mt19937 rng(7);
  std::vector<uint8_t> data(4096 + 64);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (size_t off = 0; off < 16; ++off) {
    for (size_t n = 0; n < 300; ++n) {
      const uint32_t portable = Crc32cExtendPortable(0, data.data() + off, n);
      ASSERT_EQ(Crc32c(data.data() + off, n), portable) << off << " " << n;
      if (Crc32cHardwareAvailable()) {
        ASSERT_EQ(Crc32cExtendHardware(0, data.data() + off, n), portable) << off << " " << n;
      }
    }
  }
  EXPECT_EQ(Crc32c(data.data(), data.size()), Crc32cExtendPortable(0, data.data(), data.size()));
}

TEST(Crc32c, InterleavedBlocksMatchPortableOnLongInputs) {
  // The hardware path switches to three interleaved streams at 3 x 256 and
  // 3 x 8192 bytes; lengths and offsets around those edges, and one large one.
  std::mt19937 rng(11);
  std::vector<uint8_t> data(3 * 8192 * 5 + 4096);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  std::vector<size_t> lengths = {767,   768,   769,   775,         776,         1536,        2000,
                                 24575, 24576, 24577, 24576 + 768, 49152 + 700, 3 * 8192 * 5};
  for (size_t off : {0, 1, 3, 8}) {
    for (size_t n : lengths) {
      ASSERT_EQ(Crc32c(data.data() + off, n), Crc32cExtendPortable(0, data.data() + off, n))
          << off << " " << n;
    }
  }
  // Extending a running CRC goes through the same paths.
  const uint32_t a = Crc32c(data.data(), 30000);
  EXPECT_EQ(Crc32cExtend(a, data.data() + 30000, 50000), Crc32c(data.data(), 80000));
}

TEST(Crc32c, ExtendEqualsOneShot) {
  const std::string s = "the quick brown fox jumps over the lazy dog, twice over";
  const uint32_t whole = Crc32c(s.data(), s.size());
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    const uint32_t a = Crc32c(s.data(), cut);
    EXPECT_EQ(Crc32cExtend(a, s.data() + cut, s.size() - cut), whole) << cut;
    EXPECT_EQ(Crc32cExtendPortable(Crc32cExtendPortable(0, s.data(), cut), s.data() + cut,
                                   s.size() - cut),
              whole);
  }
  std::string t = s;
  t[5] ^= 1;
  EXPECT_NE(Crc32c(t.data(), t.size()), whole);
}

}  // namespace
}  // namespace orrery
