//===- NeoX.cpp - GPT-NeoX, Phi and StableLM decoders ---------------------===//
//
// Three families that are LLaMA's graph with LayerNorm (with its bias)
// instead of RMSNorm and a rotary embedding over part of each head, read
// into a RotaryDecoder (RotaryDecoder.cpp builds it):
//  - GPT-NeoX (modeling_gpt_neox.py: Pythia, GPT-NeoX-20B): Q, K and V in
//    one projection interleaved per head (query_key_value), the first
//    rotary_pct of each head turned with base rotary_emb_base, a plain GELU
//    MLP (dense_h_to_4h, dense_4h_to_h), and with use_parallel_residual
//    (default) h + attn(ln1(h)) + mlp(ln2(h)); an untied head, embed_out.
//  - Phi (modeling_phi.py: phi-1, phi-1.5, phi-2): one LayerNorm per block
//    whose output both the attention and the MLP (fc1, fc2) read, their
//    outputs added to the block's input together; biases everywhere, the
//    LM head's too; partial_rotary_factor of each head turned.
//  - StableLM (modeling_stablelm.py: StableLM 2, StableLM-3B-4E1T): LLaMA's
//    gated MLP and o_proj without biases, Q, K and V biased with
//    use_qkv_bias, partial_rotary_factor of each head turned, and with
//    use_parallel_residual Phi's shared norm and parallel sum.
// Their per-head norms of Q and K (qk_layernorm) are refused.
//
//===----------------------------------------------------------------------===//

#include "RotaryDecoder.h"

using namespace mlir;
using namespace llvm;

namespace tfc::importer {

namespace {
enum class Family { NeoX, Phi, StableLm };
} // namespace

static FailureOr<RotaryDecoder> readConfig(const JsonConfig &c, Family family,
                                           const ImportOptions &options,
                                           std::string &error) {
  RotaryDecoder cfg;
  cfg.family = family == Family::NeoX  ? "GPT-NeoX"
               : family == Family::Phi ? "Phi"
                                       : "StableLM";
  // Their heads are hidden_size / num_attention_heads wide whatever head_dim
  // says, and GPT-NeoX has no grouped-query attention.
  if (failed(readDecoderShape(c, -1, cfg, error)))
    return failure();
  if (family == Family::NeoX)
    cfg.kvHeads = cfg.heads;
  FailureOr<double> eps = c.positiveNumber("layer_norm_eps", error, 1e-5);
  if (failed(eps))
    return failure();
  cfg.eps = *eps;
  cfg.normKind = RotaryDecoder::Norm::Layer;
  FailureOr<Activation> act =
      readActivation(c, "hidden_act",
                     family == Family::NeoX  ? "gelu"
                     : family == Family::Phi ? "gelu_new"
                                             : "silu",
                     error);
  if (failed(act))
    return failure();
  cfg.act = *act;
  if (family != Family::NeoX) {
    FailureOr<bool> qkNorm = c.boolean("qk_layernorm", error, false);
    if (failed(qkNorm))
      return failure();
    if (*qkNorm) {
      (void)c.fieldError("qk_layernorm",
                         "unsupported value true (norms of Q and K per head)",
                         error);
      return failure();
    }
  }
  RotaryDecoder::Names &names = cfg.names;
  StringRef thetaField = "rope_theta";
  FailureOr<bool> parallel = true;
  switch (family) {
  case Family::NeoX: {
    if (failed(readPartialRotary(c, "rotary_pct", 0.25, cfg, error)))
      return failure();
    // GPTNeoXConfig's base is rotary_emb_base; a config written as
    // rope_theta is read as that.
    if (!c.has("rotary_emb_base") && c.has("rope_theta"))
      thetaField = "rope_theta";
    else
      thetaField = "rotary_emb_base";
    FailureOr<bool> bias = c.boolean("attention_bias", error, true);
    if (failed(bias))
      return failure();
    cfg.qkvBias = cfg.oBias = *bias;
    cfg.mlpBias = true;
    cfg.fusedProjections = cfg.qkvPerHead = true;
    cfg.gatedMlp = false;
    parallel = c.boolean("use_parallel_residual", error, true);
    names.prefixExample = "gpt_neox.";
    names.embed = "embed_in";
    names.attention = "attention";
    names.qkv = "query_key_value";
    names.o = "dense";
    names.up = "dense_h_to_4h";
    names.down = "dense_4h_to_h";
    names.finalNorm = "final_layer_norm";
    names.head = "embed_out";
    break;
  }
  case Family::Phi:
    if (failed(readPartialRotary(c, "partial_rotary_factor", 0.5, cfg, error)))
      return failure();
    cfg.qkvBias = cfg.oBias = cfg.mlpBias = cfg.headBias = true;
    cfg.gatedMlp = false;
    cfg.sharedNorm = true;
    names.o = "dense";
    names.up = "fc1";
    names.down = "fc2";
    names.finalNorm = "final_layernorm";
    break;
  case Family::StableLm: {
    if (failed(readPartialRotary(c, "partial_rotary_factor", 0.25, cfg, error)))
      return failure();
    FailureOr<bool> bias = c.boolean("use_qkv_bias", error, false);
    if (failed(bias))
      return failure();
    cfg.qkvBias = *bias;
    cfg.sharedNorm = true;
    parallel = c.boolean("use_parallel_residual", error, false);
    break;
  }
  }
  if (failed(parallel))
    return failure();
  cfg.parallelResidual = *parallel;

  FailureOr<RotaryFrequencies> rope =
      readRotaryFrequencies(c, cfg.rotaryDim, thetaField, 10000.0,
                            /*scaled=*/true, rotaryPositions(options), error);
  if (failed(rope))
    return failure();
  cfg.rope = std::move(*rope);
  return cfg;
}

const BuildFn buildGptNeoX = buildMember<readConfig, Family::NeoX>;
const BuildFn buildPhi = buildMember<readConfig, Family::Phi>;
const BuildFn buildStableLm = buildMember<readConfig, Family::StableLm>;

} // namespace tfc::importer
