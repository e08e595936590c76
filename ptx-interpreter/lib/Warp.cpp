//===- Warp.cpp - Warp-wide instructions, named barriers, setmaxnreg ------===//
//
// A warp-wide instruction runs when every live thread of the warp waits at
// it, for all of them at once: shfl, vote and elect here, the tensor-core
// instructions in TensorCore.cpp. Named barriers (bar.sync / bar.arrive
// with a thread count) count whole warps; setmaxnreg moves registers
// between a warp and its block's pool.
//
//===----------------------------------------------------------------------===//

#include "Launch.h"

namespace ptxi {

bool Launch::warpCollective(unsigned first, unsigned last, int pc) {
  const Inst &in = code_[pc];
  unsigned n = last - first;
  Thread *lanes = &threads_[first];
  if (in.op == Op::Bar) {
    namedBarrier(first, last, in);
    return true;
  }
  if (in.op == Op::SetMaxNreg && !setMaxRegisters(first, last, in))
    return false;
  switch (in.op) {
  case Op::Shfl:
    shfl(lanes, n, in);
    break;
  case Op::Vote:
    vote(lanes, n, in);
    break;
  case Op::Elect:
    elect(lanes, n, in);
    break;
  case Op::Ldmatrix:
    ldmatrix(lanes, n, in);
    break;
  case Op::Stmatrix:
    stmatrix(lanes, n, in);
    break;
  case Op::Mma:
    mma(lanes, n, in);
    break;
  case Op::WgmmaFence:
  case Op::WgmmaCommit:
  case Op::WgmmaWait:
  case Op::Wgmma:
    wgmmaCollective(lanes, n, in);
    break;
  case Op::SetMaxNreg:
    break;
  default:
    fault(lanes[0], PTXEMU_LAUNCH_FAILED, "not a warp-wide instruction");
  }
  for (unsigned l = 0; l < n; ++l) {
    lanes[l].state = Thread::Run;
    ++lanes[l].pc;
  }
  return true;
}

// shfl.sync.{up,down,bfly,idx}.b32 d[|p], a, b, c, membermask.
void Launch::shfl(Thread *lanes, unsigned n, const Inst &in) {
  const std::vector<Operand> &o = in.ops;
  uint32_t values[32];
  for (unsigned l = 0; l < n; ++l)
    values[l] = (uint32_t)get(lanes[l], o[1]);
  for (unsigned l = 0; l < n; ++l) {
    Thread &t = lanes[l];
    uint32_t b = (uint32_t)get(t, o[2]) & 31, c = (uint32_t)get(t, o[3]);
    uint32_t mask = (c >> 8) & 31, cval = c & 31;
    uint32_t maxLane = (l & mask) | (cval & ~mask), minLane = l & mask;
    int j;
    bool valid;
    switch (in.shflMode) {
    case 0:
      j = (int)l - (int)b;
      valid = j >= (int)maxLane;
      break;
    case 1:
      j = (int)(l + b);
      valid = j <= (int)maxLane;
      break;
    case 2:
      j = (int)(l ^ b);
      valid = j <= (int)maxLane;
      break;
    default:
      j = (int)(minLane | (b & ~mask));
      valid = j <= (int)maxLane;
      break;
    }
    if (!valid)
      j = (int)l;
    if (j >= (int)n)
      fault(t, PTXEMU_LAUNCH_FAILED, "shfl from a lane that does not exist");
    set(t, o[0], values[j]);
    if (o[0].reg2 > 0)
      t.r[o[0].reg2] = valid;
  }
}

void Launch::vote(Thread *lanes, unsigned n, const Inst &in) {
  const std::vector<Operand> &o = in.ops;
  // vote.sync.{all,any,uni}.pred d, p, membermask and
  // vote.sync.ballot.b32 d, p, membermask, over a whole warp.
  uint32_t ballot = 0;
  for (unsigned l = 0; l < n; ++l)
    if (get(lanes[l], o.at(1)) & 1)
      ballot |= 1u << l;
  uint32_t everyone = n == 32 ? ~0u : (1u << n) - 1;
  for (unsigned l = 0; l < n; ++l) {
    if ((uint32_t)get(lanes[l], o.at(2)) != everyone)
      fault(lanes[l], PTXEMU_LAUNCH_FAILED,
            "vote.sync over part of a warp is not supported");
    uint64_t d = in.shflMode == 0   ? ballot == everyone
                 : in.shflMode == 1 ? ballot != 0
                 : in.shflMode == 2 ? (ballot == 0 || ballot == everyone)
                                    : ballot;
    set(lanes[l], o[0], d);
  }
}

void Launch::elect(Thread *lanes, unsigned n, const Inst &in) {
  const std::vector<Operand> &o = in.ops;
  // elect.sync d|p, membermask: the lowest lane of the mask leads; d is
  // its lane id in every lane, p true in the leader only.
  uint32_t everyone = n == 32 ? ~0u : (1u << n) - 1;
  for (unsigned l = 0; l < n; ++l)
    if ((uint32_t)get(lanes[l], o.at(1)) != everyone)
      fault(lanes[l], PTXEMU_LAUNCH_FAILED,
            "elect.sync over part of a warp is not supported");
  for (unsigned l = 0; l < n; ++l) {
    if (o[0].kind == Operand::Reg && o[0].reg > 0)
      set(lanes[l], o[0], 0);
    if (o[0].reg2 > 0)
      lanes[l].r[o[0].reg2] = l == 0;
  }
}

// setmaxnreg, executed by every thread of a warp together: .dec returns
// the registers above `count` of each thread to the block's pool, .inc
// takes them from it, and waits (false: the warp has not moved) while the
// pool lacks them. A kernel that uses setmaxnreg is launched with the
// registers its .maxntid allows (ptxas gives it that many: 65536 / threads
// per block, rounded down to a multiple of 8).
bool Launch::setMaxRegisters(unsigned first, unsigned last, const Inst &in) {
  Thread &lead = threads_[first];
  unsigned warp = first / 32;
  if (last - first != 32)
    fault(lead, PTXEMU_LAUNCH_FAILED,
          "setmaxnreg in warp " + std::to_string(warp) +
              ", which is not a whole warp (a warpgroup's 128 threads "
              "execute it)");
  for (unsigned i = first; i < last; ++i)
    if (threads_[i].state == Thread::Done)
      fault(lead, PTXEMU_LAUNCH_FAILED,
            "setmaxnreg in warp " + std::to_string(warp) +
                " after some of its threads exited (.sync.aligned: all of "
                "them execute it)");
  if (!k_.maxThreads)
    fault(lead, PTXEMU_LAUNCH_FAILED,
          "setmaxnreg in a kernel without .maxntid: its launch register "
          "count is unknown");
  uint64_t count = in.ops[0].imm, &mine = warpRegisters_[warp];
  const char *name = in.decrease ? "setmaxnreg.dec" : "setmaxnreg.inc";
  if (in.decrease ? count > mine : count < mine)
    fault(lead, PTXEMU_LAUNCH_FAILED,
          std::string(name) + " to " + std::to_string(count) +
              " registers in warp " + std::to_string(warp) + ", which has " +
              std::to_string(mine));
  if (in.decrease) {
    registerPool_ += (mine - count) * 32;
  } else {
    if (registerPool_ < (count - mine) * 32)
      return false;
    registerPool_ -= (count - mine) * 32;
  }
  mine = count;
  return true;
}

// A bar.sync or bar.arrive with a thread count, which every live lane of
// the warp executes together: the hardware counts arrivals per warp, 32
// for a warp whatever its active or live lanes. The count that completes
// the phase releases the threads waiting at a bar.sync on the barrier and
// resets it; bar.arrive does not wait.
void Launch::namedBarrier(unsigned first, unsigned last, const Inst &in) {
  const Thread *lead = nullptr;
  auto uniform = [&](const Operand &x, const char *what) {
    uint64_t v = 0;
    bool seen = false;
    for (unsigned i = first; i < last; ++i) {
      const Thread &t = threads_[i];
      if (t.state == Thread::Done)
        continue;
      uint64_t mine = zext(get(t, x), 32);
      if (!seen)
        lead = &t, v = mine, seen = true;
      else if (mine != v)
        fault(t, PTXEMU_LAUNCH_FAILED,
              std::string(what) + " differs between the lanes of the warp");
    }
    return v;
  };
  uint64_t id = uniform(in.ops[0], "the barrier id");
  uint64_t count = uniform(in.ops[1], "the thread count");
  const char *name = in.barArrive ? "bar.arrive" : "bar.sync";
  if (id > 15)
    fault(*lead, PTXEMU_LAUNCH_FAILED,
          "barrier id " + std::to_string(id) +
              ": a block has barriers 0 to 15");
  unsigned n = (unsigned)threads_.size(), whole = (n + 31) / 32 * 32;
  if (count == 0 || count % 32 != 0)
    fault(*lead, PTXEMU_LAUNCH_FAILED,
          "thread count " + std::to_string(count) + " of barrier " +
              std::to_string(id) +
              ": not a positive multiple of the warp size (32)");
  if (count > whole)
    fault(*lead, PTXEMU_LAUNCH_FAILED,
          "thread count " + std::to_string(count) + " of barrier " +
              std::to_string(id) + " beyond the block's " + std::to_string(n) +
              " threads (" + std::to_string(whole) + " in whole warps)");
  NamedBarrier &b = namedBars_[id];
  if (b.arrived + 32 > count)
    fault(*lead, PTXEMU_LAUNCH_FAILED,
          std::string(name) + " on barrier " + std::to_string(id) +
              " with thread count " + std::to_string(count) + " after " +
              std::to_string(b.arrived) +
              " arrivals in this phase: too many arrivals in one phase (the "
              "behaviour is undefined)");
  if (b.arrived && b.expected != count)
    fault(*lead, PTXEMU_LAUNCH_FAILED,
          std::string(name) + " on barrier " + std::to_string(id) +
              " with thread count " + std::to_string(count) +
              ", while this phase's earlier arrivals gave " +
              std::to_string(b.expected) + " (all must give the same count)");
  b.expected = (uint32_t)count;
  b.arrived += 32;
  for (unsigned i = first; i < last; ++i) {
    Thread &t = threads_[i];
    if (t.state == Thread::Done)
      continue;
    if (in.barArrive) {
      t.state = Thread::Run;
      ++t.pc;
    } else {
      t.state = Thread::WaitNamed;
      t.namedBar = (int)id;
      b.waiters.push_back(i);
    }
  }
  if (b.arrived < b.expected)
    return;
  for (unsigned i : b.waiters) {
    Thread &t = threads_[i];
    t.state = Thread::Run;
    t.namedBar = -1;
    ++t.pc;
  }
  b = NamedBarrier{};
}

} // namespace ptxi
