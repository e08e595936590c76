//===- Matchers.h - Recognise transformer blocks in TOSA graphs -*- C++ -*-===//
//
// The one place where the fusion passes decide what a softmax, a layer
// normalisation and an attention look like in a TOSA 1.0 graph. Every
// matcher only reads IR and returns either a description of the match or the
// first condition that failed, in words: the patterns rewrite from the
// description, and `explain-missed` prints the reason as a remark.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_DIALECT_TRANSFORMER_LIB_TRANSFORMS_MATCHERS_H
#define TFC_DIALECT_TRANSFORMER_LIB_TRANSFORMS_MATCHERS_H

#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/Twine.h"

#include <optional>
#include <string>

namespace tfc::transformer::fusion {

/// Why a candidate did not match: the first condition that failed.
struct Mismatch {
  std::string reason;
};

inline Mismatch mismatch(const llvm::Twine &reason) {
  return Mismatch{reason.str()};
}

/// A match of type `T`, or the reason it failed.
template <typename T> class MatchOr {
public:
  MatchOr(T value) : value(std::move(value)) {}
  MatchOr(Mismatch m) : reason(std::move(m.reason)) {}

  explicit operator bool() const { return value.has_value(); }
  T &operator*() { return *value; }
  T *operator->() { return &*value; }
  const std::string &getReason() const { return reason; }
  Mismatch takeMismatch() const { return Mismatch{reason}; }

private:
  std::optional<T> value;
  std::string reason;
};

//===----------------------------------------------------------------------===//
// Small building blocks
//===----------------------------------------------------------------------===//

/// `v`'s type when it is a ranked tensor, else null.
inline mlir::RankedTensorType rankedType(mlir::Value v) {
  return llvm::dyn_cast<mlir::RankedTensorType>(v.getType());
}

/// The value of a splat floating-point constant (any shape).
std::optional<double> getSplatFloat(mlir::Value v);

/// A multiplicative scale: a splat constant `c` or `reciprocal(c)`.
MatchOr<double> matchScale(mlir::Value v);

/// Whether a tosa.mul has a zero shift (always so for floats, checked anyway).
bool hasZeroShift(mlir::tosa::MulOp mul);

/// `[B, H, ...]` split of a merged leading dimension `B*H`.
struct HeadView {
  int64_t batch = 0;
  int64_t heads = 0;
  bool operator==(const HeadView &o) const {
    return batch == o.batch && heads == o.heads;
  }
};

/// If `reshape` only merges the first two dims of a rank-4 tensor (or splits
/// the first dim of a rank-3 tensor in two), keeping the last two dims,
/// returns the 4-D view.
std::optional<HeadView> matchHeadReshape(mlir::tosa::ReshapeOp reshape);

/// K/V repeated to all query heads.
struct RepeatedKV {
  mlir::Value source; ///< The un-repeated [B, Hkv, S, X] tensor.
  int64_t groups = 1; ///< Hq / Hkv.
  /// True for `tile` on the head dim: query head h reads kv head h % Hkv.
  /// False for [B,Hkv,1,S,X] -> tile -> [B,Hq,S,X]: h reads h / groups.
  bool interleaved = false;
  HeadView repeatedView; ///< [B, Hq] of the repeated tensor.
};

/// Recognises `tile(x, [1, G, 1, 1])` and
/// `reshape(tile(reshape(x, [B,Hkv,1,S,X]), [1,1,G,1,1]), [B,Hq,S,X])`
/// (or [B*Hq, S, X]).
MatchOr<RepeatedKV> matchRepeatedKV(mlir::Value v);

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

struct SoftmaxMatch {
  mlir::Value input;
  int64_t axis = 0;
  mlir::Operation *root = nullptr;
  /// The ops of the match that read `input` (to check it has no other use).
  llvm::SmallVector<mlir::Operation *, 2> inputUsers;
};

/// `transformer.softmax`, or
/// `mul(exp(x [- reduce_max(x)]), reciprocal(reduce_sum(exp(..))))`.
MatchOr<SoftmaxMatch> matchSoftmax(mlir::Value probs);

/// A tosa.mul that multiplies an exp: worth explaining if it is not fused.
bool isSoftmaxCandidate(mlir::Operation *op);

//===----------------------------------------------------------------------===//
// Layer normalisation
//===----------------------------------------------------------------------===//

struct LayerNormMatch {
  mlir::Value input;
  mlir::Value gamma; ///< Null when the graph has no scale.
  mlir::Value beta;  ///< Null when the graph has no shift.
  double epsilon = 0;
  mlir::Operation *root = nullptr;
};

/// The chain around `rsqrt(var + eps)`: mean, centre, variance, normalise,
/// optional gamma and beta, over the last axis.
MatchOr<LayerNormMatch> matchLayerNorm(mlir::tosa::RsqrtOp rsqrt);

struct RmsNormMatch {
  mlir::Value input; ///< f16/bf16 when the graph widens it and rounds back.
  mlir::Value gamma; ///< Null when the graph has no scale.
  double epsilon = 0;
  mlir::Operation *root = nullptr;
};

/// The chain around `rsqrt(mean(x * x) + eps)` over the last axis, x not
/// centred: `x * rsqrt(..)`, optionally cast back to the type x was widened
/// from, optionally `* gamma` in that type.
MatchOr<RmsNormMatch> matchRmsNorm(mlir::tosa::RsqrtOp rsqrt);

/// Whether `rsqrt` is of a mean square of an uncentred value (explained as
/// an rms_norm rather than a layer_norm when it does not fuse).
bool isRmsNormCandidate(mlir::tosa::RsqrtOp rsqrt);

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// One matmul operand (Q, K or V) after peeling reshapes, scales,
/// the K transpose and K/V repetition.
struct AttentionOperand {
  mlir::Value source;   ///< Rank 3 [N, S, X] or rank 4 [b, h, S, X].
  bool swapped = false; ///< K: a last-two-dims transpose was peeled.
  /// K: `source` is [B, S, H, D] and one transpose [0, 2, 3, 1] made Kᵀ of
  /// it (the head split's and the last-two swap in one, as TorchScript
  /// exports `k.transpose(1, 2).transpose(-2, -1)`).
  bool sequenceMajor = false;
  double scale = 1.0; ///< Constant factors peeled from this operand.
  std::optional<RepeatedKV> repeat;
  std::optional<HeadView> view; ///< Set when `source` is rank 4.
};

/// A boolean `select` mask that is not the causal pattern: becomes the
/// additive mask `cond ? 0 : fill` (`fill` is the select's own constant),
/// a constant where `cond` is one, else a select of the run-time condition
/// (masked_fill(mask == 0, -1e9) of a padding mask). Scores replaced by a
/// large negative fill and scores plus that fill give the same softmax
/// wherever a row keeps a visible key.
struct BooleanMask {
  mlir::DenseElementsAttr cond; ///< Null when the condition is computed.
  mlir::Value condValue;        ///< The computed condition, else null.
  bool visibleWhenTrue = true;
  double fill = 0;
};

/// `select(cond, scores, fill)` or `select(cond, fill, scores)` with a
/// boolean `cond` and a large negative splat `fill`.
struct MaskSelect {
  mlir::Value scores;
  bool isCausal = false; ///< `cond` is exactly `j <= i + (Skv - Sq)`.
  double fill = 0;       ///< The value hidden scores are replaced with.
  std::optional<BooleanMask> booleanMask; ///< Set when not causal.
};

MatchOr<MaskSelect> matchMaskSelect(mlir::tosa::SelectOp select);

struct AttentionMatch {
  mlir::tosa::MatMulOp scoresMatmul;
  mlir::tosa::MatMulOp outputMatmul;
  AttentionOperand query, key, value;
  double scale = 1.0; ///< Product of every peeled scale.
  double softcap = 0; ///< c of a soft cap c * tanh(s / c), or 0.
  bool isCausal = false;
  /// Additive masks at the scores' rank (3 or 4), each broadcastable to the
  /// scores; the op's mask is their sum. Empty when none.
  llvm::SmallVector<mlir::Value, 2> masks;
  std::optional<BooleanMask> booleanMask;
  int64_t batch = 0, heads = 0, kvHeads = 0, groups = 1;
  /// Query head h reads kv head h % kvHeads (tile on the head dim).
  bool interleavedGroups = false;
  /// A reshape of the output to [B, Hq, Sq, Dv] that the op replaces.
  mlir::tosa::ReshapeOp outputReshape;
};

/// Matches `matmul(softmax(mask(cap(scale(matmul(Q, Kᵀ))))), V)` rooted at
/// the second matmul (the soft cap optional).
MatchOr<AttentionMatch> matchAttention(mlir::tosa::MatMulOp outputMatmul);

/// A tosa.matmul whose LHS comes (through reshapes) from a softmax-like op.
bool isAttentionCandidate(mlir::Operation *op);

/// A sliding-window band in an attention's additive mask: key j hidden from
/// query i (at position i + Skv - Sq) when i + Skv - Sq - j >= window.
struct WindowBand {
  mlir::Value rest;   ///< The mask without the band; null when it is all band.
  int64_t window = 0; ///< At least 1.
};

/// The mask `band` or `add(rest, band)` of an attention of `sq` queries and
/// `skv` keys, band = `select(L >= K, fill, 0)` (or `L > K`) with constant
/// query limits L [1, 1, Sq, 1] and key positions K [1, 1, 1, Skv] such that
/// K[j] = K[0] + j and L[i] = K[0] + i + Skv - Sq - window (integers), as
/// importers compute transformers' sliding window. The op hides the band's
/// keys outright, so with `rest` the fill must be -inf: a finite one would
/// count where `rest` hides every key of a row's window.
MatchOr<WindowBand> matchWindowBand(mlir::Value mask, int64_t sq, int64_t skv);

} // namespace tfc::transformer::fusion

#endif // TFC_DIALECT_TRANSFORMER_LIB_TRANSFORMS_MATCHERS_H
