//===- RotaryDecoder.cpp - Decoders of LLaMA's shape and its variants -----===//
//
// Follows transformers' modeling_llama.py (eager attention): token
// embeddings, N pre-norm blocks (RMSNorm, Q/K/V projections, rotary
// position embedding on Q and K, K/V heads repeated to the query heads
// (grouped-query attention), causal attention, o_proj, residual; RMSNorm,
// down(act(gate(x)) * up(x)), residual), then the final RMSNorm. The causal
// mask is written as GPT-2's where(tril, scores, -inf) with the padding mask
// added after it: transformers builds one additive mask holding finfo.min
// for future and padded keys, and the two agree except in rows whose every
// visible key is padding (see scaledDotProductAttention). The result is the
// last hidden state, or with --output=logits the LM head's logits
// (lm_head.weight, or the token embeddings when tied); with a KV cache each
// layer's keys and values follow (see KVCache). The variations a
// RotaryDecoder names come in where the families put them (Llama.cpp,
// Gemma.cpp).
//
//===----------------------------------------------------------------------===//

#include "RotaryDecoder.h"
#include "TensorParallel.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <cstdio>
#include <optional>

using namespace mlir;
using namespace llvm;

namespace tfc::importer {

/// Features [first, first + count) of x [B, S, N]: one part of a fused
/// projection.
static Value features(TosaBuilder &tb, Value x, int64_t first, int64_t count) {
  ArrayRef<int64_t> shape = cast<RankedTensorType>(x.getType()).getShape();
  return tb.slice(x, {0, 0, first}, {shape[0], shape[1], count});
}

RotaryPositions rotaryPositions(const ImportOptions &o) {
  return {o.pastLen + o.seqLen, o.positionIds};
}

/// The largest head dimension a decoder's configuration may give.
constexpr int64_t kMaxHeadDim = 1 << 16;

LogicalResult readDecoderShape(const JsonConfig &c, int64_t headDimDefault,
                               RotaryDecoder &d, std::string &error) {
  if (failed(readModelSizes(c, d, error)))
    return failure();
  // num_key_value_heads and head_dim: absent or null take their defaults.
  auto optionalInt = [&](StringRef field, int64_t fallback,
                         int64_t &out) -> LogicalResult {
    const json::Value *v = c.object().get(field);
    if (!v || v->kind() == json::Value::Null) {
      out = fallback;
      return success();
    }
    return readPositiveInts(c, {{field, &out}}, error);
  };
  if (failed(optionalInt("num_key_value_heads", d.heads, d.kvHeads)))
    return failure();
  if (d.heads % d.kvHeads != 0) {
    (void)c.fieldError(
        "num_key_value_heads",
        "does not divide num_attention_heads (" + Twine(d.heads) + ")", error);
    return failure();
  }
  bool headDimField = headDimDefault >= 0;
  if (headDimDefault <= 0 && !(headDimField && c.has("head_dim")) &&
      d.hidden % d.heads != 0) {
    (void)c.fieldError("num_attention_heads",
                       "does not divide hidden_size (" + Twine(d.hidden) + ")",
                       error);
    return failure();
  }
  if (!headDimField)
    d.headDim = d.hidden / d.heads;
  else if (failed(optionalInt(
               "head_dim", headDimDefault ? headDimDefault : d.hidden / d.heads,
               d.headDim)))
    return failure();
  // The rotary tables are built from the configuration, before its sizes
  // meet the weights' shapes: a head dimension of billions (hidden_size
  // 4e9) took 33 s and 8 GB there before the weights' error, and more ran
  // out of memory. No model's heads come near this bound.
  if (d.headDim > kMaxHeadDim) {
    bool given = headDimField && c.has("head_dim");
    (void)c.fieldError(given ? "head_dim" : "hidden_size",
                       "a head dimension of " + Twine(d.headDim) +
                           (given ? "" : " (per attention head)") +
                           " is larger than tfc supports (at most " +
                           Twine(kMaxHeadDim) + ")",
                       error);
    return failure();
  }
  if (d.headDim % 2 != 0) {
    (void)c.fieldError("head_dim",
                       "the rotary embedding needs an even head dimension (" +
                           Twine(d.headDim) + ")",
                       error);
    return failure();
  }
  FailureOr<double> eps = c.positiveNumber("rms_norm_eps", error, 1e-6);
  if (failed(eps))
    return failure();
  d.eps = *eps;
  return success();
}

LogicalResult readPartialRotary(const JsonConfig &c, StringRef field,
                                double fallback, RotaryDecoder &d,
                                std::string &error) {
  FailureOr<double> fraction = c.number(field, error, fallback);
  if (failed(fraction))
    return failure();
  d.rotaryDim = *fraction > 0 && *fraction <= 1
                    ? static_cast<int64_t>(d.headDim * *fraction)
                    : 0;
  if (d.rotaryDim >= 2 && d.rotaryDim % 2 == 0)
    return success();
  char value[32];
  std::snprintf(value, sizeof value, "%g", *fraction);
  return c.fieldError(field,
                      Twine("unsupported value ") + value +
                          " (it must turn an even number of the head's " +
                          Twine(d.headDim) + " features, at least 2)",
                      error);
}

FailureOr<OwningOpRef<ModuleOp>>
buildRotaryDecoder(ImportRequest &r, const FailureOr<RotaryDecoder> &decoder) {
  if (failed(decoder))
    return failure();
  const RotaryDecoder &d = *decoder;
  const ImportOptions &o = r.options;
  if (failed(checkDecoderRequest(r, d.family, d.positions,
                                 "max_position_embeddings")))
    return failure();
  // Sliding-window layers are the same graph while the window covers the
  // sequence; beyond it their mask hides the keys outside the window too.
  bool windowed = d.window > 0 && is_contained(d.sliding, true) &&
                  d.window < o.pastLen + o.seqLen;

  const RotaryDecoder::Names &names = d.names;
  FailureOr<std::string> prefix =
      weightPrefix(r, names.embed + ".weight", names.prefixExample);
  if (failed(prefix))
    return failure();
  ModelBuilder mb(r, *prefix);
  if (failed(mb.declareAttentionStacks({{AttentionStack::Only, d.layers}})))
    return failure();
  // --tensor-parallel: this rank's heads, K/V heads and MLP features.
  int64_t ranks = mb.ranks();
  if (ranks > 1 && (d.fusedProjections || d.qkNormAcrossHeads))
    return mb.fail("--tensor-parallel=" + Twine(ranks) + ": " + d.family +
                   (d.fusedProjections ? "'s fused projections are"
                                       : "'s norms of Q and K across all "
                                         "heads are") +
                   " not split across ranks");
  if (failed(checkTensorParallel(r, mb,
                                 {{"num_attention_heads", d.heads},
                                  {"num_key_value_heads", d.kvHeads},
                                  {"intermediate_size", d.intermediate}})))
    return failure();
  int64_t heads = d.heads / ranks, kvHeads = d.kvHeads / ranks;
  const Parallel columns{Parallel::Columns}, rows{Parallel::Rows};
  TokenInputs tokens = addTokenInputs(mb, o);
  KVCache cache(mb, o, d.layers, kvHeads, d.headDim);
  Type computeType = mb.getComputeType();
  auto norm = [&](TosaBuilder &tb, Value x, const std::string &name) {
    switch (d.normKind) {
    case RotaryDecoder::Norm::GemmaRms:
      return gemmaRmsNorm(mb, tb, x, name, d.eps);
    case RotaryDecoder::Norm::Layer:
      return layerNorm(mb, tb, x, name, d.eps);
    case RotaryDecoder::Norm::Rms:
      break;
    }
    return rmsNorm(mb, tb, x, name, d.eps);
  };

  bool splitVocab = splitsVocabulary(r, mb);
  FailureOr<Value> embeddings = vocabularyWeight(
      mb, splitVocab, names.embed + ".weight", {d.vocab, d.hidden});
  if (failed(embeddings))
    return failure();
  Value h = [&] {
    TosaBuilder tb = mb.at(names.embed);
    Value e = vocabularyEmbedding(mb, tb, splitVocab, *embeddings, tokens.ids,
                                  d.vocab);
    if (d.embeddingScale == 1)
      return e;
    // Gemma's normalizer sqrt(hidden_size), Granite's embedding_multiplier:
    // a factor of the compute type.
    return tb.mul(e, tb.splat(d.embeddingScale, computeType, 3));
  }();
  Value extMask = extendedAttentionMask(mb, "attention_mask", tokens.mask);
  Value windowMask;
  if (windowed) {
    TosaBuilder tb = mb.at("sliding_window_mask");
    windowMask = slidingWindowMask(tb, extMask, o.pastLen, o.seqLen, d.window,
                                   tokens.positions);
  }
  auto rotary = [&](const RotaryFrequencies &f, StringRef scope) {
    TosaBuilder tb = mb.at(scope);
    if (!tokens.positions)
      return rotaryTables(tb, f, o.pastLen, o.seqLen, computeType);
    // Every position the clamped inputs can name, gathered per token.
    return gatherRotary(
        tb, rotaryTables(tb, f, 0, o.pastLen + o.seqLen, computeType),
        tokens.positions);
  };
  RotaryTables rope = rotary(d.rope, "rotary_emb");
  std::optional<RotaryTables> localRope;
  if (!d.localRope.invFreq.empty() && is_contained(d.sliding, true))
    localRope = rotary(d.localRope, "rotary_emb_local");
  // The rotary embedding of the first rotaryDim features of each head.
  int64_t rotaryDim = d.rotaryDim > 0 ? d.rotaryDim : d.headDim;
  auto rotate = [&](TosaBuilder &tb, Value x, const RotaryTables &tables) {
    if (rotaryDim == d.headDim)
      return applyRotary(tb, x, tables);
    ArrayRef<int64_t> s = cast<RankedTensorType>(x.getType()).getShape();
    Value turned = applyRotary(
        tb, tb.slice(x, {0, 0, 0, 0}, {s[0], s[1], s[2], rotaryDim}), tables);
    Value passed = tb.slice(x, {0, 0, 0, rotaryDim},
                            {s[0], s[1], s[2], d.headDim - rotaryDim});
    return tb.concat({turned, passed}, 3);
  };
  // A block's output as the residual stream adds it: `x` projected to the
  // hidden size by `proj` (with its bias when `bias`), with postNorms
  // normalised by `normName`, then scaled where Granite scales it.
  auto blockOutput = [&](TosaBuilder &tb, Value x, const std::string &proj,
                         bool bias,
                         const std::string &normName) -> FailureOr<Value> {
    FailureOr<Value> y = linear(mb, tb, x, proj, d.hidden, bias, rows);
    if (failed(y))
      return failure();
    if (d.postNorms) {
      y = norm(tb, *y, normName);
      if (failed(y))
        return failure();
    }
    if (d.residualScale == 1)
      return *y;
    return tb.mul(*y, tb.splat(d.residualScale, computeType, 3));
  };
  double scale = d.attnScale > 0
                     ? d.attnScale
                     : 1.0 / std::sqrt(static_cast<double>(d.headDim));
  int64_t qWidth = d.heads * d.headDim, kvWidth = d.kvHeads * d.headDim;

  for (int64_t l = 0; l < d.layers; ++l) {
    std::string layer = "layers." + std::to_string(l);
    bool sliding = l < static_cast<int64_t>(d.sliding.size()) && d.sliding[l];
    // The block's input, its normalised form the attention reads, and the
    // attention's output as the residual stream adds it.
    Value input = h, attended;
    FailureOr<Value> a = h;
    {
      std::string name = layer + "." + names.attention;
      TosaBuilder tb = mb.at(name);
      if (d.preNorms)
        a = norm(tb, h, layer + ".input_layernorm");
      if (failed(a))
        return failure();
      FailureOr<Value> q, k, v;
      if (d.fusedProjections && d.qkvPerHead) {
        // [B, S, heads * 3 * headDim]: each head's Q, K and V in turn.
        FailureOr<Value> qkv =
            linear(mb, tb, *a, name + "." + names.qkv, 3 * qWidth, d.qkvBias);
        if (failed(qkv))
          return failure();
        ArrayRef<int64_t> s = cast<RankedTensorType>(qkv->getType()).getShape();
        Value perHead = tb.reshape(*qkv, {s[0], s[1], d.heads, 3 * d.headDim});
        auto part = [&](int64_t i) {
          return tb.reshape(tb.slice(perHead, {0, 0, 0, i * d.headDim},
                                     {s[0], s[1], d.heads, d.headDim}),
                            {s[0], s[1], qWidth});
        };
        q = part(0);
        k = part(1);
        v = part(2);
      } else if (d.fusedProjections) {
        FailureOr<Value> qkv = linear(mb, tb, *a, name + "." + names.qkv,
                                      qWidth + 2 * kvWidth, d.qkvBias);
        if (failed(qkv))
          return failure();
        q = features(tb, *qkv, 0, qWidth);
        k = features(tb, *qkv, qWidth, kvWidth);
        v = features(tb, *qkv, qWidth + kvWidth, kvWidth);
      } else {
        q = linear(mb, tb, *a, name + ".q_proj", qWidth, d.qkvBias, columns);
        if (failed(q))
          return failure();
        k = linear(mb, tb, *a, name + ".k_proj", kvWidth, d.qkvBias, columns);
        if (failed(k))
          return failure();
        v = linear(mb, tb, *a, name + ".v_proj", kvWidth, d.qkvBias, columns);
        if (failed(v))
          return failure();
      }
      // Q and K normalised (q_norm, k_norm) in place: over all their heads'
      // features before the heads are split, or per head after.
      auto normQK = [&](Value &qv, Value &kv) -> LogicalResult {
        FailureOr<Value> qn = norm(tb, qv, name + ".q_norm");
        if (failed(qn))
          return failure();
        FailureOr<Value> kn = norm(tb, kv, name + ".k_norm");
        if (failed(kn))
          return failure();
        qv = *qn;
        kv = *kn;
        return success();
      };
      Value qAll = *q, kAll = *k;
      if (d.qkNormAcrossHeads && failed(normQK(qAll, kAll)))
        return failure();
      // Named temporaries keep the op order independent of the compiler's
      // argument evaluation order.
      Value qSplit = splitHeads(tb, qAll, heads);
      Value kSplit = splitHeads(tb, kAll, kvHeads);
      if (d.qkNorm && failed(normQK(qSplit, kSplit)))
        return failure();
      const RotaryTables &tables = localRope && sliding ? *localRope : rope;
      Value qh = rotate(tb, qSplit, tables);
      Value kNew = rotate(tb, kSplit, tables);
      Value vNew = splitHeads(tb, *v, kvHeads);
      auto [kh, vh] = cache.append(tb, l, kNew, vNew);
      int64_t groups = d.heads / d.kvHeads;
      Value kr = repeatKV(tb, kh, groups);
      Value vr = repeatKV(tb, vh, groups);
      Value probs;
      Value ctx = scaledDotProductAttention(
          tb, qh, kr, vr, sliding && windowMask ? windowMask : extMask, scale,
          /*causal=*/true, d.attnSoftcap, &probs);
      mb.attentionMap(AttentionStack::Only, l, probs);
      FailureOr<Value> out =
          blockOutput(tb, mergeHeads(tb, ctx), name + "." + names.o, d.oBias,
                      layer + ".post_attention_layernorm");
      if (failed(out))
        return failure();
      attended = *out;
      if (!d.parallelResidual)
        h = tb.add(h, attended);
    }
    {
      std::string name = layer + ".mlp";
      TosaBuilder tb = mb.at(name);
      // The MLP's input: the attention's with a shared norm, else the
      // block's input (parallel) or the residual stream after the
      // attention, normalised.
      if (d.preNorms && !(d.parallelResidual && d.sharedNorm))
        a = norm(tb, d.parallelResidual ? input : h,
                 layer + (d.postNorms ? ".pre_feedforward_layernorm"
                                      : ".post_attention_layernorm"));
      else if (!d.preNorms)
        a = h;
      if (failed(a))
        return failure();
      FailureOr<Value> gate, up;
      if (!d.gatedMlp) {
        up = linear(mb, tb, *a, name + "." + names.up, d.intermediate,
                    d.mlpBias, columns);
        if (failed(up))
          return failure();
      } else if (d.fusedProjections) {
        FailureOr<Value> gateUp = linear(mb, tb, *a, name + ".gate_up_proj",
                                         2 * d.intermediate, false);
        if (failed(gateUp))
          return failure();
        gate = features(tb, *gateUp, 0, d.intermediate);
        up = features(tb, *gateUp, d.intermediate, d.intermediate);
      } else {
        gate = linear(mb, tb, *a, name + ".gate_proj", d.intermediate,
                      d.mlpBias, columns);
        if (failed(gate))
          return failure();
        up = linear(mb, tb, *a, name + "." + names.up, d.intermediate,
                    d.mlpBias, columns);
        if (failed(up))
          return failure();
      }
      Value act = d.gatedMlp ? tb.mul(activation(tb, *gate, d.act), *up)
                             : activation(tb, *up, d.act);
      FailureOr<Value> out =
          blockOutput(tb, act, name + "." + names.down, d.mlpBias,
                      layer + ".post_feedforward_layernorm");
      if (failed(out))
        return failure();
      // Parallel: (attn + mlp) + h, as GPT-NeoX and Phi add them.
      h = d.parallelResidual ? tb.add(tb.add(attended, *out), input)
                             : tb.add(h, *out);
    }
  }
  TosaBuilder tb = mb.at(names.finalNorm);
  FailureOr<Value> out = norm(tb, h, names.finalNorm);
  if (failed(out))
    return failure();
  DecoderHead head;
  head.tiedByDefault = d.tiedByDefault;
  head.softcap = d.logitSoftcap;
  head.divisor = d.logitDivisor;
  head.name = names.head;
  head.bias = d.headBias;
  head.vocab = d.vocab;
  return finishDecoder(r, mb, cache, *out, *embeddings, head);
}

} // namespace tfc::importer
