//===- Llama.cpp - LLaMA-family decoders (LLaMA, Mistral, Qwen, Phi-3) ---===//
//
// Follows transformers' modeling_llama.py (eager attention): token
// embeddings, N pre-norm blocks (RMSNorm, Q/K/V projections, rotary
// position embedding on Q and K, K/V heads repeated to the query heads
// (grouped-query attention), causal attention, o_proj, residual; RMSNorm,
// down(act(gate(x)) * up(x)), residual), then the final RMSNorm. The causal
// mask is written as GPT-2's where(tril, scores, -inf) with the padding mask
// added after it: transformers builds one additive mask holding finfo.min
// for future and padded keys, and the two agree except in rows whose every
// visible key is padding (see scaledDotProductAttention). Mistral is the
// same graph when its sliding window covers the sequence. Qwen2
// (modeling_qwen2.py) is LLaMA with biases on the Q, K and V projections (not
// o_proj); Qwen3 (modeling_qwen3.py) normalises each head of Q and K (RMSNorm
// over the head dimension: q_norm, k_norm) before the rotary embedding, its
// head_dim 128 unless given; both use a sliding window only with
// use_sliding_window, and then only while it covers the sequence. Phi-3
// (modeling_phi3.py) stores Q, K and V as one projection (qkv_proj, in that
// order) and gate and up as one (gate_up_proj, gate first); its window is
// Mistral's. The result is the last hidden state, or with --output=logits the
// LM head's logits (lm_head.weight, or the token embeddings when tied); with a
// KV cache each layer's keys and values follow (see KVCache).
//
//===----------------------------------------------------------------------===//

#include "Architectures.h"
#include "Layers.h"

#include "llvm/ADT/Twine.h"

#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace llvm;

namespace tfc::importer {

namespace {
/// The members of the family that differ in their layers.
enum class Family { Llama, Qwen2, Qwen3, Phi3 };

struct LlamaConfig {
  int64_t hidden, layers, heads, kvHeads, headDim, intermediate, vocab,
      positions;
  double eps;
  Activation act;
  bool qkvBias, oBias, mlpBias;
  bool qkNorm; // RMSNorm over each head of Q and K (Qwen3)
  bool fused;  // qkv_proj and gate_up_proj (Phi-3)
  /// The rotary inverse frequencies (headDim / 2 of them), scaling applied.
  SmallVector<float> invFreq;
};
} // namespace

/// rope_scaling: absent/null or rope_type "default" (none), "linear"
/// (positions divided by factor, i.e. every frequency), "llama3" (Llama
/// 3.1's per-band rescaling, as transformers'
/// _compute_llama3_parameters). Applied to `invFreq` in place.
static LogicalResult applyRopeScaling(const JsonConfig &c,
                                      MutableArrayRef<float> invFreq,
                                      std::string &error) {
  const json::Value *v = c.object().get("rope_scaling");
  if (!v || v->kind() == json::Value::Null)
    return success();
  const json::Object *o = v->getAsObject();
  if (!o)
    return c.fieldError("rope_scaling", "expected an object or null", error);
  std::optional<StringRef> type = o->getString("rope_type");
  if (!type)
    type = o->getString("type");
  if (!type)
    return c.fieldError("rope_scaling", "missing string \"rope_type\"", error);
  auto number = [&](StringRef key) -> FailureOr<double> {
    std::optional<double> n = o->getNumber(key);
    if (!n || !(*n > 0)) {
      (void)c.fieldError("rope_scaling",
                         "\"" + key + "\" must be a positive number", error);
      return failure();
    }
    return *n;
  };
  if (*type == "default")
    return success();
  if (*type == "linear") {
    FailureOr<double> factor = number("factor");
    if (failed(factor))
      return failure();
    for (float &f : invFreq)
      f = static_cast<float>(f / *factor);
    return success();
  }
  if (*type == "llama3") {
    FailureOr<double> factor = number("factor"),
                      low = number("low_freq_factor"),
                      high = number("high_freq_factor"),
                      original = number("original_max_position_embeddings");
    if (failed(factor) || failed(low) || failed(high) || failed(original))
      return failure();
    if (!(*high > *low))
      return c.fieldError(
          "rope_scaling",
          "\"high_freq_factor\" must exceed \"low_freq_factor\"", error);
    double lowWavelen = *original / *low, highWavelen = *original / *high;
    for (float &f : invFreq) {
      double wavelen = 2 * M_PI / f;
      if (wavelen < highWavelen)
        continue; // high frequencies keep theirs
      if (wavelen > lowWavelen) {
        f = static_cast<float>(f / *factor);
        continue;
      }
      double smooth = (*original / wavelen - *low) / (*high - *low);
      f = static_cast<float>((1 - smooth) * f / *factor + smooth * f);
    }
    return success();
  }
  return c.fieldError("rope_scaling",
                      "unsupported rope_type \"" + *type +
                          "\" (supported: default, linear, llama3)",
                      error);
}

static FailureOr<LlamaConfig> readConfig(const JsonConfig &c, Family family,
                                         std::string &error) {
  LlamaConfig cfg;
  if (failed(readPositiveInts(c,
                              {{"hidden_size", &cfg.hidden},
                               {"num_hidden_layers", &cfg.layers},
                               {"num_attention_heads", &cfg.heads},
                               {"intermediate_size", &cfg.intermediate},
                               {"vocab_size", &cfg.vocab},
                               {"max_position_embeddings", &cfg.positions}},
                              error)))
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
  if (failed(optionalInt("num_key_value_heads", cfg.heads, cfg.kvHeads)))
    return failure();
  if (cfg.heads % cfg.kvHeads != 0) {
    (void)c.fieldError("num_key_value_heads",
                       "does not divide num_attention_heads (" +
                           Twine(cfg.heads) + ")",
                       error);
    return failure();
  }
  // Qwen3Config's head_dim defaults to 128, the others' to hidden / heads.
  bool headDimDefault = family != Family::Qwen3;
  if (headDimDefault && !c.has("head_dim") && cfg.hidden % cfg.heads != 0) {
    (void)c.fieldError(
        "num_attention_heads",
        "does not divide hidden_size (" + Twine(cfg.hidden) + ")", error);
    return failure();
  }
  if (failed(optionalInt("head_dim",
                         headDimDefault ? cfg.hidden / cfg.heads : 128,
                         cfg.headDim)))
    return failure();
  if (cfg.headDim % 2 != 0) {
    (void)c.fieldError("head_dim",
                       "the rotary embedding needs an even head dimension (" +
                           Twine(cfg.headDim) + ")",
                       error);
    return failure();
  }
  FailureOr<double> eps = c.positiveNumber("rms_norm_eps", error, 1e-6);
  if (failed(eps))
    return failure();
  cfg.eps = *eps;
  FailureOr<Activation> act = readActivation(c, "hidden_act", "silu", error);
  if (failed(act))
    return failure();
  cfg.act = *act;
  // Biases: LLaMA's attention_bias (all four projections) and mlp_bias;
  // Qwen2's Q, K and V always; Qwen3's attention_bias (all four).
  cfg.qkvBias = cfg.oBias = cfg.mlpBias = false;
  cfg.qkNorm = family == Family::Qwen3;
  cfg.fused = family == Family::Phi3;
  if (family == Family::Qwen2) {
    cfg.qkvBias = true;
  } else if (family == Family::Phi3) {
    // Phi-3's rotary embedding may cover part of each head (Phi-4-mini).
    FailureOr<double> partial = c.number("partial_rotary_factor", error, 1.0);
    if (failed(partial))
      return failure();
    if (*partial != 1.0) {
      char value[32];
      std::snprintf(value, sizeof value, "%g", *partial);
      (void)c.fieldError("partial_rotary_factor",
                         Twine("unsupported value ") + value +
                             " (supported: 1.0, a rotary embedding over the "
                             "whole head)",
                         error);
      return failure();
    }
  } else {
    FailureOr<bool> attentionBias = c.boolean("attention_bias", error, false);
    if (failed(attentionBias))
      return failure();
    cfg.qkvBias = cfg.oBias = *attentionBias;
  }
  if (family == Family::Llama) {
    FailureOr<bool> mlpBias = c.boolean("mlp_bias", error, false);
    if (failed(mlpBias))
      return failure();
    cfg.mlpBias = *mlpBias;
  }

  FailureOr<double> theta = c.number("rope_theta", error, 10000.0);
  if (failed(theta))
    return failure();
  if (*theta <= 1) {
    (void)c.fieldError("rope_theta", "expected a number above 1", error);
    return failure();
  }
  // inv_freq = 1 / theta^(2i / D), in f32 as transformers computes it.
  for (int64_t i = 0; i < cfg.headDim / 2; ++i) {
    float exponent =
        static_cast<float>(2 * i) / static_cast<float>(cfg.headDim);
    cfg.invFreq.push_back(
        1.0f / static_cast<float>(std::pow(*theta, double(exponent))));
  }
  if (failed(applyRopeScaling(c, cfg.invFreq, error)))
    return failure();
  return cfg;
}

/// Features [first, first + count) of x [B, S, N]: one part of a fused
/// projection.
static Value features(TosaBuilder &tb, Value x, int64_t first, int64_t count) {
  ArrayRef<int64_t> shape = cast<RankedTensorType>(x.getType()).getShape();
  return tb.slice(x, {0, 0, first}, {shape[0], shape[1], count});
}

static FailureOr<OwningOpRef<ModuleOp>> buildFamily(ImportRequest &r,
                                                    Family family) {
  FailureOr<LlamaConfig> cfgOr = readConfig(r.config, family, r.error);
  if (failed(cfgOr))
    return failure();
  const LlamaConfig &cfg = *cfgOr;
  const ImportOptions &o = r.options;
  StringRef familyName = family == Family::Qwen2   ? "Qwen2"
                         : family == Family::Qwen3 ? "Qwen3"
                         : family == Family::Phi3  ? "Phi-3"
                                                   : "LLaMA";
  if (failed(checkDecoderRequest(r, familyName, cfg.positions,
                                 "max_position_embeddings")))
    return failure();
  // Mistral's sliding window (Qwen's with use_sliding_window): the same
  // graph while it covers the sequence.
  bool windowed = true;
  if (family == Family::Qwen2 || family == Family::Qwen3) {
    FailureOr<bool> use =
        r.config.boolean("use_sliding_window", r.error, false);
    if (failed(use))
      return failure();
    windowed = *use;
  }
  if (const json::Value *w = r.config.object().get("sliding_window");
      windowed && w && w->kind() != json::Value::Null) {
    FailureOr<int64_t> window = r.config.positiveInt("sliding_window", r.error);
    if (failed(window))
      return failure();
    if (*window < o.pastLen + o.seqLen) {
      r.error = (tokenCountText(o) + " exceeds sliding_window (" +
                 Twine(*window) + ") in " + r.config.path() +
                 ": sliding-window attention is not supported")
                    .str();
      return failure();
    }
  }

  FailureOr<std::string> prefix =
      weightPrefix(r, "embed_tokens.weight", "model.");
  if (failed(prefix))
    return failure();

  ModelBuilder mb(r.context, r.weights, *prefix, r.options.computeType,
                  r.error);
  TokenInputs tokens = addTokenInputs(mb, o);
  Value ids = tokens.ids, mask = tokens.mask;
  KVCache cache(mb, o, cfg.layers, cfg.kvHeads, cfg.headDim);

  FailureOr<Value> embeddings =
      mb.weight("embed_tokens.weight", {cfg.vocab, cfg.hidden});
  if (failed(embeddings))
    return failure();
  Value h = [&] {
    TosaBuilder tb = mb.at("embed_tokens");
    return embeddingLookup(tb, *embeddings, ids);
  }();
  Value extMask = [&] {
    TosaBuilder tb = mb.at("attention_mask");
    return extendedAttentionMask(tb, mask, mb.getComputeType());
  }();
  RotaryTables rope = [&] {
    TosaBuilder tb = mb.at("rotary_emb");
    if (!tokens.positions)
      return rotaryTables(tb, cfg.invFreq, o.pastLen, o.seqLen,
                          mb.getComputeType());
    // Every position the clamped inputs can name, gathered per token.
    return gatherRotary(tb,
                        rotaryTables(tb, cfg.invFreq, 0, o.pastLen + o.seqLen,
                                     mb.getComputeType()),
                        tokens.positions);
  }();
  double scale = 1.0 / std::sqrt(static_cast<double>(cfg.headDim));
  int64_t qWidth = cfg.heads * cfg.headDim, kvWidth = cfg.kvHeads * cfg.headDim;

  for (int64_t l = 0; l < cfg.layers; ++l) {
    std::string layer = "layers." + std::to_string(l);
    {
      std::string name = layer + ".self_attn";
      TosaBuilder tb = mb.at(name);
      FailureOr<Value> a =
          rmsNorm(mb, tb, h, layer + ".input_layernorm", cfg.eps);
      if (failed(a))
        return failure();
      FailureOr<Value> q, k, v;
      if (cfg.fused) {
        FailureOr<Value> qkv =
            linear(mb, tb, *a, name + ".qkv_proj", qWidth + 2 * kvWidth, false);
        if (failed(qkv))
          return failure();
        q = features(tb, *qkv, 0, qWidth);
        k = features(tb, *qkv, qWidth, kvWidth);
        v = features(tb, *qkv, qWidth + kvWidth, kvWidth);
      } else {
        q = linear(mb, tb, *a, name + ".q_proj", qWidth, cfg.qkvBias);
        if (failed(q))
          return failure();
        k = linear(mb, tb, *a, name + ".k_proj", kvWidth, cfg.qkvBias);
        if (failed(k))
          return failure();
        v = linear(mb, tb, *a, name + ".v_proj", kvWidth, cfg.qkvBias);
        if (failed(v))
          return failure();
      }
      int64_t groups = cfg.heads / cfg.kvHeads;
      // Named temporaries keep the op order independent of the compiler's
      // argument evaluation order.
      Value qSplit = splitHeads(tb, *q, cfg.heads);
      Value kSplit = splitHeads(tb, *k, cfg.kvHeads);
      if (cfg.qkNorm) {
        FailureOr<Value> qn =
            rmsNorm(mb, tb, qSplit, name + ".q_norm", cfg.eps);
        if (failed(qn))
          return failure();
        FailureOr<Value> kn =
            rmsNorm(mb, tb, kSplit, name + ".k_norm", cfg.eps);
        if (failed(kn))
          return failure();
        qSplit = *qn;
        kSplit = *kn;
      }
      Value qh = applyRotary(tb, qSplit, rope);
      Value kNew = applyRotary(tb, kSplit, rope);
      Value vNew = splitHeads(tb, *v, cfg.kvHeads);
      auto [kh, vh] = cache.append(tb, l, kNew, vNew);
      Value kr = repeatKV(tb, kh, groups);
      Value vr = repeatKV(tb, vh, groups);
      Value ctx = scaledDotProductAttention(tb, qh, kr, vr, extMask, scale,
                                            /*causal=*/true);
      FailureOr<Value> proj = linear(mb, tb, mergeHeads(tb, ctx),
                                     name + ".o_proj", cfg.hidden, cfg.oBias);
      if (failed(proj))
        return failure();
      h = tb.add(h, *proj);
    }
    {
      std::string name = layer + ".mlp";
      TosaBuilder tb = mb.at(name);
      FailureOr<Value> a =
          rmsNorm(mb, tb, h, layer + ".post_attention_layernorm", cfg.eps);
      if (failed(a))
        return failure();
      FailureOr<Value> gate, up;
      if (cfg.fused) {
        FailureOr<Value> gateUp = linear(mb, tb, *a, name + ".gate_up_proj",
                                         2 * cfg.intermediate, false);
        if (failed(gateUp))
          return failure();
        gate = features(tb, *gateUp, 0, cfg.intermediate);
        up = features(tb, *gateUp, cfg.intermediate, cfg.intermediate);
      } else {
        gate = linear(mb, tb, *a, name + ".gate_proj", cfg.intermediate,
                      cfg.mlpBias);
        if (failed(gate))
          return failure();
        up = linear(mb, tb, *a, name + ".up_proj", cfg.intermediate,
                    cfg.mlpBias);
        if (failed(up))
          return failure();
      }
      Value act = tb.mul(activation(tb, *gate, cfg.act), *up);
      FailureOr<Value> down =
          linear(mb, tb, act, name + ".down_proj", cfg.hidden, cfg.mlpBias);
      if (failed(down))
        return failure();
      h = tb.add(h, *down);
    }
  }
  TosaBuilder tb = mb.at("norm");
  FailureOr<Value> out = rmsNorm(mb, tb, h, "norm", cfg.eps);
  if (failed(out))
    return failure();
  return finishDecoder(r, mb, cache, *out, *embeddings,
                       /*tiedByDefault=*/false);
}

FailureOr<OwningOpRef<ModuleOp>> buildLlama(ImportRequest &r) {
  return buildFamily(r, Family::Llama);
}

FailureOr<OwningOpRef<ModuleOp>> buildQwen2(ImportRequest &r) {
  return buildFamily(r, Family::Qwen2);
}

FailureOr<OwningOpRef<ModuleOp>> buildQwen3(ImportRequest &r) {
  return buildFamily(r, Family::Qwen3);
}

FailureOr<OwningOpRef<ModuleOp>> buildPhi3(ImportRequest &r) {
  return buildFamily(r, Family::Phi3);
}

} // namespace tfc::importer
