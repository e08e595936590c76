//===- packed_weights.cpp - Packed copies of the matmuls' weights ---------===//
//
// A constant B (a weight) is packed on first use and kept for the life of
// the process; the runtime may list the copies to save them and hand
// copies packed by an earlier process back (abi.h, "Packed weights"), and
// is told of each weight packed (tfc_runtime_weight_packed).
//
//===----------------------------------------------------------------------===//

#include "matmul/matmul.h"

#include "tfc/runtime/abi.h"

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#ifdef TFC_UK_VECTOR

/// The runtime's (abi.h): told of each weight once it is packed. Weak: null
/// where the runtime that loaded the model has none.
extern "C" __attribute__((weak, visibility("default"))) void
tfc_runtime_weight_packed(const void *source, size_t nbytes);

namespace tfc::uk::matmul {
namespace {

/// Packed copies of constant B operands (weights), made on first use and
/// kept for the life of the process: a model's weights are immutable once
/// bound, so each is packed once, never per call. The runtime may also hand
/// over copies packed by an earlier process (adopt, abi.h "Packed
/// weights"), which stay the runtime's.
class PackedWeights {
public:
  const void *get(const Matmul &p, int64_t bt, int64_t panels) {
    Layout layout = layoutOf(p);
    int64_t element = p.btype == BType::F32 ? 4 : 2;
    Key key{static_cast<const char *>(p.b) + p.bOffset(bt) * element,
            p.panelType(),
            layout,
            p.k,
            p.n,
            p.bs[1],
            p.bs[2]};
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end())
      return it->second.data.get();
    size_t bytes = packedSize(layout, p);
    std::unique_ptr<void, Free> buffer(
        std::aligned_alloc(64, (bytes + 63) / 64 * 64), Free(true));
    if (layout == Layout::IntDot)
      packBDot(p, bt, buffer.get());
    else if (layout == Layout::Bf16Dot)
      packBBf16(p, bt, buffer.get(), /*parallel=*/true);
    else if (p.quant != Quant::None)
      packBQuantized(p, bt, panels, buffer.get());
    else
      packB(p, bt, panels, buffer.get(), /*parallel=*/true);
    const void *packed = cache.emplace(key, Entry{std::move(buffer), bytes})
                             .first->second.data.get();
    // The bytes packed are read no more: the runtime may drop their pages.
    if (tfc_runtime_weight_packed && p.bs[1] >= 0 && p.bs[2] >= 0)
      tfc_runtime_weight_packed(
          key.b,
          size_t(((p.k - 1) * p.bs[1] + (p.n - 1) * p.bs[2] + 1) * element));
    return packed;
  }

  /// Up to `capacity` of the packed copies, into `out`; how many there are.
  int32_t list(tfc_packed_weight *out, int32_t capacity) {
    std::lock_guard<std::mutex> lock(mutex);
    int32_t i = 0;
    for (const auto &[key, entry] : cache) {
      if (out && i < capacity)
        out[i] = {key.b,
                  {int32_t(key.type), int32_t(key.layout)},
                  key.k,
                  key.n,
                  {key.s1, key.s2},
                  entry.data.get(),
                  entry.bytes};
      ++i;
    }
    return i;
  }

  /// Takes `w` as the packed copy of its key, without owning its bytes.
  /// False when no product of these kernels packs such a key into
  /// w.bytes bytes. A key packed already keeps its copy.
  bool adopt(const tfc_packed_weight &w) {
    int32_t type = w.kind[0], layout = w.kind[1];
    if (!w.source || !w.data || w.k <= 0 || w.n <= 0 || type < 0 ||
        type > int32_t(BType::I4) || layout < 0 ||
        layout > int32_t(Layout::Bf16Dot))
      return false;
    Matmul p{};
    p.k = w.k;
    p.n = w.n;
    auto t = BType(type);
    p.quant = t == BType::I8   ? Quant::I8
              : t == BType::I4 ? Quant::I4
                               : Quant::None;
    p.btype = p.quant == Quant::None ? t : BType::F32;
    auto l = Layout(layout);
    bool consistent = l == Layout::IntDot    ? p.quant != Quant::None
                      : l == Layout::Bf16Dot ? kBf16Dot && t == BType::BF16
                                             : true;
    if (!consistent || w.bytes != packedSize(l, p))
      return false;
    Key key{w.source, t, l, w.k, w.n, w.strides[0], w.strides[1]};
    std::lock_guard<std::mutex> lock(mutex);
    cache.emplace(key, Entry{std::unique_ptr<void, Free>(
                                 const_cast<void *>(w.data), Free{false}),
                             size_t(w.bytes)});
    return true;
  }

private:
  /// How B is packed: kNR-column panels, for integer dot products
  /// (DotPanels) or for bf16 ones (Bf16Panels).
  enum class Layout { Panels, IntDot, Bf16Dot };
  static Layout layoutOf(const Matmul &p) {
    return p.quantizeA  ? Layout::IntDot
           : bf16Dot(p) ? Layout::Bf16Dot
                        : Layout::Panels;
  }
  /// Bytes of B packed in `layout` (p's k, n, quant and btype).
  static size_t packedSize(Layout layout, const Matmul &p) {
    return layout == Layout::IntDot    ? DotPanels(p).bytes(p)
           : layout == Layout::Bf16Dot ? Bf16Panels(p).bytes()
                                       : packedBytes(p, (p.n + kNR - 1) / kNR);
  }
  struct Key {
    const void *b;
    BType type;
    Layout layout;
    int64_t k, n, s1, s2;
    bool operator==(const Key &o) const {
      return b == o.b && type == o.type && layout == o.layout && k == o.k &&
             n == o.n && s1 == o.s1 && s2 == o.s2;
    }
  };
  struct Hash {
    size_t operator()(const Key &k) const {
      return std::hash<const void *>()(k.b) ^ (size_t(k.k) * 31 + size_t(k.n));
    }
  };
  /// Frees what get() allocated; adopted bytes are the runtime's.
  struct Free {
    explicit Free(bool owned) : owned(owned) {}
    bool owned;
    void operator()(void *p) const {
      if (owned)
        std::free(p);
    }
  };
  struct Entry {
    std::unique_ptr<void, Free> data;
    size_t bytes;
  };
  std::mutex mutex;
  std::unordered_map<Key, Entry, Hash> cache;

public:
  void clear() {
    std::lock_guard<std::mutex> lock(mutex);
    cache.clear();
  }
};

PackedWeights packedWeights;

} // namespace

const void *packedWeight(const Matmul &p, int64_t bt, int64_t panels) {
  return packedWeights.get(p, bt, panels);
}

} // namespace tfc::uk::matmul

#endif // TFC_UK_VECTOR

using namespace tfc::uk::matmul;

extern "C" void tfc_uk_forget_packed_weights(void) {
#ifdef TFC_UK_VECTOR
  packedWeights.clear();
#endif
}

extern "C" const char *tfc_uk_packed_format(void) {
#ifdef TFC_UK_VECTOR
  // Everything that decides the bytes a key packs into: the panels' width,
  // the integer dot products' form (VNNI's panels carry column sums), and
  // whether bf16 pairs are padded to AMX tiles. Bump the version with any
  // change to a packing routine or to quantizeSymmetric.
  static const std::string format =
      "tfc-packed-1 lanes=" + std::to_string(tfc::uk::kLanes) +
      " vnni=" + std::to_string(int(tfc::uk::intdot::kVnni)) +
      " bf16dot=" + std::to_string(int(kBf16Dot)) +
      " amx=" + std::to_string(int(tfc_uk_uses_amx() != 0));
  return format.c_str();
#else
  return "";
#endif
}

extern "C" int32_t tfc_uk_packed_weights(tfc_packed_weight *out,
                                         int32_t capacity) {
#ifdef TFC_UK_VECTOR
  return packedWeights.list(out, capacity);
#else
  return 0;
#endif
}

extern "C" int32_t tfc_uk_adopt_packed_weight(const tfc_packed_weight *w) {
#ifdef TFC_UK_VECTOR
  return w && packedWeights.adopt(*w) ? 0 : -1;
#else
  return -1;
#endif
}
