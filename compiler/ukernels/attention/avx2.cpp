//===- avx2.cpp - Attention's query blocks without AVX-512 ----------------===//
//
// Without AVX-512 (AVX2 and FMA): a flash attention on the shared
// register-blocked kernel. K^T and V of every (batch, K/V head) are packed
// into panels once per call, then a task owns a block of query rows of one
// (batch, head) and walks the key blocks once: S = Q . K_blk^T and
// O = O * alpha + P . V_blk are blockProduct calls on the panels, the online
// softmax runs along the rows of S in between. Queries are rows here (not
// lanes as in the AVX-512 kernel), so the rescale of O is a pass over the
// block of O, 1/(2 Bc) of the products' work. Causal key blocks past the
// diagonal and the keys before a sliding window are skipped; grouped-query
// heads share their packed K/V head.
//
//===----------------------------------------------------------------------===//

#include "attention/attention.h"
#include "microkernel.h"

#include <algorithm>
#include <cmath>
#include <vector>

#if defined(TFC_UK_VECTOR) && !defined(__AVX512F__)

namespace tfc::uk::attention {
namespace {

constexpr int64_t kPanel = 2 * kLanes; // columns of a packed panel
constexpr int64_t kMaxBr = 10 * kMR;   // most query rows per task
// Keys per block (whole panels). 256 rather than 64: the P.V product's k
// loop runs 4x longer per load and store of O, and O is rescaled a quarter
// as often (two threads, in-process A/B: 12x1024x64 causal GQA and 12x2048x64
// 7-8% faster, 12x128x64 causal 4%, 12x77x64 3%).
constexpr int64_t kBc = 256;
static_assert(kBc % kPanel == 0, "key blocks are whole panels");

/// Rounds n up to whole panels.
int64_t panelsOf(int64_t n) { return (n + kPanel - 1) / kPanel; }

/// Packs K (Skv rows of D) transposed into panels of kPanel keys: panel t
/// holds kt[d * kPanel + c] = K[t * kPanel + c][d], zero past Skv.
void packKeys(const Problem &p, const float *k, float *kt) {
  for (int64_t t = 0; t < panelsOf(p.Skv); ++t)
    for (int64_t c = 0; c < kPanel; ++c) {
      int64_t j = t * kPanel + c;
      float *dst = kt + t * p.D * kPanel + c;
      const float *src = k + j * p.ks[2];
      for (int64_t d = 0; d < p.D; ++d)
        dst[d * kPanel] = j < p.Skv ? src[d * p.ks[3]] : 0.0f;
    }
}

/// Packs V (Skv rows of Dv) into panels of kPanel channels: panel t holds
/// vp[j * kPanel + c] = V[j][t * kPanel + c], zero past Dv.
void packValues(const Problem &p, const float *v, float *vp) {
  for (int64_t t = 0; t < panelsOf(p.Dv); ++t)
    for (int64_t j = 0; j < p.Skv; ++j) {
      const float *src = v + j * p.vs[2];
      float *dst = vp + (t * p.Skv + j) * kPanel;
      for (int64_t c = 0; c < kPanel; ++c) {
        int64_t ch = t * kPanel + c;
        dst[c] = ch < p.Dv ? src[ch * p.vs[3]] : 0.0f;
      }
    }
}

/// 64-byte aligned float buffers carved from one vector.
float *alignedFloats(std::vector<float> &storage, size_t n) {
  if (storage.size() < n + 16)
    storage.resize(n + 16);
  return reinterpret_cast<float *>(
      (reinterpret_cast<uintptr_t>(storage.data()) + 63) & ~uintptr_t(63));
}

} // namespace

void attentionPanels(const Problem &p) {
  int64_t group = p.Hq / p.Hkv;
  int64_t vPanels = panelsOf(p.Dv), ldo = vPanels * kPanel;
  size_t kHead = size_t(panelsOf(p.Skv) * kPanel * p.D);
  size_t vHead = size_t(vPanels * kPanel * p.Skv);
  size_t head = (kHead + vHead + 15) / 16 * 16;
  static thread_local std::vector<float> packedStorage;
  float *packed = alignedFloats(packedStorage, size_t(p.B * p.Hkv) * head);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t kh = 0; kh < p.Hkv; ++kh) {
      float *kt = packed + size_t(b * p.Hkv + kh) * head;
      packKeys(p, p.k + b * p.ks[0] + kh * p.ks[1], kt);
      packValues(p, p.v + b * p.vs[0] + kh * p.vs[1], kt + kHead);
    }
  // Equal query blocks of whole register blocks, at most kMaxBr rows.
  int64_t qBlocks = (p.Sq + kMaxBr - 1) / kMaxBr;
  int64_t br = (p.Sq + qBlocks - 1) / qBlocks;
  br = std::min(kMaxBr, (br + kMR - 1) / kMR * kMR);
  qBlocks = (p.Sq + br - 1) / br;
  forEachTask(p.B * p.Hq * qBlocks, [&](int64_t task) {
    int64_t qb = task % qBlocks, bh = task / qBlocks;
    int64_t b = bh / p.Hq, h = bh % p.Hq;
    // Per thread: S (br x kBc), O (br x ldo), the running max and sum.
    static thread_local std::vector<float> scratch;
    size_t sSize = size_t(kMaxBr * kBc), oSize = size_t(kMaxBr * ldo);
    float *sBlk = alignedFloats(scratch, sSize + oSize + 2 * kMaxBr + kBc + 16);
    float *o = sBlk + sSize, *m = o + oSize, *l = m + kMaxBr;
    // A mask row shared by the block's queries, in base 2, per key block.
    float *bias = l + kMaxBr;
    int64_t i0 = qb * br, rows = std::min(br, p.Sq - i0);
    bool sharedMask = p.mask && (p.ms[2] == 0 || rows == 1);
    const float *q = p.q + b * p.qs[0] + h * p.qs[1] + i0 * p.qs[2];
    const float *kt = packed + size_t(b * p.Hkv + h / group) * head;
    const float *vp = kt + kHead;
    std::fill(o, o + rows * ldo, 0.0f);
    std::fill(m, m + rows, kNegInf);
    std::fill(l, l + rows, 0.0f);
    // Keys past the last row's diagonal are hidden from the whole block.
    int64_t keys = p.Skv;
    if (p.causal)
      keys = std::clamp<int64_t>(i0 + rows + p.causalOffset, 0, p.Skv);
    // Keys before the first row's window are hidden from the block
    // (blocks start on a panel).
    int64_t start =
        std::clamp<int64_t>(windowStart(p, i0), 0, p.Skv) / kPanel * kPanel;
    for (int64_t j0 = start; j0 < keys; j0 += kBc) {
      int64_t kb = std::min(kBc, keys - j0);
      // S = Q . K^T (unscaled), one panel of keys at a time.
      for (int64_t t = 0; t < panelsOf(kb); ++t) {
        Tile<2> tile{
            q,
            p.qs[2],
            p.qs[3],
            kt + (j0 / kPanel + t) * p.D * kPanel,
            p.D,
            sBlk + t * kPanel,
            kBc,
            {firstLanes(kb - t * kPanel), firstLanes(kb - t * kPanel - kLanes)},
            /*allCols=*/kb - t * kPanel >= kPanel,
            false,
            nullptr};
        blockProduct<2>(tile, rows);
      }
      if (sharedMask) {
        const float *mr = p.mask + b * p.ms[0] + h * p.ms[1] + i0 * p.ms[2];
        for (int64_t j = 0; j < kb; ++j)
          bias[j] = toLog2Domain(mr[(j0 + j) * p.ms[3]]);
        std::fill(bias + kb, bias + panelsOf(kb) * kPanel, 0.0f);
      }
      // The online softmax along each row, in base 2.
      for (int64_t r = 0; r < rows; ++r) {
        float *sr = sBlk + r * kBc;
        int64_t i = i0 + r;
        const float *mr =
            p.mask ? p.mask + b * p.ms[0] + h * p.ms[1] + i * p.ms[2] : nullptr;
        int64_t visible =
            p.causal ? std::clamp<int64_t>(i + p.causalOffset + 1 - j0, 0, kb)
                     : kb;
        // Keys before `below` are outside the row's window.
        int64_t below = std::clamp<int64_t>(windowStart(p, i) - j0, 0, kb);
        // Scores in base 2: scale * log2(e) folded when there is no
        // mask (dot products are finite), else (s * scale + mask) taken
        // to base 2 kept finite where it is (a framework's finfo.min
        // mask must not become -inf). Keys past `visible` are -inf;
        // lanes up to the panel's end are read (S rows hold kBc).
        // A soft cap is applied first, the scale with it.
        VecF mxv = vset1(kNegInf), negInf = vset1(kNegInf);
        float scale = p.softcap > 0 ? 1.0f : p.scale;
        for (int64_t j = 0; j < kb; j += kLanes) {
          VecF x = vloadu(sr + j);
          if (p.softcap > 0)
            x = capped(vmul(x, vset1(p.scale / p.softcap)), vset1(p.softcap));
          if (sharedMask) {
            x = vfmadd(x, vset1(scale * kLog2e), vloadu(bias + j));
          } else if (mr) {
            VecF add;
            // A contiguous mask row (the usual) takes vector loads: a
            // lane-by-lane gather took masked attention 12% longer
            // (12x1024x64 causal GQA and 12x512x64 on two threads).
            if (p.ms[3] == 1) {
              add = j + kLanes <= kb
                        ? vloadu(mr + j0 + j)
                        : vloadLanes(mr + j0 + j, firstLanes(kb - j));
            } else {
              float lanes[kLanes];
              for (int64_t c = 0; c < kLanes; ++c)
                lanes[c] = j + c < kb ? mr[(j0 + j + c) * p.ms[3]] : 0.0f;
              add = vloadu(lanes);
            }
            x = toLog2Domain(vfmadd(x, vset1(scale), add), vset1(kLog2e));
          } else {
            x = vmul(x, vset1(scale * kLog2e));
          }
          x = vselect(firstLanes(visible - j), x, negInf);
          if (below > j)
            x = vselect(firstLanes(below - j), negInf, x);
          vstoreu(sr + j, x);
          mxv = vmax(mxv, x);
        }
        float mNew = std::max(m[r], vreduceMax(mxv));
        if (mNew == kNegInf) { // nothing visible yet: P = 0
          std::fill(sr, sr + kb, 0.0f);
          continue;
        }
        float alpha = std::exp2(m[r] - mNew);
        m[r] = mNew;
        // P = 2^(S - m): hidden keys, and the lanes past kb (-inf
        // above), are 0.
        VecF mv = vset1(mNew), sum = vzero();
        for (int64_t j = 0; j < kb; j += kLanes) {
          VecF e = vexp2(vsub(vloadu(sr + j), mv));
          vstoreu(sr + j, e);
          sum = vadd(sum, e);
        }
        l[r] = l[r] * alpha + vreduceAdd(sum);
        if (alpha != 1.0f) {
          float *orow = o + r * ldo;
          VecF av = vset1(alpha);
          for (int64_t c = 0; c < ldo; c += kLanes)
            vstoreu(orow + c, vmul(vloadu(orow + c), av));
        }
      }
      // O += P . V, one panel of channels at a time.
      for (int64_t t = 0; t < vPanels; ++t) {
        Tile<2> tile{sBlk,
                     kBc,
                     1,
                     vp + (t * p.Skv + j0) * kPanel,
                     kb,
                     o + t * kPanel,
                     ldo,
                     {firstLanes(kLanes), firstLanes(kLanes)},
                     /*allCols=*/true,
                     true,
                     nullptr};
        blockProduct<2>(tile, rows);
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      float *out = p.out + b * p.os[0] + h * p.os[1] + (i0 + r) * p.os[2];
      float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;
      for (int64_t c = 0; c < p.Dv; ++c)
        out[c * p.os[3]] = o[r * ldo + c] * inv;
    }
  });
}

} // namespace tfc::uk::attention

#endif
