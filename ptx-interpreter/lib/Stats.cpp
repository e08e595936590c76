//===- Stats.cpp - PTXEMU_STATS: instruction mix and transactions ---------===//
//
// With PTXEMU_STATS set, a launch counts the instructions its threads
// execute by class, and the memory transactions of their warp-wide
// accesses: shared-memory wavefronts (bank conflicts) and global-memory
// sectors, each with the least the same bytes take.
//
//===----------------------------------------------------------------------===//

#include "Launch.h"

#include <algorithm>
#include <cstdio>

namespace ptxi {

static const char *const kStatNames[kNumStats] = {
    "other",     "mma.sync",  "wgmma",     "ldmatrix", "ld.shared",
    "st.shared", "ld.global", "st.global", "cp.async", "bar.sync",
    "shfl",      "ex2",       "branch",    "tma",      "mbarrier"};

int statOf(const Inst &in) {
  switch (in.op) {
  case Op::Mma:
    return StatMma;
  case Op::Wgmma:
    return StatWgmma;
  case Op::Ldmatrix:
    return StatLdmatrix;
  case Op::Stmatrix:
    return StatStShared;
  case Op::Ld:
  case Op::St: {
    bool ld = in.op == Op::Ld;
    if (in.space == Space::Shared)
      return ld ? StatLdShared : StatStShared;
    if (in.space == Space::Global || in.space == Space::Generic)
      return ld ? StatLdGlobal : StatStGlobal;
    return StatOther;
  }
  case Op::CpAsync:
    return StatCpAsync;
  case Op::Bar:
    return StatBar;
  case Op::Shfl:
    return StatShfl;
  case Op::Ex2:
    return StatEx2;
  case Op::Bra:
    return StatBranch;
  case Op::Tma:
  case Op::TmaStore:
    return StatTma;
  case Op::Mbarrier:
    return StatMbarrier;
  default:
    return StatOther;
  }
}

/// The distinct 4-byte words lanes [first, last) of an access touch,
/// sorted.
static std::vector<uint64_t> distinctWords(const WarpAccess &a, unsigned first,
                                           unsigned last) {
  std::vector<uint64_t> words;
  for (unsigned l = first; l < last; ++l)
    if (a.lanes >> l & 1)
      for (uint64_t w = a.addr[l] / 4; w <= (a.addr[l] + a.bytes - 1) / 4; ++w)
        words.push_back(w);
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  return words;
}

/// Shared memory serves a warp's access in wavefronts of 32 banks of 4
/// bytes: the lanes go in phases of 128 bytes (32 lanes for accesses of 4
/// bytes or less, 16 for 8 bytes, 8 for 16: ldmatrix's rows), and a phase
/// takes as many wavefronts as the most distinct 4-byte words any one
/// bank is asked for (lanes that ask for the same word share it). At best
/// a phase takes its distinct words / 32, rounded up.
static void sharedWavefronts(const WarpAccess &a, Transactions &t) {
  unsigned phase = 128 / std::max(a.bytes, 4u);
  for (unsigned first = 0; first < 32; first += phase) {
    std::vector<uint64_t> words = distinctWords(a, first, first + phase);
    unsigned perBank[32] = {}, most = 0;
    for (uint64_t w : words)
      most = std::max(most, ++perBank[w % 32]);
    t.actual += most;
    t.ideal += (words.size() + 31) / 32;
  }
}

/// Global memory moves 32-byte sectors: those a warp's access touches, and
/// at best its distinct 4-byte words x 4 / 32, rounded up.
static void globalSectors(const WarpAccess &a, Transactions &t) {
  std::vector<uint64_t> words = distinctWords(a, 0, 32);
  for (size_t i = 0; i < words.size(); ++i)
    t.actual += i == 0 || words[i] / 8 != words[i - 1] / 8;
  t.ideal += (words.size() + 7) / 8;
}

void Launch::traceAccess(const Thread &t, Space space, uint64_t addr,
                         unsigned bytes, int side) {
  if (memSlot_.empty())
    return;
  int slot = memSlot_[t.pc];
  uint64_t key =
      (meetings_[size_t(t.linear) * memSlots_ + slot] << 24) | slot << 1 | side;
  WarpAccess &a = pending_[key];
  a.shared = space == Space::Shared;
  a.bytes = bytes;
  a.lanes |= 1u << (t.linear % 32);
  a.addr[t.linear % 32] = addr;
}

/// ldmatrix and stmatrix: lanes 8m..8m+7 give the 16-byte rows of
/// matrix m, a phase of shared memory each.
void Launch::matrixRows(const Thread *lanes, const Inst &in,
                        const Operand &rows) {
  WarpAccess a;
  a.shared = true;
  a.bytes = 16;
  for (unsigned l = 0; l < 8u * in.matrices; ++l) {
    a.lanes |= 1u << l;
    a.addr[l] = get(lanes[l], rows);
  }
  count(a, in);
}

void Launch::count(const WarpAccess &a, const Inst &in) {
  Transactions t;
  (a.shared ? sharedWavefronts : globalSectors)(a, t);
  Transactions &total = a.shared ? sharedTx_ : globalTx_;
  total.actual += t.actual;
  total.ideal += t.ideal;
  if (byLineWanted_) {
    auto &[inst, mine] = byLine_[{in.line, a.shared}];
    inst = &in;
    mine.actual += t.actual;
    mine.ideal += t.ideal;
  }
}

void Launch::countPending() {
  for (auto &[key, a] : pending_)
    count(a, code_[slotPc_[(key >> 1) & 0x7fffff]]);
  pending_.clear();
}

std::string Launch::statsLine() const {
  uint64_t total = 0;
  for (uint64_t c : stats_)
    total += c;
  char buf[128];
  snprintf(buf, sizeof buf,
           "ptxemu: %s grid %ux%ux%u block %u: %.0f warp-instructions",
           k_.name.c_str(), grid_[0], grid_[1], grid_[2],
           block_[0] * block_[1] * block_[2], total / 32.0);
  std::string line = buf;
  if (stats_[StatMma]) {
    snprintf(buf, sizeof buf, " (%.2f per mma.sync)",
             double(total) / stats_[StatMma]);
    line += buf;
  }
  if (stats_[StatWgmma]) {
    // Per warp, a wgmma m64nNk16 is N / 8 products of mma.sync m16n8k16's
    // size: the second figure compares with an mma.sync build's.
    snprintf(buf, sizeof buf, " (%.2f per wgmma, %.2f per 16x8x16 of it)",
             double(total) / stats_[StatWgmma], double(total) / wgmmaProducts_);
    line += buf;
  }
  for (int c = 1; c < kNumStats; ++c) {
    if (!stats_[c])
      continue;
    // A TMA copy is one thread's instruction moving a whole tile: counted
    // as copies, not warp-instructions.
    if (c == StatTma)
      snprintf(buf, sizeof buf, ", %s %llu copies", kStatNames[c],
               (unsigned long long)stats_[c]);
    else
      snprintf(buf, sizeof buf, ", %s %.0f", kStatNames[c], stats_[c] / 32.0);
    line += buf;
  }
  if (sharedTx_.actual || globalTx_.actual) {
    snprintf(buf, sizeof buf,
             " | shared: %llu wavefronts (%llu ideal); global: %llu "
             "sectors (%llu ideal)",
             (unsigned long long)sharedTx_.actual,
             (unsigned long long)sharedTx_.ideal,
             (unsigned long long)globalTx_.actual,
             (unsigned long long)globalTx_.ideal);
    line += buf;
  }
  for (const auto &[at, entry] : byLine_) {
    const auto &[inst, t] = entry;
    if (t.actual == t.ideal)
      continue;
    line += "\nptxemu:   line " + std::to_string(at.first) + " (" + inst->text +
            "): " + std::to_string(t.actual) +
            (at.second ? " wavefronts (" : " sectors (") +
            std::to_string(t.ideal) + " ideal)";
  }
  return line;
}

} // namespace ptxi
