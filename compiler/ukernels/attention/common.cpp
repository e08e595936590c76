//===- common.cpp - The keys an attention call attends to; its reference --===//
//
// What every attention kernel shares: the keys a padding mask lets a call
// skip, and the scalar reference that runs the layouts and sizes outside
// the vector kernels (and every call where there are none).
//
//===----------------------------------------------------------------------===//

#include "attention/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tfc::uk::attention {
namespace {

/// Keys shorter than this between two used ranges are walked anyway.
constexpr int64_t kMinGap = 32;

/// The ranges for `p`. Only a mask that is the same for every query head and
/// row (a padding mask) is looked at. A hidden key adds exactly 0 to a row
/// that sees a visible key, so dropping it changes nothing there; a row
/// that sees none averages over what it sees and must keep it all. So:
/// keys past the last visible one (over the batch) go whenever every
/// batch element has a visible key (a causal row that sees past a batch
/// element's last visible key sees that key); leading keys and the
/// longest hidden run between visible ones go as well when every row sees
/// a visible key (causal: each batch element's first visible key is within
/// row 0's reach). With a sliding window a row sees the keys of its window
/// only: every key dropped needs every row to see a visible key there.
KeyRanges paddingKeyRanges(const Problem &p) {
  KeyRanges r;
  r.end[0] = p.Skv;
  if (!p.mask || (p.ms[1] != 0 && p.Hq > 1) || (p.ms[2] != 0 && p.Sq > 1) ||
      p.Skv == 0)
    return r;
  // hiddenAll[j]: key j is hidden in every batch element.
  static thread_local std::vector<char> hiddenAll;
  hiddenAll.assign(size_t(p.Skv), 1);
  // seen[j]: visible keys before key j in the batch element (windows only).
  static thread_local std::vector<int64_t> seen;
  bool rowsSeeVisible = true;
  int64_t last = -1;
  for (int64_t b = 0; b < p.B; ++b) {
    const float *m = p.mask + b * p.ms[0];
    int64_t first = -1;
    if (p.window > 0)
      seen.assign(size_t(p.Skv + 1), 0);
    for (int64_t j = 0; j < p.Skv; ++j) {
      bool visible = !(m[j * p.ms[3]] <= kHiddenKey); // NaN counts as visible
      if (visible) {
        hiddenAll[size_t(j)] = 0;
        if (first < 0)
          first = j;
        last = std::max(last, j);
      }
      if (p.window > 0)
        seen[size_t(j + 1)] = seen[size_t(j)] + visible;
    }
    if (first < 0)
      return r; // a batch element whose rows see no visible key
    if (p.causal && first > p.causalOffset)
      rowsSeeVisible = false;
    for (int64_t i = 0; p.window > 0 && rowsSeeVisible && i < p.Sq; ++i) {
      int64_t lo = std::clamp<int64_t>(windowStart(p, i), 0, p.Skv);
      int64_t hi = p.causal
                       ? std::clamp<int64_t>(i + p.causalOffset + 1, 0, p.Skv)
                       : p.Skv;
      rowsSeeVisible = hi > lo && seen[size_t(hi)] > seen[size_t(lo)];
    }
  }
  if (p.window > 0 && !rowsSeeVisible)
    return r; // a row that sees only hidden keys of its window
  r.end[0] = last + 1;
  if (!rowsSeeVisible)
    return r;
  int64_t first = 0;
  while (hiddenAll[size_t(first)])
    ++first;
  r.begin[0] = first;
  // The longest hidden run in [first, last]; both ends are visible.
  int64_t gapBegin = 0, gapEnd = 0;
  for (int64_t j = first; j <= last;) {
    if (!hiddenAll[size_t(j)]) {
      ++j;
      continue;
    }
    int64_t k = j;
    while (hiddenAll[size_t(k)])
      ++k;
    if (k - j > gapEnd - gapBegin) {
      gapBegin = j;
      gapEnd = k;
    }
    j = k;
  }
  if (gapEnd - gapBegin >= kMinGap) {
    r.count = 2;
    r.end[0] = gapBegin;
    r.begin[1] = gapEnd;
    r.end[1] = last + 1;
  }
  return r;
}

} // namespace

/// paddingKeyRanges without the keys before row 0's sliding window, which
/// every row's window leaves out.
KeyRanges keyRanges(const Problem &p) {
  KeyRanges r = paddingKeyRanges(p);
  int64_t start = windowStart(p, 0);
  KeyRanges kept;
  kept.count = 0;
  for (int s = 0; s < r.count; ++s) {
    int64_t begin = std::max(r.begin[s], start);
    if (begin < r.end[s]) {
      kept.begin[kept.count] = begin;
      kept.end[kept.count++] = r.end[s];
    }
  }
  if (kept.count == 0) { // keys no row sees: an empty range at the end
    kept.count = 1;
    kept.begin[0] = kept.end[0] = r.end[r.count - 1];
  }
  return kept;
}

/// Float reference used when a layout or size is outside the fast path.
void attentionReference(const Problem &p) {
  int64_t group = p.Hq / p.Hkv;
  std::vector<float> s(p.Skv);
  std::vector<double> acc(p.Dv);
#pragma omp parallel for collapse(2) firstprivate(s, acc) schedule(dynamic)
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.Hq; ++h) {
      int64_t kh = h / group;
      for (int64_t i = 0; i < p.Sq; ++i) {
        const float *qi = p.q + b * p.qs[0] + h * p.qs[1] + i * p.qs[2];
        float mx = kNegInf;
        for (int64_t j = 0; j < p.Skv; ++j) {
          const float *kj = p.k + b * p.ks[0] + kh * p.ks[1] + j * p.ks[2];
          float dot = 0;
          for (int64_t d = 0; d < p.D; ++d)
            dot += qi[d * p.qs[3]] * kj[d * p.ks[3]];
          float x = dot * p.scale;
          if (p.softcap > 0)
            x = float(p.softcap * std::tanh(double(x) / p.softcap));
          if (p.mask)
            x += p.mask[b * p.ms[0] + h * p.ms[1] + i * p.ms[2] + j * p.ms[3]];
          if ((p.causal && j > i + p.causalOffset) || j < windowStart(p, i))
            x = kNegInf;
          s[j] = x;
          mx = std::max(mx, x);
        }
        float *oi = p.out + b * p.os[0] + h * p.os[1] + i * p.os[2];
        std::fill(acc.begin(), acc.end(), 0.0);
        double sum = 0;
        if (mx != kNegInf) {
          for (int64_t j = 0; j < p.Skv; ++j) {
            double e = std::exp(double(s[j]) - mx);
            sum += e;
            const float *vj = p.v + b * p.vs[0] + kh * p.vs[1] + j * p.vs[2];
            for (int64_t c = 0; c < p.Dv; ++c)
              acc[c] += e * vj[c * p.vs[3]];
          }
        }
        for (int64_t c = 0; c < p.Dv; ++c)
          oi[c * p.os[3]] = sum > 0 ? float(acc[c] / sum) : 0.0f;
      }
    }
}

} // namespace tfc::uk::attention
