//===- T5.cpp - T5, T5 v1.1 and Flan-T5 encoder-decoders ------------------===//
//
// transformers' modeling_t5.py (T5Model, T5ForConditionalGeneration, eager
// attention) on EncoderDecoder.h's interface: one token table (shared) for
// both stacks, no position embeddings; pre-norm layers (x + f(norm(x)))
// whose norms are T5LayerNorm (RMS, no mean, no bias) and a final one after
// each stack; attention without a bias in its projections and unscaled
// scores, plus a relative position bias [1, heads, Sq, Skv] that the first
// layer of each stack gathers from its relative_attention_bias table and
// every layer of the stack adds (bidirectional buckets in the encoder,
// causal ones in the decoder; cross-attention has none); the feed-forward
// of feed_forward_proj: wi, the activation and wo, or gated ("gated-ACT",
// T5 v1.1 and Flan-T5) act(wi_0 x) * wi_1 x and wo. The LM head is
// lm_head.weight where the checkpoint has it and the token table otherwise
// (as transformers ties them), the decoder's output scaled by
// d_model^-0.5 first unless config.json says otherwise
// (scale_decoder_outputs, or else tie_word_embeddings).
//
// The buckets depend only on the sizes a model is compiled for: they are a
// constant, and the bias a gather from the table, a weight bound at run
// time. With the decoder's positions given at run time (--position-ids)
// the constant holds the bucket of each distance a key may lie from a
// query, and the bias gathers each pair's distance from those rows.
//
// With --tensor-parallel each rank holds its heads' q, k, v (and wi, wi_0,
// wi_1: its d_ff features) and their rows of o (wo), and its heads'
// columns of the relative_attention_bias tables.
//
//===----------------------------------------------------------------------===//

#include "EncoderDecoder.h"

#include "Layers.h"
#include "TensorParallel.h"

#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "llvm/ADT/Twine.h"

#include <cmath>

using namespace mlir;
using namespace llvm;

namespace tfc::importer {

namespace {
struct T5Config {
  int64_t hidden = 0, headDim = 0, ffn = 0, heads = 0, vocab = 0;
  int64_t encoderLayers = 0, decoderLayers = 0;
  int64_t buckets = 32, maxDistance = 128;
  double eps = 1e-6;
  Activation act = Activation::Relu;
  bool gated = false;
  bool scaleOutputs = true; ///< the decoder's output times d_model^-0.5
};
} // namespace

/// feed_forward_proj: "ACT" or "gated-ACT" (T5Config's format), ACT a
/// transformers activation; "gated-gelu" is the tanh GELU (gelu_new).
static LogicalResult readFeedForward(const JsonConfig &c, T5Config &cfg,
                                     std::string &error) {
  FailureOr<std::string> proj = c.string("feed_forward_proj", error, "relu");
  if (failed(proj))
    return failure();
  SmallVector<StringRef> parts;
  StringRef(*proj).split(parts, '-');
  cfg.gated = parts.size() == 2 && parts[0] == "gated";
  FailureOr<Activation> act = failure();
  if (*proj == "gated-gelu")
    act = Activation::GeluTanh;
  else if (parts.size() == 1 || cfg.gated)
    act = parseActivation(parts.back());
  if (succeeded(act)) {
    cfg.act = *act;
    return success();
  }
  return c.fieldError("feed_forward_proj",
                      "unsupported \"" + *proj +
                          "\" (expected ACT or gated-ACT, ACT one of gelu, "
                          "gelu_new, gelu_pytorch_tanh, gelu_fast, relu, "
                          "silu, swish, quick_gelu)",
                      error);
}

static FailureOr<T5Config> readConfig(const JsonConfig &c, std::string &error) {
  T5Config cfg;
  if (failed(readPositiveInts(c,
                              {{"d_model", &cfg.hidden},
                               {"d_kv", &cfg.headDim},
                               {"d_ff", &cfg.ffn},
                               {"num_layers", &cfg.encoderLayers},
                               {"num_heads", &cfg.heads},
                               {"vocab_size", &cfg.vocab}},
                              error)))
    return failure();
  // num_decoder_layers: num_layers when absent or null.
  cfg.decoderLayers = cfg.encoderLayers;
  const json::Value *layers = c.object().get("num_decoder_layers");
  if (layers && layers->kind() != json::Value::Null &&
      failed(readPositiveInts(c, {{"num_decoder_layers", &cfg.decoderLayers}},
                              error)))
    return failure();
  for (auto [field, out] :
       {std::pair{"relative_attention_num_buckets", &cfg.buckets},
        std::pair{"relative_attention_max_distance", &cfg.maxDistance}})
    if (c.has(field) && failed(readPositiveInts(c, {{field, out}}, error)))
      return failure();
  // Bidirectional buckets: half per direction, half of those exact.
  if (cfg.buckets < 4) {
    (void)c.fieldError("relative_attention_num_buckets",
                       "expected at least 4 (got " + Twine(cfg.buckets) + ")",
                       error);
    return failure();
  }
  // The logarithmic buckets span the distances from the exact ones (at
  // most half the buckets) to max_distance.
  if (cfg.maxDistance <= cfg.buckets / 2) {
    (void)c.fieldError("relative_attention_max_distance",
                       "must exceed half relative_attention_num_buckets (" +
                           Twine(cfg.buckets / 2) + ")",
                       error);
    return failure();
  }
  FailureOr<double> eps = c.positiveNumber("layer_norm_epsilon", error, 1e-6);
  if (failed(eps) || failed(readFeedForward(c, cfg, error)))
    return failure();
  cfg.eps = *eps;
  // T5Config: scale_decoder_outputs when given, else whether
  // tie_word_embeddings is not false.
  FailureOr<bool> tied = c.boolean("tie_word_embeddings", error, true);
  if (failed(tied))
    return failure();
  FailureOr<bool> scale = c.boolean("scale_decoder_outputs", error, *tied);
  if (failed(scale))
    return failure();
  cfg.scaleOutputs = *scale;
  return cfg;
}

/// T5Attention._relative_position_bucket of the key's position minus the
/// query's, `relative`, in f32 as PyTorch computes it.
static int32_t relativeBucket(int64_t relative, bool bidirectional,
                              int64_t buckets, int64_t maxDistance) {
  int64_t bucket = 0;
  if (bidirectional) {
    buckets /= 2;
    if (relative > 0)
      bucket += buckets;
    relative = std::abs(relative);
  } else {
    relative = -std::min<int64_t>(relative, 0);
  }
  int64_t maxExact = buckets / 2;
  if (relative < maxExact)
    return static_cast<int32_t>(bucket + relative);
  float ratio = static_cast<float>(relative) / static_cast<float>(maxExact);
  float range = static_cast<float>(std::log(static_cast<double>(maxDistance) /
                                            static_cast<double>(maxExact)));
  float large =
      std::log(ratio) / range * static_cast<float>(buckets - maxExact);
  int64_t logBucket = maxExact + static_cast<int64_t>(large);
  return static_cast<int32_t>(bucket + std::min(logBucket, buckets - 1));
}

namespace {
/// The graph of one import.
class Graph : public EncoderDecoderGraph {
public:
  Graph(ImportRequest &r, ModelBuilder &mb, const T5Config &cfg)
      : r(r), mb(mb), cfg(cfg) {}

  /// The token table both stacks read.
  LogicalResult prepare(bool, bool) override;
  FailureOr<Value> encoder(Value ids, Value mask) override;
  FailureOr<KeysValues> crossKeysValues(Value encoded, int64_t layer) override;
  FailureOr<Value> decoder(Value ids, const DecoderInputs &in,
                           KVCache &cache) override;
  FailureOr<Value> logits(Value hidden) override;

private:
  using Sublayer = llvm::function_ref<FailureOr<Value>(Value)>;
  FailureOr<Value> norm(Value x, const std::string &name);
  /// x + f(layer_norm(x)), the norm `sublayer`.layer_norm.
  FailureOr<Value> residual(Value x, const std::string &sublayer, Sublayer f);
  FailureOr<Value> attention(const std::string &name, Value x, Value kv,
                             Value mask, bool causal, AttentionStack stack,
                             int64_t layer, KVCache *cache = nullptr,
                             const KeysValues *given = nullptr);
  AttentionLayout layout() const;
  FailureOr<Value> feedForward(const std::string &name, Value x);
  /// The stack's position bias [1, heads, queries, keys] for queries at
  /// positions first.. and keys at 0..
  FailureOr<Value> positionBias(const std::string &stack, bool bidirectional,
                                int64_t first, int64_t queries, int64_t keys);
  /// The decoder's position bias [B, heads, T, P + T] for queries at
  /// `positions` [B, T] (within [0, P + T)), the cache's keys at 0..P-1
  /// and the new ones at `positions`.
  FailureOr<Value> positionBiasAt(Value positions, int64_t past);
  /// The rows of the stack's relative_attention_bias table [buckets, heads]
  /// at the constant `buckets` [rows, cols]: [rows, cols, heads].
  FailureOr<Value> biasRows(const std::string &stack, int64_t rows,
                            int64_t cols, ArrayRef<int32_t> buckets);
  Value embed(const std::string &stack, Value ids);
  /// The heads this rank computes (all of them with one rank).
  int64_t heads() const { return cfg.heads / mb.ranks(); }

  ImportRequest &r;
  ModelBuilder &mb;
  const T5Config &cfg;
  Value table;
};
} // namespace

LogicalResult Graph::prepare(bool, bool) {
  FailureOr<Value> w = mb.weight("shared.weight", {cfg.vocab, cfg.hidden});
  if (failed(w))
    return failure();
  table = *w;
  return success();
}

FailureOr<Value> Graph::norm(Value x, const std::string &name) {
  TosaBuilder tb = mb.at(name);
  return rmsNorm(mb, tb, x, name, cfg.eps);
}

FailureOr<Value> Graph::residual(Value x, const std::string &sublayer,
                                 Sublayer f) {
  FailureOr<Value> n = norm(x, sublayer + ".layer_norm");
  if (failed(n))
    return failure();
  FailureOr<Value> y = f(*n);
  if (failed(y))
    return failure();
  TosaBuilder tb = mb.at(sublayer);
  return tb.add(x, *y);
}

AttentionLayout Graph::layout() const {
  return {"q",          "k", "v", "o", /*bias=*/false, cfg.heads * cfg.headDim,
          /*scale=*/1.0};
}

FailureOr<Value> Graph::attention(const std::string &name, Value x, Value kv,
                                  Value mask, bool causal, AttentionStack stack,
                                  int64_t layer, KVCache *cache,
                                  const KeysValues *given) {
  return projectedAttention(mb, name, x, kv, mask, cfg.heads, layout(), causal,
                            stack, layer, cache, given);
}

FailureOr<KeysValues> Graph::crossKeysValues(Value encoded, int64_t layer) {
  return projectKeysValues(
      mb, "decoder.block." + std::to_string(layer) + ".layer.1.EncDecAttention",
      encoded, cfg.heads, layout());
}

FailureOr<Value> Graph::feedForward(const std::string &name, Value x) {
  TosaBuilder tb = mb.at(name);
  auto project = [&](Value in, StringRef w, int64_t out, Parallel p) {
    return linear(mb, tb, in, name + "." + w.str(), out, /*bias=*/false, p);
  };
  const Parallel columns{Parallel::Columns};
  FailureOr<Value> gate =
      project(x, cfg.gated ? "wi_0" : "wi", cfg.ffn, columns);
  if (failed(gate))
    return failure();
  Value inner = activation(tb, *gate, cfg.act);
  if (cfg.gated) {
    FailureOr<Value> up = project(x, "wi_1", cfg.ffn, columns);
    if (failed(up))
      return failure();
    inner = tb.mul(inner, *up);
  }
  return project(inner, "wo", cfg.hidden, {Parallel::Rows});
}

static std::string biasName(const std::string &stack) {
  return stack + ".block.0.layer.0.SelfAttention.relative_attention_bias";
}

FailureOr<Value> Graph::biasRows(const std::string &stack, int64_t rows,
                                 int64_t cols, ArrayRef<int32_t> buckets) {
  std::string name = biasName(stack);
  // Per head: each rank takes its heads' columns.
  FailureOr<Value> bias = mb.weight(name + ".weight", {cfg.buckets, cfg.heads},
                                    /*prefixed=*/true, WeightSplit{1, 1});
  if (failed(bias))
    return failure();
  TosaBuilder tb = mb.at(name);
  OpBuilder &b = tb.builder();
  auto type = RankedTensorType::get({rows, cols}, b.getI32Type());
  Value ids = tosa::ConstOp::create(b, tb.getLoc(), type,
                                    DenseElementsAttr::get(type, buckets));
  return embeddingLookup(tb, *bias, ids);
}

FailureOr<Value> Graph::positionBias(const std::string &stack,
                                     bool bidirectional, int64_t first,
                                     int64_t queries, int64_t keys) {
  SmallVector<int32_t> buckets;
  buckets.reserve(queries * keys);
  for (int64_t i = 0; i < queries; ++i)
    for (int64_t j = 0; j < keys; ++j)
      buckets.push_back(relativeBucket(j - (first + i), bidirectional,
                                       cfg.buckets, cfg.maxDistance));
  FailureOr<Value> rows = biasRows(stack, queries, keys, buckets);
  if (failed(rows))
    return failure();
  TosaBuilder tb = mb.at(biasName(stack));
  return tb.reshape(tb.transpose(*rows, {2, 0, 1}),
                    {1, heads(), queries, keys});
}

FailureOr<Value> Graph::positionBiasAt(Value positions, int64_t past) {
  ArrayRef<int64_t> shape =
      cast<RankedTensorType>(positions.getType()).getShape();
  int64_t batch = shape[0], t = shape[1], keys = past + t;
  // The bias of each distance key - query, -(keys - 1)..keys - 1.
  SmallVector<int32_t> buckets;
  for (int64_t d = 1 - keys; d < keys; ++d)
    buckets.push_back(relativeBucket(d, /*bidirectional=*/false, cfg.buckets,
                                     cfg.maxDistance));
  int64_t span = 2 * keys - 1;
  FailureOr<Value> rows = biasRows("decoder", 1, span, buckets);
  if (failed(rows))
    return failure();
  TosaBuilder tb = mb.at(biasName("decoder"));
  OpBuilder &b = tb.builder();
  Type f32 = b.getF32Type();
  // Each pair's row, distance + keys - 1, in f32 (exact below 2^24).
  Value query = tb.cast(positions, f32);
  Value key = query;
  if (past > 0) {
    SmallVector<float> slots;
    for (int64_t i = 0; i < batch; ++i)
      for (int64_t j = 0; j < past; ++j)
        slots.push_back(static_cast<float>(j));
    auto type = RankedTensorType::get({batch, past}, f32);
    Value cached = tosa::ConstOp::create(
        b, tb.getLoc(), type, DenseElementsAttr::get(type, ArrayRef(slots)));
    key = tb.concat({cached, query}, 1);
  }
  Value row = tb.add(tb.sub(tb.reshape(key, {batch, 1, keys}),
                            tb.reshape(query, {batch, t, 1})),
                     tb.splat(static_cast<double>(keys - 1), f32, 3));
  Value bias = embeddingLookup(tb, tb.reshape(*rows, {span, heads()}),
                               tb.reshape(row, {batch, t * keys}));
  return tb.transpose(tb.reshape(bias, {batch, t, keys, heads()}),
                      {0, 3, 1, 2});
}

Value Graph::embed(const std::string &stack, Value ids) {
  TosaBuilder tb = mb.at(stack + ".embed_tokens");
  return embeddingLookup(tb, table, ids);
}

FailureOr<Value> Graph::encoder(Value ids, Value mask) {
  int64_t s = cast<RankedTensorType>(ids.getType()).getDimSize(1);
  FailureOr<Value> bias = positionBias("encoder", true, 0, s, s);
  if (failed(bias))
    return failure();
  // The bias and the padding mask, one additive mask [B, heads, S, S].
  Value biasMask = mb.at("encoder.block.0.layer.0").add(*bias, mask);
  FailureOr<Value> h = embed("encoder", ids);
  for (int64_t l = 0; l < cfg.encoderLayers && succeeded(h); ++l) {
    std::string block = "encoder.block." + std::to_string(l);
    h = residual(*h, block + ".layer.0", [&](Value x) {
      return attention(block + ".layer.0.SelfAttention", x, x, biasMask,
                       /*causal=*/false, AttentionStack::Encoder, l);
    });
    if (succeeded(h))
      h = residual(*h, block + ".layer.1", [&](Value x) {
        return feedForward(block + ".layer.1.DenseReluDense", x);
      });
  }
  if (failed(h))
    return failure();
  return norm(*h, "encoder.final_layer_norm");
}

FailureOr<Value> Graph::decoder(Value ids, const DecoderInputs &in,
                                KVCache &cache) {
  int64_t t = cast<RankedTensorType>(ids.getType()).getDimSize(1);
  int64_t past = r.options.pastLen;
  // The new tokens' queries at positions past.., or at in.positions,
  // against every key; and the self-attention mask where given.
  FailureOr<Value> bias =
      in.positions ? positionBiasAt(in.positions, past)
                   : positionBias("decoder", false, past, t, past + t);
  if (failed(bias))
    return failure();
  Value selfMask = *bias;
  if (in.selfMask)
    selfMask = mb.at("decoder.block.0.layer.0").add(*bias, in.selfMask);
  FailureOr<Value> h = embed("decoder", ids);
  for (int64_t l = 0; l < cfg.decoderLayers && succeeded(h); ++l) {
    std::string block = "decoder.block." + std::to_string(l);
    h = residual(*h, block + ".layer.0", [&](Value x) {
      return attention(block + ".layer.0.SelfAttention", x, x, selfMask,
                       /*causal=*/true, AttentionStack::Decoder, l, &cache);
    });
    if (succeeded(h))
      h = residual(*h, block + ".layer.1", [&](Value x) {
        return attention(block + ".layer.1.EncDecAttention", x, in.encoded,
                         in.encoderMask, /*causal=*/false,
                         AttentionStack::Cross, l, nullptr,
                         in.cross.empty() ? nullptr : &in.cross[l]);
      });
    if (succeeded(h))
      h = residual(*h, block + ".layer.2", [&](Value x) {
        return feedForward(block + ".layer.2.DenseReluDense", x);
      });
  }
  if (failed(h))
    return failure();
  return norm(*h, "decoder.final_layer_norm");
}

FailureOr<Value> Graph::logits(Value hidden) {
  Value w = table;
  if (r.weights.lookup("lm_head.weight")) {
    FailureOr<Value> head = mb.weight("lm_head.weight", {cfg.vocab, cfg.hidden},
                                      /*prefixed=*/false);
    if (failed(head))
      return failure();
    w = *head;
  }
  TosaBuilder tb = mb.at("lm_head");
  if (cfg.scaleOutputs)
    hidden = timesScalar(tb, hidden,
                         1.0 / std::sqrt(static_cast<double>(cfg.hidden)));
  return tb.cast(linearWith(tb, hidden, w), tb.builder().getF32Type());
}

FailureOr<OwningOpRef<ModuleOp>> buildT5(ImportRequest &r) {
  FailureOr<T5Config> cfg = readConfig(r.config, r.error);
  if (failed(cfg) ||
      failed(checkEncoderDecoderRequest(r, "T5", /*positions=*/0)))
    return failure();
  FailureOr<std::string> prefix = weightPrefix(r, "shared.weight", "model.");
  if (failed(prefix))
    return failure();
  ModelBuilder mb(r, *prefix);
  if (failed(mb.declareEncoderDecoderStacks(r.options.part, cfg->encoderLayers,
                                            cfg->decoderLayers)) ||
      failed(checkTensorParallel(
          r, mb, {{"num_heads", cfg->heads}, {"d_ff", cfg->ffn}})))
    return failure();
  Graph graph(r, mb, *cfg);
  return runEncoderDecoder(mb, r.options, graph, cfg->hidden,
                           cfg->decoderLayers, cfg->heads, cfg->headDim);
}

} // namespace tfc::importer
