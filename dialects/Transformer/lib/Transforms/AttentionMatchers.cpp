//===- AttentionMatchers.cpp - Recognise attention in TOSA graphs ---------===//
//
// The matchers of attention and of its masks (Matchers.h): the causal and
// boolean selects, the soft cap, the operands' peeled reshapes, scales and
// repetitions, and sliding-window bands. Each returns the first condition
// that failed, checked from the root upwards.
//
//===----------------------------------------------------------------------===//

#include "Matchers.h"

#include "tfc/Dialect/Transformer/IR/Transformer.h"

#include "mlir/IR/Matchers.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <cstdio>

using namespace mlir;

namespace tfc::transformer::fusion {

static std::string formatList(ArrayRef<int32_t> values) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(values, os);
  os << "]";
  return s;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

namespace {

/// What walking from the softmax input down to the scores matmul found.
struct ScoresWalk {
  double scale = 1.0;
  bool scaled = false;
  double softcap = 0;          ///< > 0 once a soft cap was peeled.
  SmallVector<Value, 2> masks; ///< Additive, outermost first.
  bool isCausal = false;
  double causalFill = 0; ///< What the causal select writes for hidden keys.
  std::optional<BooleanMask> booleanMask;
  SmallVector<HeadView> views;
  tosa::MatMulOp matmul;
  /// How many values were accepted before a failure: picks the more
  /// telling reason when both operands of an add are tried.
  int progress = 0;
};

enum class Role { Query, Key, Value };

} // namespace

/// Whether `cond` (shape [1, .., 1, Sq, Skv], the last two dims those of
/// `scores`, not broadcast) is exactly the causal pattern
/// `j <= i + (Skv - Sq)` for the visible value.
static bool isCausalPattern(DenseElementsAttr cond, Value scores,
                            bool visibleWhenTrue) {
  auto type = cast<ShapedType>(cond.getType());
  RankedTensorType scoresType = rankedType(scores);
  int64_t r = type.getRank();
  if (r < 2 || !type.hasStaticShape() || !scoresType ||
      scoresType.getRank() != r ||
      scoresType.getShape().take_back(2) != type.getShape().take_back(2))
    return false;
  for (int64_t i = 0; i + 2 < r; ++i)
    if (type.getDimSize(i) != 1)
      return false;
  int64_t sq = type.getDimSize(r - 2), skv = type.getDimSize(r - 1);
  if (sq > skv)
    return false; // Rows without keys: the op's zeros would differ.
  auto values = cond.getValues<bool>();
  auto it = values.begin();
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < skv; ++j, ++it)
      if ((*it == visibleWhenTrue) != (j <= i + (skv - sq)))
        return false;
  return true;
}

/// A constant, also reshaped (an exported tril reshaped to [1, 1, Sq, Skv]):
/// sets `attr` to its values in `v`'s shape.
static bool matchReshapedConstant(Value v, DenseElementsAttr &attr) {
  auto reshape = v.getDefiningOp<tosa::ReshapeOp>();
  if (!reshape)
    return matchPattern(v, m_Constant(&attr));
  RankedTensorType type = rankedType(reshape.getOutput());
  if (!type || !type.hasStaticShape() ||
      !matchReshapedConstant(reshape.getInput1(), attr))
    return false;
  attr = attr.reshape(type);
  return true;
}

MatchOr<MaskSelect> matchMaskSelect(tosa::SelectOp sel) {
  DenseElementsAttr cond;
  bool constant = matchReshapedConstant(sel.getPred(), cond);
  MaskSelect m;
  m.scores = sel.getOnTrue();
  bool visibleWhenTrue = true;
  std::optional<double> fill = getSplatFloat(sel.getOnFalse());
  if (!fill) {
    // select(hidden, fill, scores), as masked_fill writes it.
    fill = getSplatFloat(sel.getOnTrue());
    m.scores = sel.getOnFalse();
    visibleWhenTrue = false;
  }
  if (!fill)
    return mismatch("select does not choose between the scores and a "
                    "constant");
  // A fill that does not vanish under exp would not be a mask.
  if (*fill > -1.0e4)
    return mismatch("select fill value " + std::to_string(*fill) +
                    " is not a large negative constant");
  m.fill = *fill;
  m.isCausal = constant && isCausalPattern(cond, m.scores, visibleWhenTrue);
  if (!m.isCausal)
    m.booleanMask = BooleanMask{cond, constant ? Value() : sel.getPred(),
                                visibleWhenTrue, *fill};
  return m;
}

/// The op hides causal keys outright. A causal select with a finite fill is
/// the same only while each row keeps a visible score far above the fill;
/// an additive mask can push every visible score of a row down to it
/// (padding written as finfo.min), and then the filled keys count. Such a
/// pair is left unfused; a fill of -inf has no such rows.
static bool finiteCausalFillWithMask(const ScoresWalk &w, std::string &why) {
  if (!w.isCausal || w.masks.empty() || std::isinf(w.causalFill))
    return false;
  char fill[32];
  std::snprintf(fill, sizeof(fill), "%g", w.causalFill);
  why = std::string("a mask is added to scores whose causal select fills "
                    "with a finite ") +
        fill +
        ": rows whose visible keys are all masked would differ (fill with "
        "-inf to fuse)";
  return true;
}

/// `tanh(x * a) * c` with splat constants, a = 1 / c to the rounding of
/// the element type and c > 0: the soft cap `c * tanh(x / c)`. Returns c
/// and sets `x`; nullopt when `mul` is not of that form.
static std::optional<double> matchSoftcap(tosa::MulOp mul, Value &x) {
  for (int i = 0; i < 2; ++i) {
    auto tanh = mul->getOperand(i).getDefiningOp<tosa::TanhOp>();
    std::optional<double> c = getSplatFloat(mul->getOperand(1 - i));
    if (!tanh || !c || !(*c > 0) || !std::isfinite(*c) || !tanh->hasOneUse())
      continue;
    auto inner = tanh.getInput().getDefiningOp<tosa::MulOp>();
    if (!inner || !inner->hasOneUse() || !hasZeroShift(inner))
      continue;
    auto type = cast<FloatType>(getElementTypeOrSelf(inner.getType()));
    double tolerance = std::ldexp(1.0, 1 - int(type.getFPMantissaWidth()));
    for (int j = 0; j < 2; ++j) {
      std::optional<double> a = getSplatFloat(inner->getOperand(j));
      if (a && std::fabs(*a * *c - 1.0) <= tolerance) {
        x = inner->getOperand(1 - j);
        return *c;
      }
    }
  }
  return std::nullopt;
}

static bool walkScores(Value v, ArrayRef<Operation *> allowedUsers,
                       ScoresWalk &w, std::string &why) {
  bool otherUse = allowedUsers.empty()
                      ? !v.hasOneUse()
                      : llvm::any_of(v.getUsers(), [&](Operation *u) {
                          return !llvm::is_contained(allowedUsers, u);
                        });
  if (otherUse) {
    why = "scores have another use";
    return false;
  }
  ++w.progress;
  // The op masks the scores after scaling and capping them ((s + m) * c is
  // not s * c + m): a mask `how` ("added", "selected") before either does
  // not match.
  auto maskedEarly = [&](StringRef how) {
    if (w.scaled)
      why = ("mask is " + how + " before the scale").str();
    else if (w.softcap > 0)
      why = ("mask is " + how + " before the soft cap").str();
    return w.scaled || w.softcap > 0;
  };
  Operation *op = v.getDefiningOp();
  if (!op) {
    why = "scores are not computed by a tosa.matmul (block argument)";
    return false;
  }
  if (auto mm = dyn_cast<tosa::MatMulOp>(op)) {
    w.matmul = mm;
    return true;
  }
  if (auto reshape = dyn_cast<tosa::ReshapeOp>(op)) {
    std::optional<HeadView> view = matchHeadReshape(reshape);
    if (!view) {
      why = "scores reshape is not a merge of leading dims";
      return false;
    }
    w.views.push_back(*view);
    return walkScores(reshape.getInput1(), {}, w, why);
  }
  if (auto mul = dyn_cast<tosa::MulOp>(op)) {
    Value uncapped;
    if (std::optional<double> cap = matchSoftcap(mul, uncapped)) {
      if (w.softcap > 0) {
        why = "scores are soft-capped twice";
        return false;
      }
      // c * tanh(x / c) * s is not c * tanh(s * x / c).
      if (w.scaled) {
        why = "scores are scaled after the soft cap";
        return false;
      }
      w.softcap = *cap;
      return walkScores(uncapped, {}, w, why);
    }
    if (w.scaled) {
      why = "scores are scaled twice";
      return false;
    }
    if (!hasZeroShift(mul)) {
      why = "scale mul has a non-zero shift";
      return false;
    }
    Value scores = mul.getInput1(), factor = mul.getInput2();
    if (matchScale(scores) && !matchScale(factor))
      std::swap(scores, factor);
    MatchOr<double> s = matchScale(factor);
    if (!s) {
      why = s.getReason();
      return false;
    }
    w.scale *= *s;
    w.scaled = true;
    return walkScores(scores, {}, w, why);
  }
  if (auto add = dyn_cast<tosa::AddOp>(op)) {
    // Several additive masks are one, their sum (T5 adds its position bias,
    // then the padding mask); a boolean mask is not summed with them.
    if (w.booleanMask) {
      why = "scores have two masks";
      return false;
    }
    if (maskedEarly("added"))
      return false;
    ScoresWalk best;
    best.progress = -1;
    for (int i = 0; i < 2; ++i) {
      ScoresWalk trial = w;
      trial.masks.push_back(add->getOperand(1 - i));
      if (finiteCausalFillWithMask(trial, why))
        return false;
      std::string reason;
      if (walkScores(add->getOperand(i), {}, trial, reason)) {
        w = trial;
        return true;
      }
      if (trial.progress > best.progress) {
        best = trial;
        why = reason;
      }
    }
    return false;
  }
  if (auto sel = dyn_cast<tosa::SelectOp>(op)) {
    if (maskedEarly("selected"))
      return false;
    MatchOr<MaskSelect> sm = matchMaskSelect(sel);
    if (!sm) {
      why = sm.getReason();
      return false;
    }
    if (w.isCausal || w.booleanMask) {
      why = "scores have two boolean masks";
      return false;
    }
    if (sm->isCausal) {
      w.isCausal = true;
      w.causalFill = sm->fill;
      if (finiteCausalFillWithMask(w, why))
        return false;
    } else {
      if (!w.masks.empty()) {
        why = "scores have two masks";
        return false;
      }
      w.booleanMask = sm->booleanMask;
    }
    Value scores = sm->scores;
    return walkScores(scores, {}, w, why);
  }
  why = "scores are not computed by a tosa.matmul (found '" +
        op->getName().getStringRef().str() + "')";
  return false;
}

/// `select(not(p == p), 0, p)`: the guard PyTorch's exported attention
/// puts after its softmax, turning the NaN rows of queries whose every key
/// is hidden by -inf into zeros, which is what the fused op gives for a
/// row without a visible key. Returns p where `v` is that guard (and p has
/// no other use), else `v`.
static Value peelNanGuard(Value v) {
  auto sel = v.getDefiningOp<tosa::SelectOp>();
  if (!sel)
    return v;
  Value p = sel.getOnFalse();
  std::optional<double> zero = getSplatFloat(sel.getOnTrue());
  auto isNan = sel.getPred().getDefiningOp<tosa::LogicalNotOp>();
  auto same = isNan ? isNan.getInput1().getDefiningOp<tosa::EqualOp>()
                    : tosa::EqualOp();
  if (!zero || *zero != 0.0 || !same || same.getInput1() != p ||
      same.getInput2() != p || !isNan->hasOneUse() || !same->hasOneUse())
    return v;
  for (Operation *user : p.getUsers())
    if (user != same.getOperation() && user != sel.getOperation())
      return v;
  return p;
}

static bool isLastTwoSwap(ArrayRef<int32_t> perms) {
  int64_t n = perms.size();
  if (n < 2)
    return false;
  for (int64_t i = 0; i + 2 < n; ++i)
    if (perms[i] != i)
      return false;
  return perms[n - 2] == n - 1 && perms[n - 1] == n - 2;
}

/// Peels from a matmul operand what the fused op absorbs: merges of
/// [B, H] into one dim, constant scales, for K the transpose of the last two
/// dims, and for K/V the repetition to all query heads.
static MatchOr<AttentionOperand> peelOperand(Value v, Role role) {
  StringRef name = role == Role::Query ? "Q" : role == Role::Key ? "K" : "V";
  AttentionOperand r;
  bool merged = false, scaled = false;
  while (Operation *op = v.getDefiningOp()) {
    if (role != Role::Query && !r.repeat &&
        isa<tosa::TileOp, tosa::ReshapeOp>(op)) {
      if (MatchOr<RepeatedKV> rep = matchRepeatedKV(v)) {
        r.repeat = *rep;
        v = rep->source;
        continue;
      }
    }
    if (auto reshape = dyn_cast<tosa::ReshapeOp>(op)) {
      std::optional<HeadView> view = matchHeadReshape(reshape);
      if (!merged && view && reshape.getOutput().getType().getRank() == 3) {
        merged = true;
        v = reshape.getInput1();
        continue;
      }
      if (role == Role::Key && !r.swapped) {
        // Kᵀ split back into heads: reshape([N, D, S] -> [b, h, D, S]) of
        // transpose([N, S, D], [0, 2, 1]), as the dynamo exporter writes
        // k.transpose(-2, -1) of a [b, h, S, D] tensor.
        auto split = dyn_cast_or_null<tosa::TransposeOp>(
            reshape.getInput1().getDefiningOp());
        RankedTensorType in = rankedType(reshape.getInput1()),
                         out = rankedType(reshape.getOutput());
        if (split && in && out && in.hasStaticShape() && out.hasStaticShape() &&
            in.getRank() == 3 && out.getRank() == 4 &&
            isLastTwoSwap(split.getPerms()) &&
            out.getDimSize(0) * out.getDimSize(1) == in.getDimSize(0) &&
            out.getDimSize(2) == in.getDimSize(1) &&
            out.getDimSize(3) == in.getDimSize(2)) {
          r.swapped = true;
          v = split.getInput1();
          continue;
        }
        return mismatch("K operand is a reshape, not a transpose");
      }
      break;
    }
    if (auto transpose = dyn_cast<tosa::TransposeOp>(op)) {
      if (role != Role::Key || r.swapped)
        break;
      if (transpose.getPerms() == ArrayRef<int32_t>{0, 2, 3, 1}) {
        r.swapped = r.sequenceMajor = true;
        v = transpose.getInput1();
        break;
      }
      if (!isLastTwoSwap(transpose.getPerms()))
        return mismatch("K transpose permutation " +
                        formatList(transpose.getPerms()) +
                        " does not swap the last two dims");
      r.swapped = true;
      v = transpose.getInput1();
      continue;
    }
    if (auto mul = dyn_cast<tosa::MulOp>(op)) {
      if (role == Role::Value || scaled || !hasZeroShift(mul))
        break;
      Value next;
      for (int i = 0; i < 2 && !next; ++i) {
        MatchOr<double> s = matchScale(mul->getOperand(i));
        Value other = mul->getOperand(1 - i);
        if (s && other.getType() == mul.getOutput().getType()) {
          r.scale *= *s;
          next = other;
        }
      }
      if (!next)
        break;
      scaled = true;
      v = next;
      continue;
    }
    break;
  }
  RankedTensorType t = rankedType(v);
  if (!t || !t.hasStaticShape() || (t.getRank() != 3 && t.getRank() != 4))
    return mismatch(name + " source is not a static rank-3 or rank-4 tensor");
  if (t.getRank() == 4)
    r.view = HeadView{t.getDimSize(0), t.getDimSize(r.sequenceMajor ? 2 : 1)};
  r.source = v;
  return r;
}

MatchOr<AttentionMatch> matchAttention(tosa::MatMulOp outputMatmul) {
  // Probabilities: reshapes up to a softmax over the key axis.
  SmallVector<HeadView> views;
  Value probs = outputMatmul.getA();
  while (auto reshape = probs.getDefiningOp<tosa::ReshapeOp>()) {
    if (!probs.hasOneUse())
      return mismatch("probabilities have another use");
    std::optional<HeadView> view = matchHeadReshape(reshape);
    if (!view)
      return mismatch("probabilities reshape is not a merge of leading dims");
    views.push_back(*view);
    probs = reshape.getInput1();
  }
  if (!probs.hasOneUse())
    return mismatch("probabilities have another use");
  probs = peelNanGuard(probs);
  MatchOr<SoftmaxMatch> softmax = matchSoftmax(probs);
  if (!softmax)
    return mismatch("probabilities are not a softmax: " + softmax.getReason());
  RankedTensorType probsType = rankedType(softmax->input);
  if (!probsType)
    return mismatch("softmax input is not a ranked tensor");
  int64_t rank = probsType.getRank();
  if (softmax->axis != rank - 1)
    return mismatch("softmax axis " + llvm::Twine(softmax->axis) +
                    " is not the key axis");

  // Scores: scale, masks and reshapes down to matmul(Q, Kᵀ).
  ScoresWalk w;
  std::string why;
  if (!walkScores(softmax->input, softmax->inputUsers, w, why))
    return mismatch(why);
  llvm::append_range(views, w.views);

  AttentionMatch m;
  m.scoresMatmul = w.matmul;
  m.outputMatmul = outputMatmul;
  RankedTensorType qm = rankedType(w.matmul.getA()),
                   km = rankedType(w.matmul.getB()),
                   sm = rankedType(w.matmul.getOutput()),
                   vm = rankedType(outputMatmul.getB()),
                   om = rankedType(outputMatmul.getOutput());
  if (!qm || !km || !sm || !vm || !om || !qm.hasStaticShape() ||
      !km.hasStaticShape() || !vm.hasStaticShape())
    return mismatch("matmul shapes are not static");
  Type et = qm.getElementType();
  if (!isa<Float32Type, Float16Type, BFloat16Type>(et) ||
      km.getElementType() != et || sm.getElementType() != et ||
      vm.getElementType() != et || om.getElementType() != et)
    return mismatch("matmuls do not all use one f32/f16/bf16 element type");

  MatchOr<AttentionOperand> q = peelOperand(w.matmul.getA(), Role::Query);
  if (!q)
    return q.takeMismatch();
  MatchOr<AttentionOperand> k = peelOperand(w.matmul.getB(), Role::Key);
  if (!k)
    return k.takeMismatch();
  MatchOr<AttentionOperand> v = peelOperand(outputMatmul.getB(), Role::Value);
  if (!v)
    return v.takeMismatch();
  m.query = *q;
  m.key = *k;
  m.value = *v;

  // Grouped-query attention: K and V repeated alike.
  if (k->repeat.has_value() != v->repeat.has_value() ||
      (k->repeat && (k->repeat->groups != v->repeat->groups ||
                     k->repeat->interleaved != v->repeat->interleaved ||
                     !(k->repeat->repeatedView == v->repeat->repeatedView))))
    return mismatch("K and V are repeated differently");
  if (k->repeat)
    views.push_back(k->repeat->repeatedView);
  if (q->view)
    views.push_back(*q->view);

  // One split of the merged dim [B*H] into [B, H] for all 4-D views.
  int64_t n = qm.getDimSize(0);
  for (const HeadView &view : views)
    if (!(view == views.front()))
      return mismatch("4-D views disagree on batch and heads (" +
                      llvm::Twine(views.front().batch) + "x" +
                      llvm::Twine(views.front().heads) + " vs " +
                      llvm::Twine(view.batch) + "x" + llvm::Twine(view.heads) +
                      ")");
  Value out = outputMatmul.getOutput();
  std::optional<HeadView> outView;
  if (out.hasOneUse())
    if (auto reshape = dyn_cast<tosa::ReshapeOp>(*out.getUsers().begin()))
      if (reshape.getOutput().getType().getRank() == 4)
        if ((outView = matchHeadReshape(reshape)))
          m.outputReshape = reshape;
  HeadView chosen = !views.empty() ? views.front()
                    : outView      ? *outView
                                   : HeadView{n, 1};
  if (chosen.batch * chosen.heads != n)
    return mismatch("batch x heads does not match the matmul batch");
  if (m.outputReshape && !(*outView == chosen))
    m.outputReshape = {};
  m.batch = chosen.batch;
  m.heads = chosen.heads;
  m.kvHeads = m.heads;
  if (k->repeat) {
    m.groups = k->repeat->groups;
    m.kvHeads = m.heads / m.groups;
    m.interleavedGroups = k->repeat->interleaved;
  }

  m.scale = w.scale * q->scale * k->scale;
  float scale = static_cast<float>(m.scale);
  if (!std::isfinite(scale) || scale == 0.0f)
    return mismatch("scale " + std::to_string(m.scale) +
                    " is not finite and non-zero in f32");
  m.isCausal = w.isCausal;
  m.softcap = w.softcap;
  for (Value mask : w.masks) {
    RankedTensorType mt = rankedType(mask);
    if (!mt || !mt.hasStaticShape())
      return mismatch("mask shape is not static");
  }
  m.masks = w.masks;
  m.booleanMask = w.booleanMask;
  return m;
}

bool isAttentionCandidate(Operation *op) {
  auto mm = dyn_cast<tosa::MatMulOp>(op);
  if (!mm)
    return false;
  Value a = mm.getA();
  while (auto reshape = a.getDefiningOp<tosa::ReshapeOp>())
    a = reshape.getInput1();
  Operation *def = peelNanGuard(a).getDefiningOp();
  return def && (isa<SoftmaxOp>(def) || isSoftmaxCandidate(def));
}

//===----------------------------------------------------------------------===//
// Sliding-window bands
//===----------------------------------------------------------------------===//

/// The values of a constant of shape [1, .., 1, n] along dimension `dim`
/// (every other dimension 1) as exact integers; nullopt otherwise.
static std::optional<SmallVector<int64_t>> integersAlong(Value v, int64_t dim,
                                                         int64_t n) {
  DenseElementsAttr attr;
  RankedTensorType type = rankedType(v);
  if (!type || !matchPattern(v, m_Constant(&attr)) || type.getRank() != 4)
    return std::nullopt;
  for (int64_t d = 0; d < 4; ++d)
    if (type.getDimSize(d) != (d == dim ? n : 1))
      return std::nullopt;
  SmallVector<int64_t> out;
  out.reserve(n);
  if (isa<FloatType>(attr.getElementType())) {
    for (APFloat x : attr.getValues<APFloat>()) {
      double d = x.convertToDouble();
      if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 0x1p52)
        return std::nullopt;
      out.push_back(static_cast<int64_t>(d));
    }
  } else if (attr.getElementType().isSignlessInteger()) {
    for (APInt x : attr.getValues<APInt>())
      out.push_back(x.getSExtValue());
  } else {
    return std::nullopt;
  }
  return out;
}

/// The window of `band` = select(L >= K, fill, 0) or select(L > K, fill, 0)
/// with L and K as matchWindowBand describes; sets `fill`.
static MatchOr<int64_t> matchBand(Value band, int64_t sq, int64_t skv,
                                  double &fill) {
  auto sel = band.getDefiningOp<tosa::SelectOp>();
  if (!sel)
    return mismatch("not a tosa.select");
  std::optional<double> hidden = getSplatFloat(sel.getOnTrue());
  std::optional<double> shown = getSplatFloat(sel.getOnFalse());
  if (!hidden || !shown || *shown != 0.0 || *hidden > -1.0e4)
    return mismatch("select does not choose between a large negative "
                    "constant and 0");
  fill = *hidden;
  Operation *cond = sel.getPred().getDefiningOp();
  bool strict = isa_and_nonnull<tosa::GreaterOp>(cond);
  if (!cond || !(strict || isa<tosa::GreaterEqualOp>(cond)))
    return mismatch("band condition is not a tosa.greater_equal or "
                    "tosa.greater");
  std::optional<SmallVector<int64_t>> limits =
      integersAlong(cond->getOperand(0), 2, sq);
  std::optional<SmallVector<int64_t>> keys =
      integersAlong(cond->getOperand(1), 3, skv);
  if (!limits || !keys)
    return mismatch("band compares no constant query limits [1, 1, Sq, 1] "
                    "with constant key positions [1, 1, 1, Skv]");
  // Hidden iff L[i] >= K[0] + j (L[i] - 1 for >), i.e.
  // j <= i + Skv - Sq - window.
  for (int64_t j = 0; j < skv; ++j)
    if ((*keys)[j] != (*keys)[0] + j)
      return mismatch("band's key positions are not consecutive");
  int64_t window = 0;
  for (int64_t i = 0; i < sq; ++i) {
    int64_t w = i + (skv - sq) - ((*limits)[i] - (strict ? 1 : 0)) + (*keys)[0];
    if (i > 0 && w != window)
      return mismatch("band's query limits do not move with the queries");
    window = w;
  }
  if (window < 1)
    return mismatch("band hides a query's own position");
  return window;
}

MatchOr<WindowBand> matchWindowBand(Value mask, int64_t sq, int64_t skv) {
  double fill = 0;
  MatchOr<int64_t> whole = matchBand(mask, sq, skv, fill);
  if (whole)
    return WindowBand{Value(), *whole};
  auto add = mask.getDefiningOp<tosa::AddOp>();
  if (!add)
    return mismatch("mask is neither a band nor a sum with one");
  std::string reason = whole.getReason();
  for (int i = 0; i < 2; ++i) {
    MatchOr<int64_t> w = matchBand(add->getOperand(i), sq, skv, fill);
    if (!w) {
      reason = w.getReason();
      continue;
    }
    if (!std::isinf(fill))
      return mismatch("band fills with a finite value next to another mask: "
                      "rows whose window that mask hides would differ");
    return WindowBand{add->getOperand(1 - i), *w};
  }
  return mismatch(reason);
}

} // namespace tfc::transformer::fusion
