//===- AsyncCopy.cpp - cp.async and TMA loads and stores ------------------===//
//
// Copies that land later than they are issued, and show it: a cp.async
// destination holds NaNs until the wait that completes its group; a TMA
// load (cp.async.bulk.tensor) poisons its box at issue and is performed
// when a wait on its mbarrier finds every arrival of the phase in
// (Mbarrier.cpp); a TMA store reads its box from shared memory when a
// cp.async.bulk.wait_group completes its group.
//
//===----------------------------------------------------------------------===//

#include "Launch.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace ptxi {

// cp.async, cp.async.commit_group and cp.async.wait_group / wait_all:
// each thread's copies, in async-groups it commits, performed when a wait
// completes their group.
void Launch::cpAsync(Thread &t, const Inst &in) {
  const std::vector<Operand> &o = in.ops;
  auto need = [&](size_t n) { needOperands(t, in, n); };
  switch (in.op) {
  case Op::CpAsync: {
    need(3);
    uint32_t bytes = (uint32_t)get(t, o[2]);
    uint32_t srcBytes = o.size() > 3 ? (uint32_t)get(t, o[3]) : bytes;
    if ((bytes != 4 && bytes != 8 && bytes != 16) || srcBytes > bytes)
      fault(t, PTXEMU_LAUNCH_FAILED, "bad cp.async sizes");
    char *dst = memory(t, Space::Shared, get(t, o[0]), bytes, bytes);
    const char *src = srcBytes
                          ? memory(t, Space::Global, get(t, o[1]), srcBytes, 1)
                          : nullptr;
    if (get(t, o[1]) % bytes)
      fault(t, PTXEMU_ILLEGAL_ADDRESS, "misaligned cp.async source");
    traceAccess(t, Space::Shared, get(t, o[0]), bytes);
    if (srcBytes)
      traceAccess(t, Space::Global, get(t, o[1]), srcBytes, 1);
    // Until the wait, the destination holds nothing defined: poison it
    // (f16/bf16/f32 NaN), so that a read before the wait, or a copy
    // overwriting a tile another warp still reads, shows.
    memset(dst, 0xff, bytes);
    t.openGroup.push_back({dst, src, bytes, srcBytes});
    return;
  }
  case Op::CpAsyncCommit:
    t.groups.push_back(std::move(t.openGroup));
    t.openGroup.clear();
    return;
  case Op::CpAsyncWait:
    if (in.waitAll) {
      t.groups.push_back(std::move(t.openGroup));
      t.openGroup.clear();
      completeCopies(t, 0);
    } else {
      need(1);
      completeCopies(t, get(t, o[0]));
    }
    return;
  default:
    fault(t, PTXEMU_LAUNCH_FAILED, "not implemented");
  }
}

void Launch::completeCopies(Thread &t, size_t keep) {
  while (t.groups.size() > keep) {
    for (const CopyOp &c : t.groups.front()) {
      // A copy of src-size 0 (zero fill past the end) may name no source.
      if (c.srcBytes)
        memcpy(c.dst, c.src, c.srcBytes);
      memset(c.dst + c.srcBytes, 0, c.bytes - c.srcBytes);
    }
    t.groups.erase(t.groups.begin());
  }
}

// cp.async.bulk.commit_group and cp.async.bulk.wait_group[.read]: the bulk
// async-groups of a thread's TMA stores.
void Launch::bulkGroup(Thread &t, const Inst &in) {
  if (in.op == Op::BulkCommit) {
    t.storeGroups.push_back(std::move(t.openStores));
    t.openStores.clear();
    return;
  }
  // All but the newest N committed groups are complete: their stores
  // read shared memory now (a tile rewritten before the wait shows in
  // the output) and write global memory.
  size_t keep = size_t(get(t, in.ops[0]));
  while (t.storeGroups.size() > keep) {
    for (const TmaCopy &c : t.storeGroups.front())
      performTmaStore(c);
    t.storeGroups.erase(t.storeGroups.begin());
  }
}

/// The swizzle span in bytes of a tensor map (CUtensorMapSwizzle: 0 none,
/// 1 32-byte, 2 64-byte, 3 128-byte).
static int swizzleSpan(const fake_tensor_map &m) {
  static const int kSpans[] = {0, 32, 64, 128};
  return kSpans[m.swizzle & 3];
}

/// Calls fn(offset, lo, hi, src) for each innermost row of the box that a
/// TMA load of map `m` at `coords` reads: `offset` is the row's in the
/// dense box (bytes), [lo, hi) its elements in bounds (none if the row's
/// outer coordinates are out of bounds) and `src` the global address of
/// element lo.
template <typename Fn>
static void forEachBoxRow(const fake_tensor_map &m, const int64_t coords[5],
                          Fn fn) {
  uint64_t rows = 1, rowBytes = uint64_t(m.box[0]) * m.elementBytes;
  for (int d = 1; d < m.rank; ++d)
    rows *= m.box[d];
  int64_t box0 = m.box[0], dim0 = int64_t(m.dims[0]);
  int64_t lo = std::clamp<int64_t>(-coords[0], 0, box0);
  int64_t hi = std::clamp<int64_t>(dim0 - coords[0], 0, box0);
  for (uint64_t r = 0; r < rows; ++r) {
    uint64_t rest = r, src = m.address;
    bool inside = lo < hi;
    for (int d = 1; d < m.rank; ++d) {
      int64_t x = coords[d] + int64_t(rest % m.box[d]);
      rest /= m.box[d];
      inside = inside && x >= 0 && x < int64_t(m.dims[d]);
      src += uint64_t(x) * m.strides[d - 1];
    }
    src += uint64_t(coords[0] + lo) * m.elementBytes;
    fn(r * rowBytes, inside ? lo : 0, inside ? hi : 0, src);
  }
}

/// The tensor map at generic address `addr` (in device memory, or a
/// kernel parameter's: a `__grid_constant__` CUtensorMap), checked as
/// cuTensorMapEncodeTiled and a `rank`-d cp.async.bulk.tensor would.
fake_tensor_map Launch::tensorMap(const Thread &t, uint64_t addr, int rank) {
  char at[48];
  snprintf(at, sizeof at, "0x%llx", (unsigned long long)addr);
  auto bad = [&](const std::string &what) {
    fault(t, PTXEMU_LAUNCH_FAILED,
          std::string("the tensor map at ") + at + " " + what);
  };
  if (addr % 64)
    bad("is not 64-byte aligned");
  fake_tensor_map m;
  const char *p = reinterpret_cast<const char *>((uintptr_t)addr);
  bool param = p >= paramBase_ && p + 128 <= paramBase_ + k_.paramBytes;
  memcpy(&m, param ? p : global(t, addr, 128), sizeof m); // 128 bytes
  if (m.magic != FAKE_TENSOR_MAP_MAGIC)
    fault(t, PTXEMU_LAUNCH_FAILED,
          std::string(at) + " is not a tensor map (cuTensorMapEncodeTiled "
                            "did not write it)");
  if (m.rank != rank)
    bad("has rank " + std::to_string(m.rank) + ", the instruction " +
        std::to_string(rank) + " coordinates");
  uint64_t eb = m.elementBytes;
  if (eb != 1 && eb != 2 && eb != 4 && eb != 8)
    bad("has elements of " + std::to_string(eb) + " bytes");
  if (m.swizzle > 3 || m.interleave != 0 || m.oobFill > 1)
    bad("asks for an interleave, swizzle or fill mode that is not supported");
  for (int d = 0; d < rank; ++d) {
    std::string dim = "dimension " + std::to_string(d);
    if (m.box[d] < 1 || m.box[d] > 256)
      bad("has a box of " + std::to_string(m.box[d]) + " in " + dim +
          " (1..256)");
    if (m.elementStrides[d] != 1)
      bad("has element stride " + std::to_string(m.elementStrides[d]) + " in " +
          dim + ": only 1 is supported");
    if (m.dims[d] < 1)
      bad("has size 0 in " + dim);
    if (d + 1 < rank && m.strides[d] % 16)
      bad("has a stride of " + std::to_string(m.strides[d]) + " bytes in " +
          "dimension " + std::to_string(d + 1) + ", not a multiple of 16");
  }
  uint64_t rowBytes = m.box[0] * eb;
  if (rowBytes % 16)
    bad("has an innermost box of " + std::to_string(rowBytes) +
        " bytes, not a multiple of 16");
  if (int span = swizzleSpan(m); span && rowBytes > uint64_t(span))
    bad("has an innermost box of " + std::to_string(rowBytes) +
        " bytes, beyond its " + std::to_string(span) + "-byte swizzle");
  if (m.address % 16)
    bad("has a global address that is not 16-byte aligned");
  return m;
}

// The box of a TMA copy, load or store: the tensor map and coordinates of
// operands `at` and `at` + 1, at shared address `smem` (its destination or
// source), checked: the map, a 128-byte aligned shared address, the box's
// bytes in the block's shared memory, its in-bound rows in device memory.
TmaCopy Launch::tmaBox(Thread &t, const Inst &in, size_t at, uint64_t smem,
                       const char *role) {
  const std::vector<Operand> &o = in.ops;
  TmaCopy c;
  c.map = tensorMap(t, get(t, o[at]), in.tmaRank);
  const fake_tensor_map &m = c.map;
  for (int d = 0; d < in.tmaRank; ++d)
    c.coords[d] = sext(get(t, o[at + 1].elems[d]), 32);
  c.dst = smem;
  c.line = in.line;
  uint64_t bytes = m.elementBytes;
  for (int d = 0; d < m.rank; ++d)
    bytes *= m.box[d];
  c.bytes = uint32_t(bytes);
  if (c.dst % 128) {
    char buf[128];
    snprintf(buf, sizeof buf,
             "the %s, shared address 0x%llx, is not 128-byte aligned", role,
             (unsigned long long)c.dst);
    fault(t, PTXEMU_ILLEGAL_ADDRESS, buf);
  }
  // A swizzle moves 16-byte chunks within 128-byte lines.
  c.footprint = swizzleSpan(m) ? alignUp(bytes, 128) : bytes;
  memory(t, Space::Shared, c.dst, c.footprint, 1);
  forEachBoxRow(m, c.coords,
                [&](uint64_t, int64_t lo, int64_t hi, uint64_t addr) {
                  if (hi > lo)
                    global(t, addr, uint64_t(hi - lo) * m.elementBytes);
                });
  return c;
}

// A TMA load: the box written densely, innermost dimension fastest, at
// shared address dst swizzled per the map; out-of-bound elements filled.
// At issue it is checked and its destination poisoned (NaN in f16, bf16
// and f32); it is performed when a wait finds every arrival on its
// mbarrier in (mbarrierWait).
void Launch::issueTma(Thread &t, const Inst &in) {
  const std::vector<Operand> &o = in.ops;
  TmaCopy c = tmaBox(t, in, 1, get(t, o[0]), "destination");
  Mbarrier &b = mbarrierAt(t, get(t, o[3]));
  // Two copies in flight into the same bytes race on a GPU: a stage
  // reloaded before the wait on its previous load.
  for (const auto &[addr, other] : mbarriers_)
    for (const TmaCopy &x : other.copies)
      if (c.dst < x.dst + x.footprint && x.dst < c.dst + c.footprint) {
        char buf[160];
        snprintf(buf, sizeof buf,
                 "writes shared [0x%llx, 0x%llx) while the "
                 "cp.async.bulk.tensor of line %d, into [0x%llx, 0x%llx), is "
                 "in flight",
                 (unsigned long long)c.dst,
                 (unsigned long long)(c.dst + c.footprint), x.line,
                 (unsigned long long)x.dst,
                 (unsigned long long)(x.dst + x.footprint));
        fault(t, PTXEMU_LAUNCH_FAILED, buf);
      }
  int span = swizzleSpan(c.map);
  for (uint64_t off = 0; off < c.bytes; off += 16)
    memset(shared_.get() + swizzle(c.dst + off, span), 0xff, 16);
  b.copies.push_back(c);
}

// A TMA store: the box read from shared address src (swizzled per the
// map, densely, innermost dimension fastest), its in-bound elements written
// to global memory when a cp.async.bulk.wait_group completes its group.
void Launch::issueTmaStore(Thread &t, const Inst &in) {
  t.openStores.push_back(tmaBox(t, in, 0, get(t, in.ops[2]), "source"));
}

void Launch::performTmaStore(const TmaCopy &c) {
  const fake_tensor_map &m = c.map;
  uint64_t eb = m.elementBytes;
  std::vector<char> box(c.bytes);
  int span = swizzleSpan(m);
  for (uint64_t off = 0; off < c.bytes; off += 16)
    memcpy(&box[off], shared_.get() + swizzle(c.dst + off, span), 16);
  forEachBoxRow(m, c.coords,
                [&](uint64_t offset, int64_t lo, int64_t hi, uint64_t dst) {
                  if (hi > lo)
                    memcpy(reinterpret_cast<char *>(uintptr_t(dst)),
                           &box[offset + lo * eb], uint64_t(hi - lo) * eb);
                });
}

void Launch::performTma(const TmaCopy &c) {
  const fake_tensor_map &m = c.map;
  uint64_t eb = m.elementBytes;
  std::vector<char> box(c.bytes, 0);
  if (m.oobFill) // a NaN in every float format: all ones but the sign
    for (uint64_t e = 0; e < c.bytes; e += eb) {
      memset(&box[e], 0xff, eb);
      box[e + eb - 1] = 0x7f;
    }
  forEachBoxRow(m, c.coords,
                [&](uint64_t offset, int64_t lo, int64_t hi, uint64_t src) {
                  if (hi > lo)
                    memcpy(&box[offset + lo * eb],
                           reinterpret_cast<const char *>(uintptr_t(src)),
                           uint64_t(hi - lo) * eb);
                });
  int span = swizzleSpan(m);
  for (uint64_t off = 0; off < c.bytes; off += 16)
    memcpy(shared_.get() + swizzle(c.dst + off, span), &box[off], 16);
}

} // namespace ptxi
