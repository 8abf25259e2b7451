#include "storage/crc32c.h"

#include <nmmintrin.h>

#include <array>
#include <cstring>

namespace orrery {
namespace {

constexpr uint32_t kPoly = 0x82F63B78;  // CRC32C, reflected

// Slicing-by-8 tables: table[k][b] is the CRC of byte b followed by k zero bytes.
using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables MakeTables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c >> 1) ^ ((c & 1) ? kPoly : 0);
    t[0][b] = c;
  }
  for (int k = 1; k < 8; ++k) {
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
  }
  return t;
}

constexpr Tables kTables = MakeTables();

bool DetectHardware() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2");
}

}  // namespace

uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);  // little-endian host (x86-64 only, like the rest of Orrery)
    w ^= c;
    c = kTables[7][w & 0xFF] ^ kTables[6][(w >> 8) & 0xFF] ^ kTables[5][(w >> 16) & 0xFF] ^
        kTables[4][(w >> 24) & 0xFF] ^ kTables[3][(w >> 32) & 0xFF] ^ kTables[2][(w >> 40) & 0xFF] ^
        kTables[1][(w >> 48) & 0xFF] ^ kTables[0][w >> 56];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = (c >> 8) ^ kTables[0][(c ^ *p++) & 0xFF];
  return ~c;
}

// ---- hardware path: three interleaved streams
//
// crc32 has a latency of 3 cycles and a throughput of 1 per cycle, so one
// dependent chain runs at a third of the possible speed. As in Mark Adler's
// crc32c.c, blocks of 3 x L bytes are checksummed as three independent
// streams and combined: crc(A B) = shift_|B|(crc(A)) ^ crc0(B), where crc0
// starts from a zero register and shift_n applies n zero bytes, a linear map
// done with four 256-entry tables per L.

namespace {

using ShiftTables = std::array<std::array<uint32_t, 256>, 4>;

// GF(2) 32x32 matrix (one column per bit) times a vector.
uint32_t MatrixTimes(const uint32_t* mat, uint32_t vec) {
  uint32_t sum = 0;
  for (; vec != 0; vec >>= 1, ++mat) {
    if (vec & 1) sum ^= *mat;
  }
  return sum;
}

void MatrixSquare(uint32_t* square, const uint32_t* mat) {
  for (int n = 0; n < 32; ++n) square[n] = MatrixTimes(mat, mat[n]);
}

// Tables applying `len` zero bytes (len a power of two) to a raw CRC register.
ShiftTables MakeShiftTables(size_t len) {
  uint32_t even[32], odd[32];
  odd[0] = kPoly;  // the operator for one zero bit
  for (int n = 1; n < 32; ++n) odd[n] = uint32_t{1} << (n - 1);
  MatrixSquare(even, odd);  // two zero bits
  MatrixSquare(odd, even);  // four zero bits
  const uint32_t* op = nullptr;
  for (;;) {  // each square doubles the count: 1 byte, 2 bytes, ...
    MatrixSquare(even, odd);
    len >>= 1;
    if (len == 0) {
      op = even;
      break;
    }
    MatrixSquare(odd, even);
    len >>= 1;
    if (len == 0) {
      op = odd;
      break;
    }
  }
  ShiftTables t{};
  for (uint32_t n = 0; n < 256; ++n) {
    for (int k = 0; k < 4; ++k) t[k][n] = MatrixTimes(op, n << (8 * k));
  }
  return t;
}

uint32_t Shift(const ShiftTables& t, uint32_t crc) {
  return t[0][crc & 0xFF] ^ t[1][(crc >> 8) & 0xFF] ^ t[2][(crc >> 16) & 0xFF] ^ t[3][crc >> 24];
}

constexpr size_t kLong = 8192;
constexpr size_t kShort = 256;

const ShiftTables& LongShift() {
  static const ShiftTables t = MakeShiftTables(kLong);
  return t;
}
const ShiftTables& ShortShift() {
  static const ShiftTables t = MakeShiftTables(kShort);
  return t;
}

uint64_t Load64(const uint8_t* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

// Three streams of `block` bytes each, while at least 3 x block remain.
__attribute__((target("sse4.2"))) uint64_t ThreeWay(uint64_t crc0, const uint8_t*& p, size_t& n,
                                                    size_t block, const ShiftTables& shift) {
  while (n >= 3 * block) {
    uint64_t crc1 = 0, crc2 = 0;
    const uint8_t* end = p + block;
    do {
      crc0 = _mm_crc32_u64(crc0, Load64(p));
      crc1 = _mm_crc32_u64(crc1, Load64(p + block));
      crc2 = _mm_crc32_u64(crc2, Load64(p + 2 * block));
      p += 8;
    } while (p < end);
    crc0 = Shift(shift, static_cast<uint32_t>(crc0)) ^ crc1;
    crc0 = Shift(shift, static_cast<uint32_t>(crc0)) ^ crc2;
    p += 2 * block;
    n -= 3 * block;
  }
  return crc0;
}

}  // namespace

__attribute__((target("sse4.2"))) uint32_t Crc32cExtendHardware(uint32_t crc, const void* data,
                                                                size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t c = static_cast<uint32_t>(~crc);
  // Byte steps up to 8-byte alignment, then 8 bytes per instruction.
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    --n;
  }
  c = ThreeWay(c, p, n, kLong, LongShift());
  c = ThreeWay(c, p, n, kShort, ShortShift());
  while (n >= 8) {
    c = _mm_crc32_u64(c, Load64(p));
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
  return ~static_cast<uint32_t>(c);
}

bool Crc32cHardwareAvailable() {
  static const bool available = DetectHardware();
  return available;
}

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n) {
  return Crc32cHardwareAvailable() ? Crc32cExtendHardware(crc, data, n)
                                   : Crc32cExtendPortable(crc, data, n);
}

}  // namespace orrery
