//===- TensorCore.cpp - ldmatrix, stmatrix, mma.sync and wgmma ------------===//
//
// The tensor-core instructions and the matrix loads and stores that feed
// them, read as the PTX ISA lays out their fragments. mma.sync and wgmma
// compute their products exactly (f16 and bf16 into double), summed in
// double with the accumulator, rounded to f32 once.
//
//===----------------------------------------------------------------------===//

#include "Launch.h"

#include <cstdio>
#include <cstring>

namespace ptxi {

// ldmatrix.sync.aligned.m8n8.{x1,x2,x4}[.trans].shared.b16: lanes 8m..8m+7
// give the row addresses of matrix m, and lane l gets row l / 4, columns
// 2 (l % 4) and 2 (l % 4) + 1 of it (of its transpose with .trans).
void Launch::ldmatrix(Thread *lanes, unsigned n, const Inst &in) {
  const std::vector<Operand> &o = in.ops;
  if (n != 32)
    fault(lanes[0], PTXEMU_LAUNCH_FAILED, "ldmatrix in a partial warp");
  const char *rows[32];
  for (unsigned l = 0; l < 8u * in.matrices; ++l)
    rows[l] =
        memory(lanes[l], addrSpace(in, o[1]), get(lanes[l], o[1]), 16, 16);
  if (!memSlot_.empty())
    matrixRows(lanes, in, o[1]);
  for (unsigned l = 0; l < 32; ++l)
    for (int m = 0; m < in.matrices; ++m) {
      uint32_t v;
      if (!in.trans) {
        memcpy(&v, rows[8 * m + l / 4] + 4 * (l % 4), 4);
      } else {
        uint16_t lo, hi;
        memcpy(&lo, rows[8 * m + 2 * (l % 4)] + 2 * (l / 4), 2);
        memcpy(&hi, rows[8 * m + 2 * (l % 4) + 1] + 2 * (l / 4), 2);
        v = lo | ((uint32_t)hi << 16);
      }
      set(lanes[l], o[0].elems.at(m), v);
    }
}

void Launch::stmatrix(Thread *lanes, unsigned n, const Inst &in) {
  const std::vector<Operand> &o = in.ops;
  // The inverse of ldmatrix: lanes 8m..8m+7 give the row addresses of
  // matrix m, and lane l's register m holds row l / 4, columns
  // 2 (l % 4) and 2 (l % 4) + 1 of it (of its transpose with .trans).
  if (n != 32)
    fault(lanes[0], PTXEMU_LAUNCH_FAILED, "stmatrix in a partial warp");
  char *rows[32];
  for (unsigned l = 0; l < 8u * in.matrices; ++l)
    rows[l] =
        memory(lanes[l], addrSpace(in, o[0]), get(lanes[l], o[0]), 16, 16);
  if (!memSlot_.empty())
    matrixRows(lanes, in, o[0]);
  for (unsigned l = 0; l < 32; ++l)
    for (int m = 0; m < in.matrices; ++m) {
      uint32_t v = (uint32_t)get(lanes[l], o[1].elems.at(m));
      if (!in.trans) {
        memcpy(rows[8 * m + l / 4] + 4 * (l % 4), &v, 4);
      } else {
        uint16_t lo = (uint16_t)v, hi = (uint16_t)(v >> 16);
        memcpy(rows[8 * m + 2 * (l % 4)] + 2 * (l / 4), &lo, 2);
        memcpy(rows[8 * m + 2 * (l % 4) + 1] + 2 * (l / 4), &hi, 2);
      }
    }
}

// mma.sync.aligned.{m16n8k16,m16n8k8}.row.col.f32.{f16,bf16}.{f16,bf16}.f32:
// the fragments of the PTX ISA ("Matrix Fragments for mma.m16n8k16");
// the products exact, summed in double, rounded to f32 once.
void Launch::mma(Thread *lanes, unsigned n, const Inst &in) {
  const std::vector<Operand> &o = in.ops;
  if (n != 32)
    fault(lanes[0], PTXEMU_LAUNCH_FAILED, "mma in a partial warp");
  const int K = in.mmaK;
  float A[16][16], B[16][8], C[16][8];
  auto half = [&](uint32_t reg, int h) {
    uint16_t bits = (uint16_t)(reg >> (16 * h));
    return in.bf16 ? bf16ToF32(bits) : f16ToF32(bits);
  };
  for (unsigned l = 0; l < 32; ++l) {
    const Thread &t = lanes[l];
    int g = l / 4, q = l % 4;
    for (int i = 0; i < (K == 16 ? 8 : 4); ++i) {
      uint32_t reg = (uint32_t)get(t, o[1].elems.at(i / 2));
      int row = g + 8 * ((i >> 1) & 1), col = 2 * q + (i & 1) + 8 * (i >= 4);
      A[row][col] = half(reg, i & 1);
    }
    for (int i = 0; i < (K == 16 ? 4 : 2); ++i) {
      uint32_t reg = (uint32_t)get(t, o[2].elems.at(i / 2));
      B[2 * q + (i & 1) + 8 * (i >= 2)][g] = half(reg, i & 1);
    }
    for (int i = 0; i < 4; ++i)
      C[g + 8 * (i >= 2)][2 * q + (i & 1)] = asF32(get(t, o[3].elems.at(i)));
  }
  for (unsigned l = 0; l < 32; ++l) {
    Thread &t = lanes[l];
    int g = l / 4, q = l % 4;
    for (int i = 0; i < 4; ++i) {
      int row = g + 8 * (i >= 2), col = 2 * q + (i & 1);
      double acc = C[row][col];
      for (int kk = 0; kk < K; ++kk)
        acc += (double)A[row][kk] * B[kk][col];
      set(t, o[0].elems.at(i), bitsOf((float)acc));
    }
  }
}

// wgmma, per warp: warp w of a warpgroup (4 consecutive warps of the
// block) computes rows 16w..16w+15 of D, from the same rows of A, so warps
// run it independently. An mma_async captures its register operands and
// poisons its D registers (NaN) when issued; it completes, in issue order,
// at the wait_group that retires its group: it reads its shared-memory
// operands then, and writes D. The products are exact (f16 and bf16 into
// double), summed in double with the D input, rounded to f32 once, as
// mma.sync here.
void Launch::wgmmaCollective(Thread *lanes, unsigned n, const Inst &in) {
  bool whole = n == 32;
  for (unsigned l = 0; whole && l < n; ++l)
    whole = lanes[l].state == Thread::WaitWarp;
  if (!whole)
    fault(lanes[0], PTXEMU_LAUNCH_FAILED,
          "wgmma needs all 32 lanes of the warp (.aligned)");
  WarpWgmma &s = wgmma_[lanes[0].linear / 32];
  switch (in.op) {
  case Op::WgmmaFence:
    s.fenced = true;
    return;
  case Op::WgmmaCommit:
    s.groups.push_back(std::move(s.open));
    s.open.clear();
    return;
  case Op::WgmmaWait:
    while (s.groups.size() > in.ops[0].imm) {
      for (const WgmmaOp &op : s.groups.front())
        retireWgmma(lanes, s, op);
      s.groups.erase(s.groups.begin());
    }
    return;
  default:
    issueWgmma(lanes, s, in);
  }
}

void Launch::issueWgmma(Thread *lanes, WarpWgmma &s, const Inst &in) {
  const std::vector<Operand> &o = in.ops;
  unsigned warp = lanes[0].linear / 32, group = warp / 4;
  if (!s.fenced)
    fault(lanes[0], PTXEMU_LAUNCH_FAILED,
          "wgmma.mma_async without a wgmma.fence before it");
  if ((group + 1) * 128 > threads_.size())
    fault(lanes[0], PTXEMU_LAUNCH_FAILED,
          "wgmma.mma_async in warpgroup " + std::to_string(group) +
              ", which a block of " + std::to_string(threads_.size()) +
              " threads does not fill");
  auto uniform = [&](const Operand &x, const char *what) {
    uint64_t v = get(lanes[0], x);
    for (unsigned l = 1; l < 32; ++l)
      if (get(lanes[l], x) != v)
        fault(lanes[l], PTXEMU_LAUNCH_FAILED,
              std::string(what) + " differs between the lanes of the warp");
    return v;
  };
  auto descriptor = [&](const Operand &x, const char *what) {
    uint64_t d = uniform(x, what);
    char buf[160];
    if ((d >> 49) & 7) {
      snprintf(buf, sizeof buf,
               "%s 0x%016llx has base offset %u (bits 49-51): only 0 is "
               "supported",
               what, (unsigned long long)d, unsigned((d >> 49) & 7));
      fault(lanes[0], PTXEMU_LAUNCH_FAILED, buf);
    }
    return d;
  };
  WgmmaOp op;
  op.in = &in;
  op.seq = s.nextSeq++;
  if (!in.wgmmaRegA)
    op.descA = descriptor(o[1], "the A descriptor");
  op.descB = descriptor(o[2], "the B descriptor");
  op.scaleD = uniform(o[3], "scale-d") != 0;
  const int regs = in.wgmmaN / 2;
  if (in.wgmmaRegA) {
    op.a.resize(32 * 4);
    for (unsigned l = 0; l < 32; ++l)
      for (int i = 0; i < 4; ++i)
        op.a[l * 4 + i] = (uint32_t)get(lanes[l], o[1].elems[i]);
  }
  // The D inputs: the registers', or for a register that a wgmma still in
  // flight writes, that one's result. Then D holds NaNs until completion.
  op.c.resize(32 * regs);
  op.cFrom.assign(regs, -1);
  for (int i = 0; i < regs; ++i) {
    int r = o[0].elems[i].reg;
    auto it = s.pending.find(r);
    if (it != s.pending.end())
      op.cFrom[i] = it->second;
    else
      for (unsigned l = 0; l < 32; ++l)
        op.c[l * regs + i] = (uint32_t)lanes[l].r[r];
  }
  for (int i = 0; i < regs; ++i) {
    int r = o[0].elems[i].reg;
    for (unsigned l = 0; l < 32; ++l)
      lanes[l].r[r] = 0xffffffffu;
    s.pending[r] = op.seq;
  }
  s.issued.push_back(in.line);
  s.open.push_back(std::move(op));
}

void Launch::retireWgmma(Thread *lanes, WarpWgmma &s, const WgmmaOp &op) {
  const Inst &in = *op.in;
  const int N = in.wgmmaN, regs = N / 2;
  const int w = (int)(lanes[0].linear / 32) % 4;
  auto value = [&](uint16_t bits) {
    return in.bf16 ? bf16ToF32(bits) : f16ToF32(bits);
  };
  // Element (mn, k) of the operand `desc` describes. Without swizzle: 8x8
  // core matrices of 16-byte rows (rows along MN when K-major, along K
  // when MN-major), LBO bytes apart along K, SBO bytes apart along MN.
  // With a W-byte swizzle (bits 62-63: 1 128-byte, 2 64-byte, 3 32-byte),
  // the ISA's canonical layouts in 16-bit elements, T = 8:
  // K-major ((8,m),(T,2k)):((W/2,SBO),(1,T)), rows of W bytes along MN, 8
  // of them SBO apart (LBO unused: the 16 k of one instruction fit in a
  // row); MN-major ((T,W/16,m),(8,k)):((1,T,LBO),(W/2,SBO)), W/2 mn per
  // row, LBO apart, rows along k, 8 of them SBO apart. Then the address,
  // the absolute shared one, is swizzled as TMA's.
  auto element = [&](uint64_t desc, bool mnMajor, int mn, int k) {
    static const int kSpans[] = {0, 128, 64, 32};
    uint64_t start = (desc & 0x3fff) << 4;
    uint64_t lbo = ((desc >> 16) & 0x3fff) << 4;
    uint64_t sbo = ((desc >> 32) & 0x3fff) << 4;
    int w = kSpans[desc >> 62];
    uint64_t a;
    if (!w)
      a = start + uint64_t(mn / 8) * sbo + uint64_t(k / 8) * lbo +
          (mnMajor ? (k % 8) * 16 + (mn % 8) * 2 : (mn % 8) * 16 + (k % 8) * 2);
    else if (!mnMajor)
      a = swizzle(start + uint64_t(mn % 8) * w + uint64_t(mn / 8) * sbo + k * 2,
                  w);
    else
      a = swizzle(start + uint64_t(mn % (w / 2)) * 2 +
                      uint64_t(mn / (w / 2)) * lbo + uint64_t(k % 8) * w +
                      uint64_t(k / 8) * sbo,
                  w);
    if (a + 2 > sharedBytes_)
      fault(lanes[0], PTXEMU_ILLEGAL_ADDRESS,
            "the wgmma.mma_async of line " + std::to_string(in.line) +
                " reads shared address " + std::to_string(a) +
                " (+2) beyond the block's " + std::to_string(sharedBytes_) +
                " bytes");
    uint16_t bits;
    memcpy(&bits, shared_.get() + a, 2);
    return value(bits);
  };
  // Its registers must not change while it is in flight (ISA): the A
  // registers still hold what was captured, D the poison issue left.
  auto modified = [&](int l, const std::string &which) {
    fault(lanes[l], PTXEMU_LAUNCH_FAILED,
          which + " of the wgmma.mma_async of line " + std::to_string(in.line) +
              " was written while the wgmma was in flight");
  };
  if (in.wgmmaRegA)
    for (int l = 0; l < 32; ++l)
      for (int i = 0; i < 4; ++i)
        if ((uint32_t)get(lanes[l], in.ops[1].elems[i]) != op.a[l * 4 + i])
          modified(l, "A register " + std::to_string(i));
  for (int i = 0; i < regs; ++i) {
    int r = in.ops[0].elems[i].reg;
    auto it = s.pending.find(r);
    if (it != s.pending.end() && it->second == op.seq)
      for (int l = 0; l < 32; ++l)
        if ((uint32_t)lanes[l].r[r] != 0xffffffffu)
          modified(l, "accumulator register " + std::to_string(i));
  }
  float A[16][16];
  std::vector<float> B(16 * N);
  if (in.wgmmaRegA) {
    // mma.sync m16n8k16's A fragment.
    for (int l = 0; l < 32; ++l) {
      int g = l / 4, q = l % 4;
      for (int i = 0; i < 8; ++i) {
        uint32_t reg = op.a[l * 4 + i / 2];
        int row = g + 8 * ((i >> 1) & 1), col = 2 * q + (i & 1) + 8 * (i >= 4);
        A[row][col] = value((uint16_t)(reg >> (16 * (i & 1))));
      }
    }
  } else {
    for (int r = 0; r < 16; ++r)
      for (int k = 0; k < 16; ++k)
        A[r][k] = element(op.descA, in.tnspA, 16 * w + r, k);
  }
  for (int k = 0; k < 16; ++k)
    for (int j = 0; j < N; ++j)
      B[k * N + j] = in.scaleB * element(op.descB, in.tnspB, j, k);
  for (int r = 0; r < 16; ++r)
    for (int k = 0; k < 16; ++k)
      A[r][k] *= in.scaleA;
  std::vector<uint32_t> d(32 * regs);
  for (int l = 0; l < 32; ++l) {
    int g = l / 4, q = l % 4;
    for (int i = 0; i < regs; ++i) {
      int j = i % 4, row = g + 8 * (j / 2), col = 8 * (i / 4) + 2 * q + j % 2;
      double acc = op.scaleD ? (double)asF32(op.c[l * regs + i]) : 0.0;
      for (int k = 0; k < 16; ++k)
        acc += (double)A[row][k] * B[k * N + col];
      d[l * regs + i] = (uint32_t)bitsOf((float)acc);
    }
  }
  // Each D register gets the result, unless a later wgmma in flight writes
  // it too: that one takes the result as its input, and the register stays
  // poisoned.
  for (int i = 0; i < regs; ++i) {
    int r = in.ops[0].elems[i].reg;
    auto it = s.pending.find(r);
    if (it != s.pending.end() && it->second == op.seq) {
      s.pending.erase(it);
      for (int l = 0; l < 32; ++l)
        lanes[l].r[r] = d[l * regs + i];
      continue;
    }
    auto forward = [&](WgmmaOp &later) {
      int laterRegs = later.in->wgmmaN / 2;
      for (int j = 0; j < laterRegs; ++j)
        if (later.cFrom[j] == op.seq && later.in->ops[0].elems[j].reg == r) {
          later.cFrom[j] = -1;
          for (int l = 0; l < 32; ++l)
            later.c[l * laterRegs + j] = d[l * regs + i];
        }
    };
    for (auto &g : s.groups)
      for (WgmmaOp &later : g)
        forward(later);
    for (WgmmaOp &later : s.open)
      forward(later);
  }
}

} // namespace ptxi
