// CRC32C (Castagnoli), the checksum of segment files.
//
// Why CRC32C: SSE4.2 computes it in hardware (8 bytes per instruction; with
// three interleaved streams over 10 GB/s on one core, well above what a disk
// delivers, so verifying a segment costs little next to reading it), it is
// a real CRC (detects every burst error up to 32 bits, unlike a plain sum), and
// it is the checksum ext4, iSCSI and RocksDB use, so test vectors abound.
//
// Crc32cExtend(crc, data, n) continues a running checksum: Crc32c(ab) ==
// Crc32cExtend(Crc32c(a), b). The initial value is 0. The hardware path is
// chosen once per process (__builtin_cpu_supports("sse4.2")); the portable
// table path gives identical results on any CPU. Thread-safe, never blocks.
#pragma once

#include <cstddef>
#include <cstdint>

namespace orrery {

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);
inline uint32_t Crc32c(const void* data, size_t n) { return Crc32cExtend(0, data, n); }

// The two implementations behind Crc32cExtend, exposed for tests and benches.
// Crc32cExtendHardware must only be called when Crc32cHardwareAvailable().
bool Crc32cHardwareAvailable();
uint32_t Crc32cExtendHardware(uint32_t crc, const void* data, size_t n);
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t n);

}  // namespace orrery
