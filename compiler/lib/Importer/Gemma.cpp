//===- Gemma.cpp - Gemma decoders (Gemma, Gemma 2, Gemma 3's text model) --===//
//
// config.json of transformers' Gemma, Gemma 2 and Gemma 3 text models
// (modeling_gemma.py, modeling_gemma2.py, modeling_gemma3.py) read into a
// RotaryDecoder (RotaryDecoder.cpp builds it). All three: token embeddings
// times sqrt(hidden_size) (the factor rounded to the compute type),
// GemmaRMSNorm (x * rsqrt(mean(x^2) + eps) * (1 + gamma), in f32), the tanh
// GELU (hidden_activation), head_dim 256 unless given, and the head tied to
// the embeddings unless tie_word_embeddings says otherwise.
//  - Gemma: LLaMA's blocks; scores scaled by 1/sqrt(head_dim).
//  - Gemma 2: each block's attention and MLP outputs are normalised too
//    (post_attention_layernorm, pre_/post_feedforward_layernorm); scores
//    scaled by query_pre_attn_scalar^-1/2 and soft-capped
//    (attn_logit_softcapping, 50: tanh(s / cap) * cap, before the masks),
//    the logits capped by final_logit_softcapping (30).
//  - Gemma 3: Gemma 2's blocks without the caps (unless given), Q and K
//    normalised per head (q_norm, k_norm) before the rotary embedding, and
//    the sliding-window layers' rotary embedding from rope_local_base_freq
//    (unscaled) where the others use rope_theta and rope_scaling.
// Sliding-window layers (Gemma 2's even ones, Gemma 3's all but every
// sliding_window_pattern-th; or config.json's layer_types) hide the keys
// sliding_window or more positions back in their mask.
//
//===----------------------------------------------------------------------===//

#include "RotaryDecoder.h"

#include "llvm/ADT/Twine.h"

#include <cmath>

using namespace mlir;
using namespace llvm;

namespace tfc::importer {

/// A number field that may be absent or null (then `fallback`).
static FailureOr<double> optionalNumber(const JsonConfig &c, StringRef field,
                                        double fallback, std::string &error) {
  const json::Value *v = c.object().get(field);
  if (!v || v->kind() == json::Value::Null)
    return fallback;
  return c.number(field, error);
}

/// Which layers use the sliding window: config.json's layer_types, else
/// every layer but each `pattern`-th (Gemma 2: the even ones).
static LogicalResult readLayerTypes(const JsonConfig &c, int64_t pattern,
                                    RotaryDecoder &cfg, std::string &error) {
  if (c.has("layer_types")) {
    FailureOr<std::vector<std::string>> types =
        c.stringList("layer_types", error);
    if (failed(types))
      return failure();
    if (static_cast<int64_t>(types->size()) != cfg.layers)
      return c.fieldError("layer_types",
                          "expected " + Twine(cfg.layers) +
                              " entries (num_hidden_layers), got " +
                              Twine(types->size()),
                          error);
    for (const std::string &t : *types) {
      if (t != "sliding_attention" && t != "full_attention")
        return c.fieldError("layer_types",
                            "unsupported layer type \"" + t +
                                "\" (supported: sliding_attention, "
                                "full_attention)",
                            error);
      cfg.sliding.push_back(t == "sliding_attention");
    }
    return success();
  }
  for (int64_t l = 0; l < cfg.layers; ++l)
    cfg.sliding.push_back((l + 1) % pattern != 0);
  return success();
}

static FailureOr<RotaryDecoder> readConfig(const JsonConfig &c, int generation,
                                           const ImportOptions &options,
                                           std::string &error) {
  RotaryDecoder cfg;
  cfg.family =
      generation == 1 ? "Gemma" : "Gemma " + std::to_string(generation);
  cfg.normKind = RotaryDecoder::Norm::GemmaRms;
  cfg.tiedByDefault = true;
  cfg.postNorms = generation >= 2;
  cfg.qkNorm = generation == 3;
  // GemmaConfig's head_dim defaults to 256.
  if (failed(readDecoderShape(c, 256, cfg, error)))
    return failure();
  // The embeddings' normalizer sqrt(hidden_size).
  cfg.embeddingScale = std::sqrt(static_cast<double>(cfg.hidden));
  // Gemma's MLP takes hidden_activation (its hidden_act is a legacy field).
  FailureOr<Activation> act =
      readActivation(c, "hidden_activation", "gelu_pytorch_tanh", error);
  if (failed(act))
    return failure();
  cfg.act = *act;
  FailureOr<bool> bias = c.boolean("attention_bias", error, false);
  if (failed(bias))
    return failure();
  cfg.qkvBias = cfg.oBias = *bias;

  if (generation >= 2) {
    FailureOr<double> scalar = c.number("query_pre_attn_scalar", error, 256.0);
    if (failed(scalar))
      return failure();
    if (!(*scalar > 0)) {
      (void)c.fieldError("query_pre_attn_scalar", "expected a positive number",
                         error);
      return failure();
    }
    cfg.attnScale = 1.0 / std::sqrt(*scalar);
    double defaultCap = generation == 2 ? 50.0 : 0.0;
    for (auto [field, fallback, out] :
         {std::tuple(StringRef("attn_logit_softcapping"), defaultCap,
                     &cfg.attnSoftcap),
          std::tuple(StringRef("final_logit_softcapping"),
                     generation == 2 ? 30.0 : 0.0, &cfg.logitSoftcap)}) {
      FailureOr<double> cap = optionalNumber(c, field, fallback, error);
      if (failed(cap))
        return failure();
      if (*cap < 0) {
        (void)c.fieldError(field, "expected a positive number or null", error);
        return failure();
      }
      *out = *cap;
    }
    // sliding_window: 4096 when absent; null: no window.
    cfg.window = 4096;
    if (const json::Value *w = c.object().get("sliding_window");
        w && w->kind() == json::Value::Null) {
      cfg.window = 0;
    } else if (w) {
      FailureOr<int64_t> window = c.positiveInt("sliding_window", error);
      if (failed(window))
        return failure();
      cfg.window = *window;
    }
    int64_t pattern = 2;
    if (generation == 3) {
      pattern = 6;
      if (c.has("sliding_window_pattern") &&
          failed(readPositiveInts(c, {{"sliding_window_pattern", &pattern}},
                                  error)))
        return failure();
    }
    if (failed(readLayerTypes(c, pattern, cfg, error)))
      return failure();
  }
  // A window of 0 (null) restricts no layer; Gemma 3's sliding layers keep
  // their own rotary base even then.
  cfg.sliding.resize(cfg.layers, false);

  FailureOr<RotaryFrequencies> rope = readRotaryFrequencies(
      c, cfg.headDim, "rope_theta", generation == 3 ? 1000000.0 : 10000.0,
      /*scaled=*/true, rotaryPositions(options), error);
  if (failed(rope))
    return failure();
  cfg.rope = std::move(*rope);
  if (generation == 3) {
    FailureOr<RotaryFrequencies> local = readRotaryFrequencies(
        c, cfg.headDim, "rope_local_base_freq", 10000.0, /*scaled=*/false,
        rotaryPositions(options), error);
    if (failed(local))
      return failure();
    cfg.localRope = std::move(*local);
  }
  return cfg;
}

const BuildFn buildGemma = buildMember<readConfig, 1>;
const BuildFn buildGemma2 = buildMember<readConfig, 2>;
const BuildFn buildGemma3 = buildMember<readConfig, 3>;

} // namespace tfc::importer
