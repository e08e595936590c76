//===- Llama.cpp - LLaMA-family decoders (LLaMA, Mistral, Qwen, Phi-3...) ===//
//
// config.json of LLaMA (modeling_llama.py) and the families that are its
// graph with small changes, read into a RotaryDecoder (RotaryDecoder.cpp
// builds it): Mistral, its sliding window in the mask of every layer;
// Qwen2 (modeling_qwen2.py), biases on the Q, K and V projections
// (not o_proj); Qwen3 (modeling_qwen3.py), each head of Q and K normalised
// (RMSNorm over the head dimension: q_norm, k_norm) before the rotary
// embedding, head_dim 128 unless given (both Qwens use their sliding window
// only with use_sliding_window, on layers max_window_layers and up); Phi-3
// (modeling_phi3.py), Q, K and V stored as one projection (qkv_proj, in that
// order) and gate and up as one (gate_up_proj, gate first), its window
// Mistral's, its rotary embedding over the first int(head_dim *
// partial_rotary_factor) features (Phi-4-mini) and often scaled by longrope
// (readRotaryFrequencies); Granite (modeling_granite.py), LLaMA with four
// factors: embedding_multiplier on the embeddings, attention_multiplier as
// the scores' scale, residual_multiplier on each block's output before its
// residual add, and the logits divided by logits_scaling; OLMo 2
// (modeling_olmo2.py), norms of the attention's and the MLP's outputs
// instead of their inputs, and Q and K normalised over all their heads.
//
//===----------------------------------------------------------------------===//

#include "RotaryDecoder.h"

#include "llvm/ADT/Twine.h"

#include <cmath>

using namespace mlir;
using namespace llvm;

namespace tfc::importer {

namespace {
/// The members of the family that differ in their layers.
enum class Family { Llama, Qwen2, Qwen3, Phi3, Granite, Olmo2 };

} // namespace

static FailureOr<RotaryDecoder> readConfig(const JsonConfig &c, Family family,
                                           const ImportOptions &options,
                                           std::string &error) {
  RotaryDecoder cfg;
  cfg.family = family == Family::Qwen2     ? "Qwen2"
               : family == Family::Qwen3   ? "Qwen3"
               : family == Family::Phi3    ? "Phi-3"
               : family == Family::Granite ? "Granite"
               : family == Family::Olmo2   ? "OLMo 2"
                                           : "LLaMA";
  // Qwen3Config's head_dim defaults to 128, the others' to hidden / heads.
  if (failed(
          readDecoderShape(c, family == Family::Qwen3 ? 128 : 0, cfg, error)))
    return failure();
  FailureOr<Activation> act = readActivation(c, "hidden_act", "silu", error);
  if (failed(act))
    return failure();
  cfg.act = *act;
  // Biases: LLaMA's attention_bias (all four projections) and mlp_bias;
  // Qwen2's Q, K and V always; Qwen3's attention_bias (all four).
  cfg.qkvBias = cfg.oBias = cfg.mlpBias = false;
  cfg.qkNorm = family == Family::Qwen3;
  cfg.qkNormAcrossHeads = cfg.postNorms = family == Family::Olmo2;
  cfg.preNorms = family != Family::Olmo2;
  cfg.fusedProjections = family == Family::Phi3;
  if (family == Family::Qwen2) {
    cfg.qkvBias = true;
  } else if (family == Family::Phi3) {
    // Phi-3's rotary embedding may turn part of each head (Phi-4-mini).
    if (failed(readPartialRotary(c, "partial_rotary_factor", 1.0, cfg, error)))
      return failure();
  } else {
    FailureOr<bool> attentionBias = c.boolean("attention_bias", error, false);
    if (failed(attentionBias))
      return failure();
    cfg.qkvBias = cfg.oBias = *attentionBias;
  }
  if (family == Family::Granite) {
    // GraniteConfig's multipliers, 1 when absent.
    for (auto [field, out] :
         {std::pair{StringRef("embedding_multiplier"), &cfg.embeddingScale},
          std::pair{StringRef("attention_multiplier"), &cfg.attnScale},
          std::pair{StringRef("residual_multiplier"), &cfg.residualScale},
          std::pair{StringRef("logits_scaling"), &cfg.logitDivisor}}) {
      FailureOr<double> v = c.positiveNumber(field, error, 1.0);
      if (failed(v))
        return failure();
      *out = *v;
    }
  }
  if (family == Family::Llama || family == Family::Granite) {
    FailureOr<bool> mlpBias = c.boolean("mlp_bias", error, false);
    if (failed(mlpBias))
      return failure();
    cfg.mlpBias = *mlpBias;
  }

  FailureOr<RotaryFrequencies> rope = readRotaryFrequencies(
      c, cfg.rotaryDim > 0 ? cfg.rotaryDim : cfg.headDim, "rope_theta", 10000.0,
      /*scaled=*/true, rotaryPositions(options), error);
  if (failed(rope))
    return failure();
  cfg.rope = std::move(*rope);

  // Mistral's and Phi-3's sliding window, on every layer; Qwen's with
  // use_sliding_window, on layers max_window_layers (default 28) and up.
  bool windowed = true;
  int64_t firstSliding = 0;
  if (family == Family::Qwen2 || family == Family::Qwen3) {
    FailureOr<bool> use = c.boolean("use_sliding_window", error, false);
    if (failed(use))
      return failure();
    windowed = *use;
    FailureOr<double> first = c.number("max_window_layers", error, 28.0);
    if (failed(first))
      return failure();
    if (*first < 0 || *first != std::floor(*first) || *first > 1e9) {
      (void)c.fieldError("max_window_layers", "expected a non-negative integer",
                         error);
      return failure();
    }
    firstSliding = static_cast<int64_t>(*first);
  }
  if (const json::Value *w = c.object().get("sliding_window");
      windowed && w && w->kind() != json::Value::Null) {
    FailureOr<int64_t> window = c.positiveInt("sliding_window", error);
    if (failed(window))
      return failure();
    cfg.window = *window;
    for (int64_t l = 0; l < cfg.layers; ++l)
      cfg.sliding.push_back(l >= firstSliding);
  }
  return cfg;
}

const BuildFn buildLlama = buildMember<readConfig, Family::Llama>;
const BuildFn buildQwen2 = buildMember<readConfig, Family::Qwen2>;
const BuildFn buildQwen3 = buildMember<readConfig, Family::Qwen3>;
const BuildFn buildPhi3 = buildMember<readConfig, Family::Phi3>;
const BuildFn buildGranite = buildMember<readConfig, Family::Granite>;
const BuildFn buildOlmo2 = buildMember<readConfig, Family::Olmo2>;

} // namespace tfc::importer
