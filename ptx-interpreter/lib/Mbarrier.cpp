//===- Mbarrier.cpp - mbarrier phases, arrivals and transaction bytes -----===//
//
// An mbarrier (PTX ISA "Parallel Synchronization and Communication
// Instructions: mbarrier") lives in a table by shared address, reset for
// each block. Its phase completes when every arrival is in and no byte is
// still expected; the TMA loads it tracks are performed then, when a wait
// finds the phase's arrivals in, and never earlier.
//
//===----------------------------------------------------------------------===//

#include "Launch.h"

#include <cstdio>

namespace ptxi {

std::string Launch::blockWhere() const {
  char buf[128];
  snprintf(buf, sizeof buf, "kernel %s, block (%u,%u,%u): ", k_.name.c_str(),
           ctaid_[0], ctaid_[1], ctaid_[2]);
  return buf;
}

std::string Launch::mbarrierName(uint64_t addr) {
  char buf[64];
  snprintf(buf, sizeof buf, "mbarrier at shared 0x%llx",
           (unsigned long long)addr);
  return buf;
}

Mbarrier &Launch::mbarrierAt(const Thread &t, uint64_t addr) {
  memory(t, Space::Shared, addr, 8, 8); // in the block's, 8-byte aligned
  auto it = mbarriers_.find(addr);
  if (it == mbarriers_.end())
    fault(t, PTXEMU_LAUNCH_FAILED,
          mbarrierName(addr) + " used before mbarrier.init");
  return it->second;
}

void Launch::expectTx(const Thread &t, uint64_t addr, Mbarrier &b,
                      uint64_t bytes) {
  if (bytes >= (1u << 20))
    fault(t, PTXEMU_LAUNCH_FAILED,
          "expect-tx of " + std::to_string(bytes) + " bytes on " +
              mbarrierName(addr) + ": beyond the tx-count's 2^20 - 1");
  b.tx += int64_t(bytes);
}

/// The current phase completes when every arrival is in and no byte is
/// still expected.
void Launch::completePhaseIfDone(const Thread &t, uint64_t addr, Mbarrier &b) {
  if (b.pending != 0 || b.tx != 0)
    return;
  // A copy the barrier tracks would then land in a later phase: on a GPU
  // the waiters read the tile before it arrives.
  if (!b.copies.empty())
    fault(t, PTXEMU_LAUNCH_FAILED,
          mbarrierName(addr) + " completes phase " + std::to_string(b.phase) +
              " while the cp.async.bulk.tensor of line " +
              std::to_string(b.copies.front().line) +
              " it tracks is in flight: no expect-tx announced its " +
              std::to_string(b.copies.front().bytes) + " bytes");
  ++b.phase;
  b.pending = b.expected;
}

/// mbarrier.init, arrive, expect_tx and inval.
void Launch::mbarrierOp(Thread &t, const Inst &in) {
  const std::vector<Operand> &o = in.ops;
  bool addrFirst = in.mbarrier == MbarInit || in.mbarrier == MbarExpectTx ||
                   in.mbarrier == MbarInval;
  uint64_t addr = get(t, addrFirst ? o[0] : o[1]);
  if (in.mbarrier == MbarInit) {
    memory(t, Space::Shared, addr, 8, 8);
    uint64_t count = zext(get(t, o[1]), 32);
    if (count == 0 || count >= (1u << 20))
      fault(t, PTXEMU_LAUNCH_FAILED,
            "mbarrier.init with count " + std::to_string(count) +
                ": the count must be in 1..2^20 - 1");
    auto it = mbarriers_.find(addr);
    if (it != mbarriers_.end() && !it->second.copies.empty())
      fault(t, PTXEMU_LAUNCH_FAILED,
            mbarrierName(addr) +
                " initialized again while the "
                "cp.async.bulk.tensor of line " +
                std::to_string(it->second.copies.front().line) +
                " is in flight on it");
    Mbarrier &b = mbarriers_[addr];
    b = Mbarrier{};
    b.expected = b.pending = uint32_t(count);
    return;
  }
  Mbarrier &b = mbarrierAt(t, addr);
  switch (in.mbarrier) {
  case MbarInval:
    if (!b.copies.empty())
      fault(t, PTXEMU_LAUNCH_FAILED,
            mbarrierName(addr) +
                " invalidated while the cp.async.bulk.tensor "
                "of line " +
                std::to_string(b.copies.front().line) + " is in flight on it");
    mbarriers_.erase(addr);
    return;
  case MbarExpectTx:
    expectTx(t, addr, b, zext(get(t, o[1]), 32));
    return completePhaseIfDone(t, addr, b);
  default: { // arrive[.expect_tx]
    // The state operand is opaque to the kernel: the phase arrived on.
    set(t, o[0], b.phase);
    if (in.mbarrier == MbarArriveExpectTx)
      expectTx(t, addr, b, zext(get(t, o[2]), 32));
    uint64_t count =
        in.mbarrier == MbarArrive && o.size() == 3 ? zext(get(t, o[2]), 32) : 1;
    if (count == 0 || count > b.pending)
      fault(t, PTXEMU_LAUNCH_FAILED,
            std::to_string(count) + " arrival(s) on " + mbarrierName(addr) +
                ", whose phase " + std::to_string(b.phase) + " waits for " +
                std::to_string(b.pending) + " more of its " +
                std::to_string(b.expected));
    b.pending -= uint32_t(count);
    return completePhaseIfDone(t, addr, b);
  }
  }
}

/// mbarrier.try_wait.parity / test_wait.parity: whether the phase of that
/// parity has completed, i.e. the current phase has the other parity (PTX
/// ISA). Sets the predicate.
bool Launch::mbarrierWait(Thread &t, const Inst &in) {
  uint64_t addr = get(t, in.ops[1]);
  Mbarrier &b = mbarrierAt(t, addr);
  uint64_t parity = get(t, in.ops[2]) & 1;
  if ((b.phase & 1) == parity && b.pending == 0 && !b.copies.empty()) {
    // Every arrival of the phase is in: the copies it awaits land now and
    // never earlier, so that a read before the wait sees their poison.
    for (const TmaCopy &c : b.copies) {
      performTma(c);
      b.tx -= c.bytes;
    }
    b.copies.clear();
    completePhaseIfDone(t, addr, b);
  }
  bool done = (b.phase & 1) != parity;
  set(t, in.ops[0], done);
  return done;
}

void Launch::neverCompletes(Thread &t) {
  if (t.state == Thread::Spin)
    t.pc = t.spinPc;
  uint64_t addr = get(t, code_[t.pc].ops[1]);
  auto it = mbarriers_.find(addr);
  if (it == mbarriers_.end())
    fault(t, PTXEMU_LAUNCH_FAILED,
          "waits on " + mbarrierName(addr) + ", which was invalidated");
  const Mbarrier &b = it->second;
  std::string what = mbarrierName(addr) + " never completes phase " +
                     std::to_string(b.phase) + ": " +
                     std::to_string(b.pending) + " arrivals and ";
  if (b.tx >= 0)
    what += std::to_string(b.tx) + " bytes missing";
  else
    what += "no bytes missing, but " + std::to_string(-b.tx) +
            " bytes more than expected arrived";
  if (!b.copies.empty())
    what += " (" + std::to_string(b.copies.size()) +
            " cp.async.bulk.tensor wait for the arrivals)";
  fault(t, PTXEMU_LAUNCH_FAILED, what);
}

void Launch::checkNoCopyInFlight() const {
  for (const auto &[addr, b] : mbarriers_) {
    if (b.copies.empty())
      continue;
    char buf[96];
    snprintf(buf, sizeof buf, "0x%llx",
             (unsigned long long)b.copies.front().dst);
    throw Fault{PTXEMU_LAUNCH_FAILED,
                blockWhere() +
                    "a cp.async.bulk.tensor still in flight at the end of the "
                    "block: the one of line " +
                    std::to_string(b.copies.front().line) + " into shared " +
                    buf + ", tracked by " + mbarrierName(addr) +
                    ", on which no thread waited for phase " +
                    std::to_string(b.phase)};
  }
}

} // namespace ptxi
