//===- amx.h - Intel AMX tiles for the matmul and attention ----*- C++ -*-===//
//
// Where the kernels are built with AMX (the machine that builds them has
// AMX-TILE, AMX-INT8 and AMX-BF16: compiler/ukernels/CMakeLists.txt), the
// matmul runs its bf16 dot products (TFC_UK_A_BF16) and its int8 or int4
// weights times int8 activations (TFC_UK_QUANTIZE_A8) on tile instructions
// (tdpbf16ps; tdpbssd, tdpbsud), and so does the attention of bf16 values
// (TFC_UK_ATTENTION_BF16) in blocks of queries: one instruction multiplies
// a 16 x 32 bf16 (or 16 x 64 int8) tile of A by a tile of B into a 16 x 16
// tile of f32 (int32) sums, 8 (16) times the products of an AVX-512
// instruction.
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
#include <type_traits>

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

/// The values a tile product multiplies.
enum class Product { Bf16, S8S8, S8U8 };

/// Tile operations of a unit of RT row tiles by PT column tiles (panels),
/// with the tile numbers as the instructions need them (immediates): sums
/// in tiles 0-3 (row tile r, panel t: tile 2r + t), A in tiles 4-5, B in
/// tiles 6-7.
template <int RT, int PT> struct UnitTiles {
  static void zero() {
    _tile_zero(0);
    if constexpr (PT == 2)
      _tile_zero(1);
    if constexpr (RT == 2) {
      _tile_zero(2);
      if constexpr (PT == 2)
        _tile_zero(3);
    }
  }
  /// A's row tiles from a (rows aStride bytes apart, the second tile kRows
  /// rows after the first), B's panels from b (rows bRowStride bytes apart,
  /// the second panel bStride bytes after the first).
  static void load(const void *a, int64_t aStride, const void *b,
                   int64_t bStride, int64_t bRowStride = kRowBytes) {
    _tile_loadd(4, a, aStride);
    _tile_loadd(6, b, bRowStride);
    if constexpr (PT == 2)
      _tile_loadd(7, static_cast<const char *>(b) + bStride, bRowStride);
    if constexpr (RT == 2)
      _tile_loadd(5, static_cast<const char *>(a) + kRows * aStride, aStride);
  }
  /// The sum tiles plus the products of A's and B's values: bf16
  /// (tdpbf16ps), signed int8 (tdpbssd), or signed int8 A and unsigned B
  /// (tdpbsud).
  template <Product K> static void dot() {
    dotTile<0, 4, 6, K>();
    if constexpr (PT == 2)
      dotTile<1, 4, 7, K>();
    if constexpr (RT == 2) {
      dotTile<2, 5, 6, K>();
      if constexpr (PT == 2)
        dotTile<3, 5, 7, K>();
    }
  }
  template <int C, int A, int B, Product K> static void dotTile() {
    if constexpr (K == Product::Bf16)
      _tile_dpbf16ps(C, A, B);
    else if constexpr (K == Product::S8S8)
      _tile_dpbssd(C, A, B);
    else
      _tile_dpbsud(C, A, B);
  }
  /// The sums into `out` (4-byte elements, rows `stride` bytes apart, each
  /// panel kRowBytes after the one before).
  static void store(void *out, int64_t stride = PT * kRowBytes) {
    char *o = static_cast<char *>(out);
    forEachSum(stride, [&](auto tile, int64_t at) {
      _tile_stored(decltype(tile)::value, o + at, stride);
    });
  }
  /// The sums from `in`, laid out as store() writes them.
  static void loadSums(const void *in, int64_t stride = PT * kRowBytes) {
    const char *i = static_cast<const char *>(in);
    forEachSum(stride, [&](auto tile, int64_t at) {
      _tile_loadd(decltype(tile)::value, i + at, stride);
    });
  }
  /// f(tile, at) for each sum tile (an std::integral_constant) and the byte
  /// offset of its first row in store()'s layout.
  template <typename F> static void forEachSum(int64_t stride, F &&f) {
    f(std::integral_constant<int, 0>(), 0);
    if constexpr (PT == 2)
      f(std::integral_constant<int, 1>(), kRowBytes);
    if constexpr (RT == 2) {
      f(std::integral_constant<int, 2>(), kRows * stride);
      if constexpr (PT == 2)
        f(std::integral_constant<int, 3>(), kRows * stride + kRowBytes);
    }
  }
};

/// Calls f(UnitTiles<RT, PT>()) for a unit of `rows` rows (at most two
/// tiles) and `cols` columns (at most two panels of 16).
template <typename F> void withUnit(int64_t rows, int64_t cols, F &&f) {
  if (rows > kRows) {
    if (cols > 16)
      f(UnitTiles<2, 2>());
    else
      f(UnitTiles<2, 1>());
  } else if (cols > 16) {
    f(UnitTiles<1, 2>());
  } else {
    f(UnitTiles<1, 1>());
  }
}

} // namespace tfc::uk::amx

#endif
#endif // TFC_UKERNELS_AMX_H
