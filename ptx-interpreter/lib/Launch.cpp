//===- Launch.cpp - Blocks, warps, threads and memory spaces --------------===//
//
// See Launch.h. Each warp of a block runs as far as it can before the next
// starts, in ascending order and descending the next round, so that a
// missing barrier shows; a launch fails when no thread can move.
//
//===----------------------------------------------------------------------===//

#include "Launch.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ptxi {

Launch::Launch(const Kernel &k, const unsigned grid[3], const unsigned block[3],
               unsigned dynamicShared, void **params,
               const ptxemu_range *ranges, size_t numRanges)
    : k_(k), code_(k.code) {
  for (int i = 0; i < 3; ++i)
    grid_[i] = grid[i], block_[i] = block[i];
  sharedBytes_ = k.dynamicSharedOffset + dynamicShared;
  // 64-byte aligned, as `.param .align 64` (a tensor map) asks.
  params_.assign(k.paramBytes + 8 + 64, 0);
  paramBase_ = params_.data() + (-(uintptr_t)params_.data() % 64);
  for (size_t i = 0; i < k.params.size(); ++i)
    memcpy(paramBase_ + k.params[i].offset, params[i], k.params[i].size);
  if (const char *stats = getenv("PTXEMU_STATS")) {
    byLineWanted_ = strcmp(stats, "lines") == 0;
    memSlot_.assign(code_.size(), -1);
    for (size_t pc = 0; pc < code_.size(); ++pc)
      if (code_[pc].op == Op::Ld || code_[pc].op == Op::St ||
          code_[pc].op == Op::CpAsync) {
        memSlot_[pc] = memSlots_++;
        slotPc_.push_back(int(pc));
      }
  }
  ranges_.assign(ranges, ranges + numRanges);
  for (auto &[data, size] : k.globalData)
    ranges_.push_back({data, size});
  std::sort(ranges_.begin(), ranges_.end(),
            [](const ptxemu_range &a, const ptxemu_range &b) {
              return a.ptr < b.ptr;
            });
}

void Launch::run() {
  unsigned n = block_[0] * block_[1] * block_[2];
  if (n == 0 || n > 1024)
    throw Fault{PTXEMU_INVALID_VALUE,
                "block of " + std::to_string(n) + " threads"};
  if (k_.maxThreads && n > k_.maxThreads)
    throw Fault{PTXEMU_INVALID_VALUE, "block of " + std::to_string(n) +
                                          " threads, beyond the " +
                                          std::to_string(k_.maxThreads) +
                                          " of the kernel's .maxntid"};
  if (sharedBytes_ > 227 * 1024)
    throw Fault{PTXEMU_INVALID_VALUE,
                "shared memory of " + std::to_string(sharedBytes_) + " bytes"};
  regs_.assign((size_t)n * k_.numRegs, 0);
  locals_.assign((size_t)n * std::max<uint64_t>(k_.localBytes, 1), 0);
  shared_.reset(new (std::align_val_t(256)) char[sharedBytes_ + 256]);
  threads_.assign(n, Thread{});
  for (unsigned z = 0; z < grid_[2]; ++z)
    for (unsigned y = 0; y < grid_[1]; ++y)
      for (unsigned x = 0; x < grid_[0]; ++x) {
        ctaid_[0] = x, ctaid_[1] = y, ctaid_[2] = z;
        runBlock(n);
      }
}

std::string Launch::where(const Thread &t) const {
  const Inst &in = code_[t.pc];
  char buf[160];
  snprintf(buf, sizeof buf,
           "kernel %s, block (%u,%u,%u), thread (%u,%u,%u), line %d: ",
           k_.name.c_str(), ctaid_[0], ctaid_[1], ctaid_[2], t.tid[0], t.tid[1],
           t.tid[2], in.line);
  return buf + in.text;
}

void Launch::fault(const Thread &t, int code, const std::string &what) {
  throw Fault{code, where(t) + ": " + what};
}

/// wgmma is warpgroup-wide: every warp of a warpgroup must have issued
/// the same mma_async, in the same order (a warp that skips one, or
/// issues another, leaves the others' products incomplete on a GPU).
void Launch::checkWarpgroups(unsigned n) {
  for (unsigned w = 0; w < warpRegisters_.size(); ++w)
    if (warpRegisters_[w] != warpRegisters_[w / 4 * 4])
      fault(threads_[std::min<size_t>(n - 1, size_t(w) * 32)],
            PTXEMU_LAUNCH_FAILED,
            "warp " + std::to_string(w % 4) + " of warpgroup " +
                std::to_string(w / 4) + " ends with " +
                std::to_string(warpRegisters_[w]) +
                " registers per thread, warp 0 with " +
                std::to_string(warpRegisters_[w / 4 * 4]) +
                " (setmaxnreg is executed by a whole warpgroup)");
  for (unsigned w = 0; w < wgmma_.size(); ++w) {
    const std::vector<int> &mine = wgmma_[w].issued,
                           &first = wgmma_[w / 4 * 4].issued;
    if (mine == first)
      continue;
    size_t i = 0;
    while (i < mine.size() && i < first.size() && mine[i] == first[i])
      ++i;
    auto at = [](const std::vector<int> &v, size_t i) {
      return i < v.size() ? "line " + std::to_string(v[i]) : "none";
    };
    fault(threads_[std::min<size_t>(n - 1, size_t(w) * 32)],
          PTXEMU_LAUNCH_FAILED,
          "warp " + std::to_string(w % 4) + " of warpgroup " +
              std::to_string(w / 4) +
              " issued other wgmma.mma_async than "
              "warp 0: its wgmma " +
              std::to_string(i + 1) + " is " + at(mine, i) + ", warp 0's " +
              at(first, i) + " (all warps of a warpgroup must issue the same)");
  }
}

void Launch::runBlock(unsigned n) {
  memset(shared_.get(), 0xa5, sharedBytes_);
  std::fill(regs_.begin(), regs_.end(), 0);
  wgmma_.assign((n + 31) / 32, WarpWgmma{});
  mbarriers_.clear();
  uint64_t launchRegisters =
      k_.maxThreads ? std::min<uint64_t>(256, 65536 / k_.maxThreads / 8 * 8)
                    : 0;
  warpRegisters_.assign((n + 31) / 32, launchRegisters);
  registerPool_ = 0;
  meetings_.assign(memSlot_.empty() ? 0 : size_t(n) * memSlots_, 0);
  // Arrivals no phase completed (a last bar.arrive nobody syncs on) do
  // not carry over: the hardware resets the barriers between blocks.
  for (NamedBarrier &b : namedBars_)
    b = NamedBarrier{};
  for (unsigned i = 0; i < n; ++i) {
    Thread &t = threads_[i];
    t = Thread{};
    t.linear = i;
    t.tid[0] = i % block_[0];
    t.tid[1] = (i / block_[0]) % block_[1];
    t.tid[2] = i / (block_[0] * block_[1]);
    t.r = &regs_[(size_t)i * k_.numRegs];
    t.local = &locals_[(size_t)i * std::max<uint64_t>(k_.localBytes, 1)];
  }
  // Each warp runs as far as it can (its collectives included) before
  // the next one starts, in ascending order and descending the next
  // round: a kernel that lacks a barrier between writing shared memory
  // and reading it (or reading and overwriting it) then reads what the
  // other warps have not written yet, or have already overwritten.
  // Threads blocked on an mbarrier try again in each warp's turn.
  unsigned warps = (n + 31) / 32;
  for (unsigned round = 0;; ++round) {
    bool allDone = true;
    progress_ = false;
    for (unsigned step = 0; step < warps; ++step) {
      unsigned w = round % 2 ? warps - 1 - step : step;
      unsigned first = w * 32, last = std::min(n, first + 32);
      for (;;) {
        for (unsigned i = first; i < last; ++i)
          resume(threads_[i]);
        countPending();
        int pc = -1;
        bool ready = true, any = false;
        for (unsigned i = first; i < last; ++i) {
          const Thread &t = threads_[i];
          if (t.state == Thread::Done)
            continue;
          any = true;
          if (t.state != Thread::WaitWarp || (pc >= 0 && t.pc != pc))
            ready = false;
          pc = t.pc;
        }
        if (!any || !ready) {
          allDone = allDone && !any;
          break;
        }
        if (!warpCollective(first, last, pc)) { // waits for registers
          allDone = false;
          break;
        }
        progress_ = true;
      }
    }
    if (allDone) {
      checkNoCopyInFlight();
      return checkWarpgroups(n);
    }
    bool barrier = true;
    for (unsigned i = 0; i < n; ++i)
      if (threads_[i].state != Thread::Done &&
          threads_[i].state != Thread::WaitBar)
        barrier = false;
    if (barrier) {
      for (unsigned i = 0; i < n; ++i)
        if (threads_[i].state == Thread::WaitBar) {
          threads_[i].state = Thread::Run;
          ++threads_[i].pc;
        }
      continue;
    }
    if (progress_)
      continue;
    // Nothing can move: a warp waiting for registers first.
    for (unsigned i = 0; i < n; i += 32)
      if (threads_[i].state == Thread::WaitWarp &&
          code_[threads_[i].pc].op == Op::SetMaxNreg) {
        const Inst &in = code_[threads_[i].pc];
        fault(threads_[i], PTXEMU_LAUNCH_FAILED,
              "setmaxnreg.inc to " + std::to_string(in.ops[0].imm) +
                  " registers in warp " + std::to_string(i / 32) + " (it has " +
                  std::to_string(warpRegisters_[i / 32]) +
                  ") waits for registers no other warp returns (the "
                  "block's pool has " +
                  std::to_string(registerPool_) + ")");
      }
    // Then name a waiting thread, one blocked on an mbarrier first (the
    // others may wait for it), then one of a warp whose lanes diverge at a
    // named barrier (the others may wait for its arrival).
    for (unsigned i = 0; i < n; ++i)
      if (threads_[i].state == Thread::WaitMbar ||
          threads_[i].state == Thread::Spin)
        neverCompletes(threads_[i]);
    for (unsigned i = 0; i < n; ++i)
      if (threads_[i].state == Thread::WaitWarp &&
          code_[threads_[i].pc].op == Op::Bar)
        fault(threads_[i], PTXEMU_LAUNCH_FAILED,
              "the lanes of warp " + std::to_string(i / 32) +
                  " diverge at a named barrier (all its live lanes must "
                  "execute the same bar.sync or bar.arrive together)");
    for (unsigned i = 0; i < n; ++i) {
      const Thread &t = threads_[i];
      if (t.state == Thread::WaitNamed) {
        const NamedBarrier &b = namedBars_[t.namedBar];
        fault(t, PTXEMU_LAUNCH_FAILED,
              "barrier " + std::to_string(t.namedBar) + ": " +
                  std::to_string(b.arrived) + " of " +
                  std::to_string(b.expected) +
                  " threads arrived, and no other thread can arrive");
      }
      if (t.state != Thread::Done)
        fault(t, PTXEMU_LAUNCH_FAILED,
              t.state == Thread::WaitBar
                  ? "a barrier that not every thread of the block reaches"
                  : "a warp-wide instruction that not every thread of the "
                    "warp reaches together");
    }
  }
}

/// Runs `t` if it can move; a thread blocked on an mbarrier tries again.
void Launch::resume(Thread &t) {
  if (t.state != Thread::Run && t.state != Thread::WaitMbar &&
      t.state != Thread::Spin)
    return;
  spinning_ = t.state == Thread::Spin;
  t.state = Thread::Run;
  runThread(t);
}

void Launch::runThread(Thread &t) {
  for (;;) {
    const Inst &in = code_[t.pc];
    bool wait = in.op == Op::Mbarrier &&
                (in.mbarrier == MbarTryWait || in.mbarrier == MbarTestWait);
    if (!wait && !spinning_)
      progress_ = true;
    if (!memSlot_.empty() && memSlot_[t.pc] >= 0)
      ++meetings_[size_t(t.linear) * memSlots_ + memSlot_[t.pc]];
    if (in.pred >= 0 && (t.r[in.pred] != 0) == in.predNeg) {
      ++t.pc;
      continue;
    }
    // (Each thread meets a warp-wide instruction once: counted here too.)
    ++stats_[in.stat];
    switch (in.op) {
    case Op::Bra:
      t.pc = in.target;
      continue;
    case Op::Ret:
      if (const WgmmaOp *op = wgmma_[t.linear / 32].oldest())
        fault(t, PTXEMU_LAUNCH_FAILED,
              "wgmma not waited for: the wgmma.mma_async of line " +
                  std::to_string(op->in->line) + " is still in flight");
      t.storeGroups.push_back(std::move(t.openStores));
      for (const std::vector<TmaCopy> &g : t.storeGroups)
        if (!g.empty())
          fault(t, PTXEMU_LAUNCH_FAILED,
                "TMA store not waited for: the cp.async.bulk.tensor of line " +
                    std::to_string(g.front().line) +
                    " may still read shared memory "
                    "(cp.async.bulk.wait_group)");
      t.state = Thread::Done;
      return;
    case Op::Bar:
      if (in.ops.size() == 2) { // a thread count: warp by warp
        t.state = Thread::WaitWarp;
        return;
      }
      if (uint64_t id = zext(get(t, in.ops[0]), 32); id > 15)
        fault(t, PTXEMU_LAUNCH_FAILED,
              "barrier id " + std::to_string(id) +
                  ": a block has barriers 0 to 15");
      t.state = Thread::WaitBar;
      return;
    case Op::Shfl:
    case Op::Mma:
    case Op::Ldmatrix:
    case Op::Stmatrix:
    case Op::Vote:
    case Op::Elect:
    case Op::WgmmaFence:
    case Op::WgmmaCommit:
    case Op::WgmmaWait:
    case Op::SetMaxNreg:
      t.state = Thread::WaitWarp;
      return;
    case Op::Wgmma:
      wgmmaProducts_ += in.wgmmaN / 8;
      t.state = Thread::WaitWarp;
      return;
    case Op::Mbarrier:
      if (wait) {
        bool done = mbarrierWait(t, in);
        if (done)
          progress_ = true, spinning_ = false;
        if (!done && in.mbarrier == MbarTryWait) {
          // Blocked where it is, to try again in later turns (counted once).
          --stats_[in.stat];
          t.state = Thread::WaitMbar;
          return;
        }
        ++t.pc;
        if (!done) { // a kernel may spin on test_wait: let the others run
          t.state = Thread::Spin;
          t.spinPc = t.pc - 1;
          return;
        }
        continue;
      }
      execute(t, in);
      ++t.pc;
      continue;
    default:
      execute(t, in);
      ++t.pc;
    }
  }
}

char *Launch::global(const Thread &t, uint64_t a, size_t n) {
  char *p = reinterpret_cast<char *>(static_cast<uintptr_t>(a));
  if (lastRange_ < ranges_.size()) {
    const ptxemu_range &r = ranges_[lastRange_];
    if (p >= r.ptr && p + n <= r.ptr + r.size)
      return p;
  }
  auto it = std::upper_bound(
      ranges_.begin(), ranges_.end(), p,
      [](const char *q, const ptxemu_range &r) { return q < r.ptr; });
  if (it != ranges_.begin()) {
    --it;
    if (p >= it->ptr && p + n <= it->ptr + it->size) {
      lastRange_ = (size_t)(it - ranges_.begin());
      return p;
    }
  }
  char buf[96];
  snprintf(buf, sizeof buf, "%zu bytes at 0x%llx are not device memory", n,
           (unsigned long long)a);
  fault(t, PTXEMU_ILLEGAL_ADDRESS, buf);
}

char *Launch::memory(const Thread &t, Space space, uint64_t a, size_t n,
                     size_t align) {
  if (align > 1 && a % align != 0) {
    char buf[96];
    snprintf(buf, sizeof buf, "misaligned %zu-byte access at 0x%llx", align,
             (unsigned long long)a);
    fault(t, PTXEMU_ILLEGAL_ADDRESS, buf);
  }
  switch (space) {
  case Space::Global:
    return global(t, a, n);
  case Space::Shared:
    if (a + n > sharedBytes_ || a + n < a)
      fault(t, PTXEMU_ILLEGAL_ADDRESS,
            "shared address " + std::to_string(a) + " (+" + std::to_string(n) +
                ") beyond the block's " + std::to_string(sharedBytes_) +
                " bytes");
    return shared_.get() + a;
  case Space::Param:
    if (a + n > k_.paramBytes)
      fault(t, PTXEMU_ILLEGAL_ADDRESS, "parameter offset out of range");
    return paramBase_ + a;
  case Space::Local:
    if (a + n > k_.localBytes)
      fault(t, PTXEMU_ILLEGAL_ADDRESS, "local offset out of range");
    return t.local + a;
  case Space::Generic: {
    char *p = reinterpret_cast<char *>(static_cast<uintptr_t>(a));
    if (p >= shared_.get() && p + n <= shared_.get() + sharedBytes_)
      return p;
    if (p >= t.local && p + n <= t.local + k_.localBytes)
      return p;
    if (p >= paramBase_ && p + n <= paramBase_ + k_.paramBytes)
      return p; // a kernel parameter's generic address (cvta.param)
    return global(t, a, n);
  }
  }
  return nullptr;
}

} // namespace ptxi
