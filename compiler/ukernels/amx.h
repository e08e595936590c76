//===- amx.h - Intel AMX tiles for the matmul ------------------*- C++ -*-===//
//
// Where the kernels are built with AMX (the machine that builds them has
// AMX-TILE, AMX-INT8 and AMX-BF16: compiler/ukernels/CMakeLists.txt), the
// matmul runs its bf16 dot products (TFC_UK_A_BF16) and its int8 or int4
// weights times int8 activations (TFC_UK_QUANTIZE_A8) on tile instructions
// (tdpbf16ps; tdpbssd, tdpbsud): one instruction multiplies a 16 x 32 bf16
// (or 16 x 64 int8) tile of A by a tile of B into a 16 x 16 tile of f32
// (int32) sums, 8 (16) times the products of an AVX-512 instruction.
//
// Linux hands a process the tiles' 8 KiB of register state only on request
// (arch_prctl ARCH_REQ_XCOMP_PERM): enabled() asks once, and the kernels
// fall back to their AVX-512 forms where the request fails, the CPU lacks
// AMX, or the environment sets TFC_AMX=0 (to compare the two).
//
//===----------------------------------------------------------------------===//

#ifndef TFC_UKERNELS_AMX_H
#define TFC_UKERNELS_AMX_H

#if defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__AMX_BF16__)
#define TFC_UK_AMX 1

#include <cpuid.h>
#include <immintrin.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace tfc::uk::amx {

/// Rows of every tile the kernels use, and bytes of each row: A tiles of 16
/// rows by 32 bf16 (64 int8) values, B tiles of 16 pairs (quads) of rows by
/// 16 columns, C tiles of 16 x 16 f32 (int32) sums.
constexpr int kRows = 16;
constexpr int kRowBytes = 64;

/// Whether this process may run the AMX kernels (see the file comment);
/// decided on the first call.
inline bool enabled() {
  static const bool ok = [] {
    if (const char *v = std::getenv("TFC_AMX");
        v && (std::strcmp(v, "0") == 0 || strcasecmp(v, "off") == 0))
      return false;
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
      return false;
    constexpr unsigned kBf16 = 1u << 22, kTile = 1u << 24, kInt8 = 1u << 25;
    if ((d & (kBf16 | kTile | kInt8)) != (kBf16 | kTile | kInt8))
      return false;
    // Linux's permission for the tile data (XFEATURE_XTILEDATA), for every
    // thread of the process.
    constexpr long kRequestPermission = 0x1023, kTileData = 18;
    return syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
  }();
  return ok;
}

/// Configures tiles 0-7 on the calling thread as kRows x kRowBytes (the
/// configuration is per thread: each OpenMP thread loads it before its
/// first tile instruction, and releases the tiles after its last).
inline void configure() {
  struct alignas(64) Config {
    uint8_t palette, startRow, reserved[14];
    uint16_t bytesPerRow[16];
    uint8_t rows[16];
  } config = {};
  config.palette = 1;
  for (int t = 0; t < 8; ++t) {
    config.bytesPerRow[t] = kRowBytes;
    config.rows[t] = kRows;
  }
  _tile_loadconfig(&config);
}

} // namespace tfc::uk::amx

#endif
#endif // TFC_UKERNELS_AMX_H
