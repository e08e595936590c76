//===- Gpt2.cpp - GPT-2 decoders (GPT2Model, GPT2LMHeadModel) -------------===//
//
// Follows transformers' modeling_gpt2.py (eager attention): token + position
// embeddings, N pre-LayerNorm blocks (ln_1, causal self-attention through
// one Conv1D c_attn split into Q, K, V, c_proj, residual; ln_2, MLP c_fc,
// activation, c_proj, residual), then ln_f. The causal mask is
// where(tril, scores / sqrt(dh), finfo.min) and the padding mask is added
// after it, as transformers does. The result is the last hidden state, or
// with --output=logits the LM head's logits (tied to wte); with a KV cache
// each block's keys and values follow (see KVCache).
//
//===----------------------------------------------------------------------===//

#include "Architectures.h"
#include "Layers.h"
#include "TensorParallel.h"

#include "llvm/ADT/Twine.h"

#include <cmath>

using namespace mlir;
using namespace llvm;

namespace tfc::importer {

namespace {
struct Gpt2Config {
  int64_t hidden, layers, heads, inner, vocab, positions;
  double eps;
  Activation act;
};
} // namespace

static FailureOr<Gpt2Config> readConfig(const JsonConfig &c,
                                        std::string &error) {
  Gpt2Config cfg;
  if (failed(readPositiveInts(c,
                              {{"n_embd", &cfg.hidden},
                               {"n_layer", &cfg.layers},
                               {"n_head", &cfg.heads},
                               {"vocab_size", &cfg.vocab},
                               {"n_positions", &cfg.positions}},
                              error)))
    return failure();
  // n_inner: null or absent means 4 * n_embd.
  const json::Value *inner = c.object().get("n_inner");
  if (inner && inner->kind() != json::Value::Null) {
    if (failed(readPositiveInts(c, {{"n_inner", &cfg.inner}}, error)))
      return failure();
  } else {
    cfg.inner = 4 * cfg.hidden;
  }
  if (cfg.hidden % cfg.heads != 0) {
    (void)c.fieldError(
        "n_head", "does not divide n_embd (" + Twine(cfg.hidden) + ")", error);
    return failure();
  }
  FailureOr<double> eps = c.positiveNumber("layer_norm_epsilon", error, 1e-5);
  if (failed(eps))
    return failure();
  cfg.eps = *eps;
  FailureOr<Activation> act =
      readActivation(c, "activation_function", "gelu_new", error);
  if (failed(act))
    return failure();
  cfg.act = *act;
  // Options that change the attention arithmetic.
  for (StringRef field :
       {"scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"}) {
    FailureOr<bool> on = c.boolean(field, error, false);
    if (failed(on))
      return failure();
    if (*on) {
      (void)c.fieldError(field, "true is not supported", error);
      return failure();
    }
  }
  FailureOr<bool> scaled = c.boolean("scale_attn_weights", error, true);
  if (failed(scaled))
    return failure();
  if (!*scaled) {
    (void)c.fieldError("scale_attn_weights", "false is not supported", error);
    return failure();
  }
  return cfg;
}

FailureOr<OwningOpRef<ModuleOp>> buildGpt2(ImportRequest &r) {
  FailureOr<Gpt2Config> cfgOr = readConfig(r.config, r.error);
  if (failed(cfgOr))
    return failure();
  const Gpt2Config &cfg = *cfgOr;
  const ImportOptions &o = r.options;
  if (failed(checkDecoderRequest(r, "GPT-2", cfg.positions, "n_positions")))
    return failure();
  FailureOr<std::string> prefix = weightPrefix(r, "wte.weight", "transformer.");
  if (failed(prefix))
    return failure();

  ModelBuilder mb(r, *prefix);
  if (failed(mb.declareAttentionStacks({{AttentionStack::Only, cfg.layers}})))
    return failure();
  // --tensor-parallel: this rank's heads (of c_attn's Q, K and V, 3
  // groups) and MLP features.
  if (failed(checkTensorParallel(
          r, mb, {{"n_head", cfg.heads}, {"n_inner", cfg.inner}})))
    return failure();
  int64_t heads = cfg.heads / mb.ranks(), width = cfg.hidden / mb.ranks();
  const Parallel rows{Parallel::Rows};
  TokenInputs tokens = addTokenInputs(mb, o);
  KVCache cache(mb, o, cfg.layers, heads, cfg.hidden / cfg.heads);

  Value h, wteValue;
  bool splitVocab = splitsVocabulary(r, mb);
  {
    TosaBuilder tb = mb.at("embeddings");
    FailureOr<Value> wte =
        vocabularyWeight(mb, splitVocab, "wte.weight", {cfg.vocab, cfg.hidden});
    if (failed(wte))
      return failure();
    wteValue = *wte;
    FailureOr<Value> wpe = mb.weight("wpe.weight", {cfg.positions, cfg.hidden});
    if (failed(wpe))
      return failure();
    Value tokenEmbeddings =
        vocabularyEmbedding(mb, tb, splitVocab, *wte, tokens.ids, cfg.vocab);
    h = tb.add(tokenEmbeddings,
               tokens.positions ? embeddingLookup(tb, *wpe, tokens.positions)
                                : tableRows(tb, *wpe, o.pastLen, o.seqLen));
  }
  Value extMask = extendedAttentionMask(mb, "attention_mask", tokens.mask);
  double scale = 1.0 / std::sqrt(static_cast<double>(cfg.hidden / cfg.heads));

  for (int64_t l = 0; l < cfg.layers; ++l) {
    std::string block = "h." + std::to_string(l);
    {
      std::string name = block + ".attn";
      TosaBuilder tb = mb.at(name);
      FailureOr<Value> a = layerNorm(mb, tb, h, block + ".ln_1", cfg.eps);
      if (failed(a))
        return failure();
      FailureOr<Value> qkv = conv1d(mb, tb, *a, name + ".c_attn",
                                    3 * cfg.hidden, {Parallel::Columns, 3});
      if (failed(qkv))
        return failure();
      auto part = [&](int64_t i) {
        return tb.slice(*qkv, {0, 0, i * width}, {o.batch, o.seqLen, width});
      };
      // Named temporaries keep the op order independent of the compiler's
      // argument evaluation order.
      Value qh = splitHeads(tb, part(0), heads);
      Value kNew = splitHeads(tb, part(1), heads);
      Value vNew = splitHeads(tb, part(2), heads);
      auto [kh, vh] = cache.append(tb, l, kNew, vNew);
      Value probs;
      Value ctx = scaledDotProductAttention(tb, qh, kh, vh, extMask, scale,
                                            /*causal=*/true, 0, &probs);
      mb.attentionMap(AttentionStack::Only, l, probs);
      FailureOr<Value> proj = conv1d(mb, tb, mergeHeads(tb, ctx),
                                     name + ".c_proj", cfg.hidden, rows);
      if (failed(proj))
        return failure();
      h = tb.add(*proj, h);
    }
    {
      std::string name = block + ".mlp";
      TosaBuilder tb = mb.at(name);
      FailureOr<Value> a = layerNorm(mb, tb, h, block + ".ln_2", cfg.eps);
      if (failed(a))
        return failure();
      FailureOr<Value> up =
          conv1d(mb, tb, *a, name + ".c_fc", cfg.inner, {Parallel::Columns});
      if (failed(up))
        return failure();
      FailureOr<Value> down = conv1d(mb, tb, activation(tb, *up, cfg.act),
                                     name + ".c_proj", cfg.hidden, rows);
      if (failed(down))
        return failure();
      h = tb.add(*down, h);
    }
  }
  TosaBuilder tb = mb.at("ln_f");
  FailureOr<Value> out = layerNorm(mb, tb, h, "ln_f", cfg.eps);
  if (failed(out))
    return failure();
  // GPT2LMHeadModel's head is tied to wte.
  DecoderHead head;
  head.tiedByDefault = true;
  head.vocab = cfg.vocab;
  return finishDecoder(r, mb, cache, *out, wteValue, head);
}

} // namespace tfc::importer
