//===- Launch.h - One launch of a kernel, interpreted ----------*- C++ -*-===//
//
// A launch runs block after block; in a block each warp runs as far as it
// can, each thread until its next collective instruction, which then runs
// for the warp (or block) at once. The state of a block (threads, their
// registers, shared memory, barriers, mbarriers, copies and wgmma in
// flight) lives here; its parts are defined by concern:
//
//   Launch.cpp       scheduling: blocks, warps, threads, control flow;
//                    memory spaces and their bounds
//   Execute.cpp      one thread's instruction: arithmetic, conversions,
//                    loads and stores
//   Warp.cpp         warp-wide instructions (shfl, vote, elect), named
//                    barriers and setmaxnreg
//   TensorCore.cpp   ldmatrix, stmatrix, mma.sync and wgmma
//   AsyncCopy.cpp    cp.async and TMA (cp.async.bulk.tensor) loads and
//                    stores
//   Mbarrier.cpp     mbarriers: phases, arrivals, transaction bytes
//   Stats.cpp        PTXEMU_STATS: instruction classes and memory
//                    transactions
//
//===----------------------------------------------------------------------===//

#ifndef PTXI_LIB_LAUNCH_H
#define PTXI_LIB_LAUNCH_H

#include "Numerics.h"
#include "Program.h"

#include "ptxi/fake_tensor_map.h"
#include "ptxi/ptxemu.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

namespace ptxi {

/// Why a launch stopped: a PTXEMU_* code and a message.
struct Fault {
  int code;
  std::string what;
};

struct CopyOp {
  char *dst;
  const char *src;
  uint32_t bytes, srcBytes;
};

/// A warp's wgmma.mma_async in flight, with what it captured at issue
/// (its shared-memory operands are read when it completes).
struct WgmmaOp {
  const Inst *in = nullptr;
  int64_t seq = 0;
  uint64_t descA = 0, descB = 0;
  bool scaleD = false;
  std::vector<uint32_t> a; // A from registers: lane * 4 + i
  std::vector<uint32_t> c; // the D inputs: lane * (N / 2) + i
  /// Per D register: the earlier wgmma in flight whose result is its input
  /// (its seq), or -1 where `c` holds the input.
  std::vector<int64_t> cFrom;
};

/// A warp's wgmma in flight: those since the last commit_group, then the
/// committed groups, oldest first.
struct WarpWgmma {
  std::vector<WgmmaOp> open;
  std::vector<std::vector<WgmmaOp>> groups;
  /// The registers a wgmma in flight will write: the newest one's seq.
  std::unordered_map<int, int64_t> pending;
  int64_t nextSeq = 0;
  /// Whether the warp has executed a wgmma.fence: the ISA requires one
  /// before its first mma_async (and after other instructions modify the
  /// registers an mma_async uses, which is not checked).
  bool fenced = false;
  /// The lines of the mma_async the warp issued, in order: the 4 warps of
  /// a warpgroup must issue the same ones.
  std::vector<int> issued;
  const WgmmaOp *oldest() const {
    for (const auto &g : groups)
      if (!g.empty())
        return &g.front();
    return open.empty() ? nullptr : &open.front();
  }
};

/// A cp.async.bulk.tensor in flight, with what it captured at issue: it
/// reads global memory and writes shared memory when it is performed.
struct TmaCopy {
  fake_tensor_map map;
  int64_t coords[5] = {0, 0, 0, 0, 0};
  uint64_t dst = 0, footprint = 0; // shared bytes [dst, dst + footprint)
  uint32_t bytes = 0;              // the box's, fill included
  int line = 0;
};

/// An mbarrier object (PTX ISA "Parallel Synchronization and Communication
/// Instructions: mbarrier"): the phases it completed (the current phase's
/// parity is phase & 1), the arrivals the current phase still waits for,
/// the count each phase starts with, the transaction count (bytes expected
/// by expect-tx, less those complete-tx delivered) and the bulk copies
/// whose complete-tx it awaits.
struct Mbarrier {
  uint64_t phase = 0;
  uint32_t expected = 0, pending = 0;
  int64_t tx = 0;
  std::vector<TmaCopy> copies;
};

/// The byte address `a` with `span`-byte swizzle (128, 64 or 32; 0: none):
/// its 16-byte chunk index (bits 4-6) xor'ed with bits 7-9 of the address
/// (CuTe's Swizzle<3,4,3>, <2,4,3>, <1,4,3>), as TMA writes and wgmma reads
/// shared memory.
inline uint64_t swizzle(uint64_t a, int span) {
  switch (span) {
  case 128:
    return a ^ (((a >> 7) & 7) << 4);
  case 64:
    return a ^ (((a >> 7) & 3) << 4);
  case 32:
    return a ^ (((a >> 7) & 1) << 4);
  default:
    return a;
  }
}

/// A named barrier of the block (bar.sync / bar.arrive with a thread
/// count; PTX ISA "bar, barrier"): the threads arrived in the current phase
/// (32 per warp), the count the phase's arrivals gave and the threads
/// waiting at a bar.sync on it.
struct NamedBarrier {
  uint32_t arrived = 0, expected = 0;
  std::vector<unsigned> waiters;
};

struct Thread {
  /// WaitBar: at a bar.sync without thread count (block-wide); WaitNamed:
  /// at a bar.sync with one, its warp's arrival counted, until the phase of
  /// barrier `namedBar` completes (pc on it). WaitMbar: blocked at an
  /// mbarrier.try_wait whose phase is incomplete (pc on it); Spin: after an
  /// mbarrier.test_wait that found it incomplete (pc past it), it lets the
  /// other threads run.
  enum State {
    Run,
    WaitWarp,
    WaitBar,
    WaitNamed,
    WaitMbar,
    Spin,
    Done
  } state = Run;
  int pc = 0;
  int namedBar = -1; // WaitNamed: the barrier
  int spinPc = -1;   // Spin: the test_wait
  uint64_t *r = nullptr;
  unsigned tid[3] = {0, 0, 0};
  unsigned linear = 0;
  char *local = nullptr;
  std::vector<CopyOp> openGroup;
  std::vector<std::vector<CopyOp>> groups;
  std::vector<TmaCopy> openStores; // TMA stores: bulk async-groups
  std::vector<std::vector<TmaCopy>> storeGroups;
};

/// One warp-wide memory access, as PTXEMU_STATS counts its transactions:
/// the address each lane gives (`lanes` bit l set when lane l accesses),
/// `bytes` per lane.
struct WarpAccess {
  bool shared = false;
  unsigned bytes = 0;
  uint32_t lanes = 0;
  uint64_t addr[32] = {};
};

/// Transactions of warp-wide accesses: what they took, and what the same
/// bytes take at best.
struct Transactions {
  uint64_t actual = 0, ideal = 0;
};

class Launch {
public:
  Launch(const Kernel &k, const unsigned grid[3], const unsigned block[3],
         unsigned dynamicShared, void **params, const ptxemu_range *ranges,
         size_t numRanges);
  /// Runs every block; throws a Fault.
  void run();
  /// PTXEMU_STATS: one line: warp-instructions (thread-instructions / 32)
  /// by class, then the memory transactions.
  std::string statsLine() const;

private:
  const Kernel &k_;
  const std::vector<Inst> &code_;
  unsigned grid_[3], block_[3], ctaid_[3] = {0, 0, 0};
  uint64_t sharedBytes_;
  std::vector<char> params_;
  char *paramBase_ = nullptr; // in params_, 64-byte aligned
  std::vector<ptxemu_range> ranges_;
  size_t lastRange_ = 0;
  std::vector<uint64_t> regs_;
  std::vector<char> locals_;
  struct AlignedDelete {
    void operator()(char *p) const {
      operator delete[](p, std::align_val_t(256));
    }
  };
  std::unique_ptr<char[], AlignedDelete> shared_;
  std::vector<Thread> threads_;
  std::vector<WarpWgmma> wgmma_; // per warp of the block
  /// The block's mbarriers, by shared address.
  std::map<uint64_t, Mbarrier> mbarriers_;
  /// The block's 16 named barriers (bar.sync / bar.arrive with a count).
  NamedBarrier namedBars_[16];
  /// setmaxnreg: registers per thread of each warp of the block, and the
  /// registers the block's warps have returned and not taken back.
  std::vector<uint64_t> warpRegisters_;
  uint64_t registerPool_ = 0;
  /// Whether the current scheduling round moved any thread: executed an
  /// instruction, other than a wait on an incomplete mbarrier phase and
  /// the spin loop around a test_wait (`spinning_`: the thread running
  /// came back to it after a test_wait found its phase incomplete).
  bool progress_ = false, spinning_ = false;
  /// PTXEMU_STATS: by pc, the slot of an ld, st or cp.async (else -1);
  /// by thread x slot, how often the thread has met it in this block,
  /// predicated off included (its lanes' n-th meetings of one instruction
  /// are one warp-wide access: exact in a converged warp); and the accesses
  /// of the warp that runs, by (meeting, slot, side), counted when each of
  /// its lanes has run to a warp-wide instruction or to its end.
  std::vector<int> memSlot_, slotPc_;
  int memSlots_ = 0;
  std::vector<uint64_t> meetings_;
  std::unordered_map<uint64_t, WarpAccess> pending_;
  /// Instructions executed, per thread, by Stat class.
  uint64_t stats_[kNumStats] = {};
  /// The wgmma executed, per thread, in 16x8x16 products (N / 8 each).
  uint64_t wgmmaProducts_ = 0;
  /// PTXEMU_STATS: shared-memory wavefronts of ld/st.shared, cp.async's
  /// destinations, ldmatrix and stmatrix; global-memory sectors of
  /// ld/st.global and cp.async's sources (not TMA's or wgmma's).
  Transactions sharedTx_, globalTx_;
  /// With PTXEMU_STATS=lines: the same by line of the PTX and memory (a
  /// cp.async has both), printed for the lines above their ideal.
  std::map<std::pair<int, bool>, std::pair<const Inst *, Transactions>> byLine_;
  bool byLineWanted_ = false;

  // Scheduling (Launch.cpp).
  std::string where(const Thread &t) const;
  [[noreturn]] void fault(const Thread &t, int code, const std::string &what);
  void checkWarpgroups(unsigned n);
  void runBlock(unsigned n);
  void resume(Thread &t);
  void runThread(Thread &t);

  // Memory (Launch.cpp): a pointer to `n` bytes at address `a`, checked.
  char *global(const Thread &t, uint64_t a, size_t n);
  char *memory(const Thread &t, Space space, uint64_t a, size_t n,
               size_t align);

  // Operands.
  uint64_t special(const Thread &t, Special s) const {
    // %tid, %ntid, %ctaid, %nctaid: x, y, z each, in the enum's order.
    const unsigned *dims[] = {t.tid, block_, ctaid_, grid_};
    if (s == Special::LaneId)
      return t.linear % 32;
    if (s == Special::WarpId)
      return t.linear / 32;
    return dims[int(s) / 3][int(s) % 3];
  }

  uint64_t get(const Thread &t, const Operand &o) const {
    switch (o.kind) {
    case Operand::Reg:
      return t.r[o.reg];
    case Operand::Imm:
      return o.imm;
    case Operand::Spec:
      return special(t, o.spec);
    case Operand::Addr:
      return o.imm + (o.reg >= 0 ? t.r[o.reg] : 0);
    default:
      return 0;
    }
  }
  static void set(Thread &t, const Operand &o, uint64_t v) {
    if (o.kind == Operand::Reg && o.reg > 0)
      t.r[o.reg] = v;
  }
  Space addrSpace(const Inst &in, const Operand &o) const {
    if (in.space != Space::Generic)
      return in.space;
    if (!o.symbol.empty() && o.reg < 0)
      return o.symSpace; // a symbol's own space
    return Space::Generic;
  }

  float f32In(const Inst &in, const Thread &t, const Operand &o) const {
    float v = asF32(get(t, o));
    return in.ftz ? flush(v) : v;
  }
  uint64_t f32Out(const Inst &in, float v) const {
    if (in.sat)
      v = std::isnan(v) ? 0.0f : std::min(1.0f, std::max(0.0f, v));
    return bitsOf(in.ftz ? flush(v) : v);
  }

  /// Fails the launch if `in` has fewer than `n` operands.
  void needOperands(const Thread &t, const Inst &in, size_t n) {
    if (in.ops.size() < n)
      fault(t, PTXEMU_LAUNCH_FAILED, "too few operands");
  }

  // One thread's instruction (Execute.cpp).
  void execute(Thread &t, const Inst &in);

  // Warp-wide instructions (Warp.cpp).
  bool warpCollective(unsigned first, unsigned last, int pc);
  void shfl(Thread *lanes, unsigned n, const Inst &in);
  void vote(Thread *lanes, unsigned n, const Inst &in);
  void elect(Thread *lanes, unsigned n, const Inst &in);
  void namedBarrier(unsigned first, unsigned last, const Inst &in);
  bool setMaxRegisters(unsigned first, unsigned last, const Inst &in);

  // Tensor cores (TensorCore.cpp).
  void ldmatrix(Thread *lanes, unsigned n, const Inst &in);
  void stmatrix(Thread *lanes, unsigned n, const Inst &in);
  void mma(Thread *lanes, unsigned n, const Inst &in);
  void wgmmaCollective(Thread *lanes, unsigned n, const Inst &in);
  void issueWgmma(Thread *lanes, WarpWgmma &s, const Inst &in);
  void retireWgmma(Thread *lanes, WarpWgmma &s, const WgmmaOp &op);

  // Asynchronous copies (AsyncCopy.cpp).
  void cpAsync(Thread &t, const Inst &in);
  void completeCopies(Thread &t, size_t keep);
  void bulkGroup(Thread &t, const Inst &in);
  fake_tensor_map tensorMap(const Thread &t, uint64_t addr, int rank);
  TmaCopy tmaBox(Thread &t, const Inst &in, size_t at, uint64_t smem,
                 const char *role);
  void issueTma(Thread &t, const Inst &in);
  void issueTmaStore(Thread &t, const Inst &in);
  void performTmaStore(const TmaCopy &c);
  void performTma(const TmaCopy &c);

  // Mbarriers (Mbarrier.cpp).
  std::string blockWhere() const;
  static std::string mbarrierName(uint64_t addr);
  Mbarrier &mbarrierAt(const Thread &t, uint64_t addr);
  void mbarrierOp(Thread &t, const Inst &in);
  void expectTx(const Thread &t, uint64_t addr, Mbarrier &b, uint64_t bytes);
  void completePhaseIfDone(const Thread &t, uint64_t addr, Mbarrier &b);
  bool mbarrierWait(Thread &t, const Inst &in);
  [[noreturn]] void neverCompletes(Thread &t);
  void checkNoCopyInFlight() const;

  // PTXEMU_STATS (Stats.cpp).
  void traceAccess(const Thread &t, Space space, uint64_t addr, unsigned bytes,
                   int side = 0);
  void matrixRows(const Thread *lanes, const Inst &in, const Operand &rows);
  void count(const WarpAccess &a, const Inst &in);
  void countPending();
};

} // namespace ptxi

#endif // PTXI_LIB_LAUNCH_H
