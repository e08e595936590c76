//===- Bert.cpp - BERT and RoBERTa encoders (and their task variants) -----===//
//
// Follows transformers' modeling_bert.py (eager attention): embeddings
// (word + token type, then + position, LayerNorm), N encoder layers
// (self-attention, dense + residual + LayerNorm, intermediate + activation,
// dense + residual + LayerNorm). Task heads (pooler, MLM, classifier) are not
// part of the graph; their tensors are not arguments. RoBERTa and
// XLM-RoBERTa (modeling_roberta.py) are the same graph but for the position
// ids, which count the tokens that are not padding (create_position_ids_from_
// input_ids: cumsum(ids != pad) * (ids != pad) + pad, pad = pad_token_id).
// With --tensor-parallel each rank holds its heads of query, key and value
// and its features of the intermediate dense (column-parallel); the two
// output denses are row-parallel, their partial sums added over the ranks
// before the bias, the residual and the LayerNorm.
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
enum class Family { Bert, Roberta };

struct BertConfig : ModelSizes {
  int64_t typeVocab;
  int64_t padToken; // RoBERTa: the padding id, and the first position - 1
  double eps;
  Activation act;
};
} // namespace

static FailureOr<BertConfig> readConfig(const JsonConfig &c, Family family,
                                        std::string &error) {
  BertConfig cfg;
  cfg.padToken = 0;
  if (family == Family::Roberta) {
    // RobertaConfig's pad_token_id defaults to 1.
    FailureOr<double> pad = c.number("pad_token_id", error, 1.0);
    if (failed(pad))
      return failure();
    if (!(*pad >= 0 && *pad < 1e9 && *pad == std::floor(*pad))) {
      (void)c.fieldError("pad_token_id", "expected a non-negative integer",
                         error);
      return failure();
    }
    cfg.padToken = static_cast<int64_t>(*pad);
  }
  if (failed(readModelSizes(c, cfg, error)))
    return failure();
  if (c.has("type_vocab_size")) {
    if (failed(
            readPositiveInts(c, {{"type_vocab_size", &cfg.typeVocab}}, error)))
      return failure();
  } else {
    cfg.typeVocab = 2;
  }
  if (cfg.hidden % cfg.heads != 0) {
    (void)c.fieldError(
        "num_attention_heads",
        "does not divide hidden_size (" + Twine(cfg.hidden) + ")", error);
    return failure();
  }
  FailureOr<double> eps = c.positiveNumber("layer_norm_eps", error, 1e-12);
  if (failed(eps))
    return failure();
  cfg.eps = *eps;
  FailureOr<Activation> act = readActivation(c, "hidden_act", "gelu", error);
  if (failed(act))
    return failure();
  cfg.act = *act;
  FailureOr<std::string> pos =
      c.string("position_embedding_type", error, "absolute");
  if (failed(pos))
    return failure();
  if (*pos != "absolute") {
    (void)c.fieldError(
        "position_embedding_type",
        "unsupported value \"" + *pos + "\" (supported: absolute)", error);
    return failure();
  }
  return cfg;
}

/// BertSelfOutput / BertOutput: LayerNorm(dense(x) + residual), weights
/// under `prefix`.dense and `prefix`.LayerNorm; the dense row-parallel
/// (x holds the rank's features) in a tensor-parallel build.
static FailureOr<Value> denseAddNorm(ModelBuilder &mb,
                                     const std::string &prefix, Value x,
                                     Value residual, const BertConfig &cfg) {
  TosaBuilder tb = mb.at(prefix);
  FailureOr<Value> d = linear(mb, tb, x, prefix + ".dense", cfg.hidden,
                              /*bias=*/true, {Parallel::Rows});
  if (failed(d))
    return failure();
  return layerNorm(mb, tb, tb.add(*d, residual), prefix + ".LayerNorm",
                   cfg.eps);
}

/// RoBERTa's position ids [B, S] (i32) of token ids `ids`:
/// cumsum(ids != pad) * (ids != pad) + pad.
static Value robertaPositions(TosaBuilder &tb, Value ids, int64_t pad) {
  Type i32 = tb.builder().getI32Type();
  auto idsType = cast<RankedTensorType>(ids.getType());
  int64_t b = idsType.getDimSize(0), s = idsType.getDimSize(1);
  Value notPad = tb.select(
      tb.equal(ids, tb.splat(double(pad), idsType.getElementType(), 2)),
      tb.splat(0, i32, 2), tb.splat(1, i32, 2));
  // The prefix sums along S in log2(S) shifted adds (Hillis-Steele): after
  // the add of `shift`, each entry holds the sum of the 2 * shift entries
  // ending at it. No S x S operand, for long sequences too.
  Value cumsum = notPad;
  for (int64_t shift = 1; shift < s; shift *= 2) {
    Value zeros = tb.constant(RankedTensorType::get({b, shift}, i32), 0);
    Value shifted =
        tb.concat({zeros, tb.slice(cumsum, {0, 0}, {b, s - shift})}, 1);
    cumsum = tb.add(cumsum, shifted);
  }
  return tb.add(tb.mul(cumsum, notPad), tb.splat(double(pad), i32, 2));
}

static FailureOr<OwningOpRef<ModuleOp>> buildFamily(ImportRequest &r,
                                                    Family family) {
  FailureOr<BertConfig> cfgOr = readConfig(r.config, family, r.error);
  if (failed(cfgOr))
    return failure();
  const BertConfig &cfg = *cfgOr;
  const ImportOptions &o = r.options;
  StringRef name = family == Family::Roberta ? "RoBERTa" : "BERT";
  if (o.output == ImportOutput::Logits) {
    r.error = (r.config.path() + ": " + name +
               " is an encoder: --output=logits (a language-model "
               "head) is for decoders")
                  .str();
    return failure();
  }
  if (o.kvCache || o.positionIds) {
    r.error = (r.config.path() + ": " + name +
               " is an encoder and has no KV cache (--kv-cache, "
               "--past-len, --position-ids are for decoders)")
                  .str();
    return failure();
  }
  // RoBERTa's positions run from pad + 1 to pad + S.
  int64_t lastPosition =
      family == Family::Roberta ? cfg.padToken + o.seqLen : o.seqLen - 1;
  if (lastPosition >= cfg.positions) {
    r.error =
        ("--seq-len " + Twine(o.seqLen) + " exceeds max_position_embeddings (" +
         Twine(cfg.positions) + ") in " + r.config.path() +
         (family == Family::Roberta
              ? " (RoBERTa's positions start after pad_token_id, " +
                    Twine(cfg.padToken) + ")"
              : Twine("")))
            .str();
    return failure();
  }

  FailureOr<std::string> prefix =
      weightPrefix(r, "embeddings.word_embeddings.weight",
                   family == Family::Roberta ? "roberta." : "bert.");
  if (failed(prefix))
    return failure();

  ModelBuilder mb(r, *prefix);
  if (failed(mb.declareAttentionStacks({{AttentionStack::Only, cfg.layers}})))
    return failure();
  // --tensor-parallel: this rank's heads and intermediate features.
  if (failed(checkTensorParallel(r, mb,
                                 {{"num_attention_heads", cfg.heads},
                                  {"intermediate_size", cfg.intermediate}})))
    return failure();
  int64_t heads = cfg.heads / mb.ranks();
  const Parallel columns{Parallel::Columns};
  TokenInputs tokens = addTokenInputs(mb, o);
  Value ids = tokens.ids, mask = tokens.mask;
  Value typeIds =
      o.tokenTypeIds
          ? mb.addInput("token_type_ids", cast<RankedTensorType>(ids.getType()))
          : Value();

  // Embeddings.
  Value h;
  {
    TosaBuilder tb = mb.at("embeddings");
    FailureOr<Value> word =
        mb.weight("embeddings.word_embeddings.weight", {cfg.vocab, cfg.hidden});
    if (failed(word))
      return failure();
    FailureOr<Value> position = mb.weight(
        "embeddings.position_embeddings.weight", {cfg.positions, cfg.hidden});
    if (failed(position))
      return failure();
    FailureOr<Value> tokenType = mb.weight(
        "embeddings.token_type_embeddings.weight", {cfg.typeVocab, cfg.hidden});
    if (failed(tokenType))
      return failure();
    Value tt = typeIds ? embeddingLookup(tb, *tokenType, typeIds)
                       : tableRows(tb, *tokenType, 0, 1);
    h = tb.add(embeddingLookup(tb, *word, ids), tt);
    h = tb.add(h, family == Family::Roberta
                      ? embeddingLookup(tb, *position,
                                        robertaPositions(tb, ids, cfg.padToken))
                      : tableRows(tb, *position, 0, o.seqLen));
    FailureOr<Value> ln = layerNorm(mb, tb, h, "embeddings.LayerNorm", cfg.eps);
    if (failed(ln))
      return failure();
    h = *ln;
  }

  Value extMask = extendedAttentionMask(mb, "extended_attention_mask", mask);
  double scale = 1.0 / std::sqrt(static_cast<double>(cfg.hidden / cfg.heads));

  for (int64_t l = 0; l < cfg.layers; ++l) {
    std::string layer = "encoder.layer." + std::to_string(l);
    Value attnOut;
    {
      std::string self = layer + ".attention.self";
      TosaBuilder tb = mb.at(self);
      FailureOr<Value> q = linear(mb, tb, h, self + ".query", cfg.hidden,
                                  /*bias=*/true, columns);
      if (failed(q))
        return failure();
      FailureOr<Value> k = linear(mb, tb, h, self + ".key", cfg.hidden,
                                  /*bias=*/true, columns);
      if (failed(k))
        return failure();
      FailureOr<Value> v = linear(mb, tb, h, self + ".value", cfg.hidden,
                                  /*bias=*/true, columns);
      if (failed(v))
        return failure();
      // Named temporaries keep the op order independent of the compiler's
      // argument evaluation order.
      Value qh = splitHeads(tb, *q, heads);
      Value kh = splitHeads(tb, *k, heads);
      Value vh = splitHeads(tb, *v, heads);
      Value probs;
      Value ctx = scaledDotProductAttention(tb, qh, kh, vh, extMask, scale,
                                            false, 0, &probs);
      mb.attentionMap(AttentionStack::Only, l, probs);
      attnOut = mergeHeads(tb, ctx);
    }
    FailureOr<Value> attnNorm =
        denseAddNorm(mb, layer + ".attention.output", attnOut, h, cfg);
    if (failed(attnNorm))
      return failure();
    h = *attnNorm;
    Value inter;
    {
      std::string name = layer + ".intermediate";
      TosaBuilder tb = mb.at(name);
      FailureOr<Value> d = linear(mb, tb, h, name + ".dense", cfg.intermediate,
                                  /*bias=*/true, columns);
      if (failed(d))
        return failure();
      inter = activation(tb, *d, cfg.act);
    }
    FailureOr<Value> outNorm =
        denseAddNorm(mb, layer + ".output", inter, h, cfg);
    if (failed(outNorm))
      return failure();
    h = *outNorm;
  }

  if (o.output == ImportOutput::LastHiddenState)
    return mb.finish({h});
  FailureOr<Value> emb = sentenceEmbedding(r, mb, h, mask);
  if (failed(emb))
    return failure();
  return mb.finish({*emb});
}

FailureOr<OwningOpRef<ModuleOp>> buildBert(ImportRequest &r) {
  return buildFamily(r, Family::Bert);
}

FailureOr<OwningOpRef<ModuleOp>> buildRoberta(ImportRequest &r) {
  return buildFamily(r, Family::Roberta);
}

} // namespace tfc::importer
