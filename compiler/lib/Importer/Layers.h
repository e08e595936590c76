//===- Layers.h - Transformer building blocks as TOSA primitives -*- C++
//-*-===//
//
// The shared pieces every Hugging Face importer uses, each written the way
// the reference (PyTorch / transformers) computes it, as unfused primitives:
// the fusion passes recognise them later. Activations are [B, S, H] in the
// model's compute type (f32, f16 or bf16).
//
//===----------------------------------------------------------------------===//

#ifndef TFC_LIB_IMPORTER_LAYERS_H
#define TFC_LIB_IMPORTER_LAYERS_H

#include "Config.h"
#include "ModelBuilder.h"

namespace tfc::importer {

enum class Activation { GeluErf, GeluTanh, Relu, Silu, QuickGelu };

/// Maps a config.json "hidden_act" value; failure when unknown.
mlir::FailureOr<Activation> parseActivation(llvm::StringRef name);

/// The activation named by `field` of `config` (`fallback` when absent); an
/// unknown name is a field error listing the supported ones.
mlir::FailureOr<Activation> readActivation(const JsonConfig &config,
                                           llvm::StringRef field,
                                           llvm::StringRef fallback,
                                           std::string &error);

/// Reads each (field, destination) pair as a positive integer; stops at the
/// first error.
mlir::LogicalResult
readPositiveInts(const JsonConfig &config,
                 llvm::ArrayRef<std::pair<llvm::StringRef, int64_t *>> fields,
                 std::string &error);

/// The sizes the encoder and decoder families' config.json give under the
/// same names: hidden_size, num_hidden_layers, num_attention_heads,
/// intermediate_size, vocab_size, max_position_embeddings.
struct ModelSizes {
  int64_t hidden = 0, layers = 0, heads = 0, intermediate = 0, vocab = 0,
          positions = 0;
};

/// Reads the fields of ModelSizes in that order, each a positive integer;
/// stops at the first error.
mlir::LogicalResult readModelSizes(const JsonConfig &config, ModelSizes &sizes,
                                   std::string &error);

/// A projection's part in a tensor-parallel build (more than one rank,
/// TensorParallel.h): Columns splits its outputs, each rank computing
/// out / ranks of them (in `groups` groups: WeightSplit); Rows its inputs,
/// x holding the rank's in / ranks features, the partial products summed
/// over the ranks (allReduce) before the bias is added, once. None, or one
/// rank: the whole projection.
struct Parallel {
  enum Kind { None, Columns, Rows } kind = None;
  int64_t groups = 1;
};

/// nn.Linear: x [B, S, in] -> x @ W^T + b, W = `name`.weight [out, in],
/// b = `name`.bias [out] (when `bias`). Emitted as a [1, B*S, in] x
/// [1, in, out] tosa.matmul with the weight transposed in the graph.
/// `parallel`: the rank's part (Parallel; `out` is the whole).
mlir::FailureOr<mlir::Value> linear(ModelBuilder &mb, TosaBuilder &tb,
                                    mlir::Value x, llvm::StringRef name,
                                    int64_t out, bool bias = true,
                                    Parallel parallel = {});

/// x [B, S, in] -> x @ w^T + bias with the weight `w` [out, in] (and
/// `bias` [out], when given) as values: linear's arithmetic on a table the
/// graph already holds (a head tied to the token embeddings).
mlir::Value linearWith(TosaBuilder &tb, mlir::Value x, mlir::Value w,
                       mlir::Value bias = {});

/// transformers' Conv1D (GPT-2's projections): x [B, S, in] -> x @ W + b,
/// W = `name`.weight [in, out] (stored transposed against nn.Linear),
/// b = `name`.bias [out].
/// `parallel`: the rank's part, as for linear.
mlir::FailureOr<mlir::Value> conv1d(ModelBuilder &mb, TosaBuilder &tb,
                                    mlir::Value x, llvm::StringRef name,
                                    int64_t out, Parallel parallel = {});

/// nn.LayerNorm over the last axis as primitives: mean = sum(x) * 1/N,
/// d = x - mean, var = sum(d * d) * 1/N, d * rsqrt(var + eps) * gamma + beta,
/// gamma = `name`.weight, beta = `name`.bias; in f32 for f16/bf16 x (cast
/// in and out, as PyTorch's kernels compute it).
mlir::FailureOr<mlir::Value> layerNorm(ModelBuilder &mb, TosaBuilder &tb,
                                       mlir::Value x, llvm::StringRef name,
                                       double eps);

/// LlamaRMSNorm: x * rsqrt(mean(x * x) + eps) in f32 (x cast in), rounded
/// back to x's type, times gamma = `name`.weight in x's type.
mlir::FailureOr<mlir::Value> rmsNorm(ModelBuilder &mb, TosaBuilder &tb,
                                     mlir::Value x, llvm::StringRef name,
                                     double eps);

/// GemmaRMSNorm: x * rsqrt(mean(x * x) + eps) times (1 + gamma), gamma =
/// `name`.weight, all in f32 (x and gamma cast in), rounded back to x's type
/// at the end (where LlamaRMSNorm rounds before its product).
mlir::FailureOr<mlir::Value> gemmaRmsNorm(ModelBuilder &mb, TosaBuilder &tb,
                                          mlir::Value x, llvm::StringRef name,
                                          double eps);

/// The positions a rotary embedding is compiled for: 0..count-1, or with
/// `given` (--position-ids) any of them, chosen at run time.
struct RotaryPositions {
  int64_t count;
  bool given;
};
/// The rotary inverse frequencies (D / 2 of them, D the rotary dimension)
/// and the factor cos and sin are scaled by.
struct RotaryFrequencies {
  llvm::SmallVector<float> invFreq;
  float scaling = 1.0f;
};
/// 1 / theta^(2i / D), i < D / 2 = `dim` / 2 (in f32, as transformers
/// computes them), theta read from `thetaField` (default `thetaDefault`,
/// which must exceed 1), and with `scaled` the config's rope_scaling
/// applied: absent/null or rope_type "default" (none), "linear" (every
/// frequency divided by factor), "llama3" (Llama 3.1's per-band rescaling)
/// or "longrope" (Phi-3's: short_factor or, when `positions` reach past
/// original_max_position_embeddings, long_factor, and a scaling of cos and
/// sin; refused with positions given at run time that may reach past it).
mlir::FailureOr<RotaryFrequencies>
readRotaryFrequencies(const JsonConfig &config, int64_t dim,
                      llvm::StringRef thetaField, double thetaDefault,
                      bool scaled, const RotaryPositions &positions,
                      std::string &error);

/// The rotary position embedding's cos and sin for positions
/// first..first+S-1, each [1, 1, S, D] of the compute type: emb = cat(freqs,
/// freqs) with freqs[p][i] = p * invFreq[i] (D = 2 * invFreq.size()), computed
/// in f32, scaled by f.scaling and rounded, as transformers'
/// LlamaRotaryEmbedding does. Positions are known when the model is
/// compiled, so the tables are constants.
struct RotaryTables {
  mlir::Value cos, sin;
};
RotaryTables rotaryTables(TosaBuilder &tb, const RotaryFrequencies &f,
                          int64_t first, int64_t seqLen, mlir::Type type);

/// The rows of `tables` ([1, 1, N, D]) at `positions` [B, S] (i32 or i64,
/// within [0, N)): [B, 1, S, D] each.
RotaryTables gatherRotary(TosaBuilder &tb, const RotaryTables &tables,
                          mlir::Value positions);

/// apply_rotary_pos_emb on x [B, H, S, D]: x * cos + rotate_half(x) * sin,
/// rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2]).
mlir::Value applyRotary(TosaBuilder &tb, mlir::Value x,
                        const RotaryTables &tables);

/// repeat_kv: [B, Hkv, S, D] -> [B, Hkv * groups, S, D], query head h
/// reading K/V head h / groups (reshape, tile, reshape).
mlir::Value repeatKV(TosaBuilder &tb, mlir::Value x, int64_t groups);

/// The activation function, in f32 for f16/bf16 x (cast in and out).
mlir::Value activation(TosaBuilder &tb, mlir::Value x, Activation act);

/// nn.Embedding: table [V, H], ids [B, S] (any integer type) -> [B, S, H],
/// as tosa.gather of [1, V, H] with [1, B*S] i32 indices.
mlir::Value embeddingLookup(TosaBuilder &tb, mlir::Value table,
                            mlir::Value ids);

/// Rows first..first+count-1 of `table` [N, H] as [1, count, H] (the
/// embeddings of those positions).
mlir::Value tableRows(TosaBuilder &tb, mlir::Value table, int64_t first,
                      int64_t count);

/// [B, S, heads*dh] -> [B, heads, S, dh] (view + permute(0, 2, 1, 3)).
mlir::Value splitHeads(TosaBuilder &tb, mlir::Value x, int64_t heads);
/// [B, heads, S, dh] -> [B, S, heads*dh].
mlir::Value mergeHeads(TosaBuilder &tb, mlir::Value x);

/// transformers' extended attention mask: mask [B, S] (1 = keep) ->
/// (1 - mask) * finfo(type).min as [B, 1, 1, S] of `type`.
mlir::Value extendedAttentionMask(TosaBuilder &tb, mlir::Value mask,
                                  mlir::Type type);
/// The same of the model's compute type, its ops located at `scope`.
mlir::Value extendedAttentionMask(ModelBuilder &mb, llvm::StringRef scope,
                                  mlir::Value mask);

/// `mask` ([B, 1, 1, pastLen + seqLen], additive) with the keys outside a
/// sliding window of `window` positions hidden as well, [B, 1, seqLen,
/// pastLen + seqLen]: a query at position p sees a key at position k only
/// when p - k < window (transformers' sliding_window). The band adds -inf,
/// as the causal limit hides keys outright (fusion then moves it into the
/// attention's `window`); a query's own key is always inside it.
/// Positions: query i at pastLen + i and key j at j; with `positions`
/// (position_ids, [B, seqLen] integers), query i at positions[b, i], the
/// cache's key j at j (a fixed-size cache holds the key of position p in
/// slot p) and new key pastLen + i at positions[b, i]. The band is computed
/// in the graph from position vectors, not stored as a seqLen x
/// (pastLen + seqLen) constant.
mlir::Value slidingWindowMask(TosaBuilder &tb, mlir::Value mask,
                              int64_t pastLen, int64_t seqLen, int64_t window,
                              mlir::Value positions = {});

/// Eager attention: softmax(Q K^T * scale + mask) V with Q, K, V
/// [B, H, S, dh]; `mask` additive [B, 1, 1, S] or null. Softmax as
/// reduce_max, sub, exp, reduce_sum, reciprocal, mul. With `causal`, GPT-2's
/// where(tril, scores, fill) comes between the scale and the mask: a
/// tosa.select with a constant lower-triangular i1 tensor. The fill is -inf,
/// where transformers writes finfo(f32).min: the two differ only in rows
/// whose every visible key is padding (transformers then spreads the weight
/// over the future keys too), and only -inf keeps the graph equal to one
/// fused causal attention with the padding mask.
/// With `softcap` > 0 the scaled scores are capped first (Gemma 2):
/// tanh(scores / softcap) * softcap.
/// `probs`, when given, receives the probabilities [B, H, Sq, Skv] (for
/// ModelBuilder::attentionMap).
mlir::Value scaledDotProductAttention(TosaBuilder &tb, mlir::Value q,
                                      mlir::Value k, mlir::Value v,
                                      mlir::Value mask, double scale,
                                      bool causal = false, double softcap = 0,
                                      mlir::Value *probs = nullptr);

/// Gemma's soft cap: tanh(x / cap) * cap, in x's type.
mlir::Value softcapped(TosaBuilder &tb, mlir::Value x, double cap);

/// sentence-transformers mean pooling: sum(h * m, 1) / max(sum(m, 1), 1e-9)
/// with h [B, S, H], mask [B, S] -> [B, H].
mlir::Value meanPool(TosaBuilder &tb, mlir::Value hidden, mlir::Value mask);
/// The first token's state: [B, S, H] -> [B, H].
mlir::Value clsPool(TosaBuilder &tb, mlir::Value hidden);
/// F.normalize(x, p=2, dim=-1): x / max(||x||, 1e-12), written as
/// x * rsqrt(max(sum(x * x), 1e-24)); x [B, H].
mlir::Value l2Normalize(TosaBuilder &tb, mlir::Value x);

} // namespace tfc::importer

#endif // TFC_LIB_IMPORTER_LAYERS_H
