//===- EncoderDecoder.cpp - Marian, BART and mBART encoder-decoders -------===//

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
/// One stack's sizes.
struct Stack {
  int64_t layers = 0, heads = 0, ffn = 0;
};

struct EncoderDecoderConfig {
  int64_t hidden = 0, vocab = 0, decoderVocab = 0, positions = 0;
  Stack encoder, decoder;
  Activation act = Activation::GeluErf;
  double embedScale = 1.0;
  bool shared = true; ///< one token table for both stacks
  bool tied = true;   ///< the LM head reads the decoder's token table
};
} // namespace

/// nn.LayerNorm's default, which every layer norm of the three families
/// keeps.
static constexpr double kLayerNormEps = 1e-5;

static FailureOr<EncoderDecoderConfig>
readConfig(const JsonConfig &c, const EncoderDecoderStyle &style,
           std::string &error) {
  EncoderDecoderConfig cfg;
  if (failed(readPositiveInts(c,
                              {{"d_model", &cfg.hidden},
                               {"encoder_layers", &cfg.encoder.layers},
                               {"encoder_attention_heads", &cfg.encoder.heads},
                               {"encoder_ffn_dim", &cfg.encoder.ffn},
                               {"decoder_layers", &cfg.decoder.layers},
                               {"decoder_attention_heads", &cfg.decoder.heads},
                               {"decoder_ffn_dim", &cfg.decoder.ffn},
                               {"vocab_size", &cfg.vocab},
                               {"max_position_embeddings", &cfg.positions}},
                              error)))
    return failure();
  for (auto [field, heads] :
       {std::pair{"encoder_attention_heads", cfg.encoder.heads},
        std::pair{"decoder_attention_heads", cfg.decoder.heads}})
    if (cfg.hidden % heads != 0) {
      (void)c.fieldError(
          field, "does not divide d_model (" + Twine(cfg.hidden) + ")", error);
      return failure();
    }
  FailureOr<Activation> act =
      readActivation(c, "activation_function", "gelu", error);
  FailureOr<bool> scale = c.boolean("scale_embedding", error, false);
  FailureOr<bool> tied = c.boolean("tie_word_embeddings", error, true);
  if (failed(act) || failed(scale) || failed(tied))
    return failure();
  cfg.act = *act;
  cfg.embedScale = *scale ? std::sqrt(static_cast<double>(cfg.hidden)) : 1.0;
  cfg.tied = *tied;
  cfg.decoderVocab = cfg.vocab;
  if (style.optionalSharing) {
    FailureOr<bool> shared =
        c.boolean("share_encoder_decoder_embeddings", error, true);
    if (failed(shared))
      return failure();
    cfg.shared = *shared;
    // MarianConfig: decoder_vocab_size, vocab_size when absent or null.
    const json::Value *v = c.object().get("decoder_vocab_size");
    if (!cfg.shared && v && v->kind() != json::Value::Null &&
        failed(readPositiveInts(c, {{"decoder_vocab_size", &cfg.decoderVocab}},
                                error)))
      return failure();
  }
  return cfg;
}

namespace {
/// The graph of one import.
class Graph : public EncoderDecoderGraph {
public:
  Graph(ImportRequest &r, ModelBuilder &mb, const EncoderDecoderStyle &style,
        const EncoderDecoderConfig &cfg)
      : r(r), mb(mb), style(style), cfg(cfg) {}

  /// The token tables: the shared one, or the encoder's and the decoder's.
  LogicalResult prepare(bool encoder, bool decoder) override;
  FailureOr<Value> encoder(Value ids, Value mask) override;
  FailureOr<KeysValues> crossKeysValues(Value encoded, int64_t layer) override;
  FailureOr<Value> decoder(Value ids, const DecoderInputs &in,
                           KVCache &cache) override;
  FailureOr<Value> logits(Value hidden) override;

private:
  using Sublayer = llvm::function_ref<FailureOr<Value>(Value)>;
  FailureOr<Value> norm(Value x, const std::string &name);
  FailureOr<Value> residual(Value x, const std::string &normName,
                            Sublayer sublayer);
  /// Layer `layer`'s attention of `stack` (its map's, and with `cache`
  /// its keys' and values' place).
  FailureOr<Value> attention(const std::string &name, Value x, Value kv,
                             Value mask, int64_t heads, bool causal,
                             AttentionStack stack, int64_t layer,
                             KVCache *cache = nullptr,
                             const KeysValues *given = nullptr);
  AttentionLayout layout(int64_t heads) const;
  FailureOr<Value> feedForward(const std::string &layer, Value x, int64_t ffn);
  /// The stack's token embeddings of ids [B, count] plus those of their
  /// positions: first.., or with `positions` [B, count] theirs (below
  /// first + count).
  FailureOr<Value> embed(const std::string &stack, Value ids, Value table,
                         int64_t first, Value positions = {});
  Value sinusoids(TosaBuilder &tb, int64_t first, int64_t count);

  ImportRequest &r;
  ModelBuilder &mb;
  const EncoderDecoderStyle &style;
  const EncoderDecoderConfig &cfg;
  Value encoderTable, decoderTable;
};
} // namespace

LogicalResult Graph::prepare(bool encoder, bool decoder) {
  auto load = [&](StringRef name, int64_t rows, Value &into) {
    FailureOr<Value> w = mb.weight(name, {rows, cfg.hidden});
    into = succeeded(w) ? *w : Value();
    return success(succeeded(w));
  };
  if (cfg.shared) {
    if (failed(load("shared.weight", cfg.vocab, encoderTable)))
      return failure();
    decoderTable = encoderTable;
    return success();
  }
  return success((!encoder || succeeded(load("encoder.embed_tokens.weight",
                                             cfg.vocab, encoderTable))) &&
                 (!decoder || succeeded(load("decoder.embed_tokens.weight",
                                             cfg.decoderVocab, decoderTable))));
}

FailureOr<Value> Graph::norm(Value x, const std::string &name) {
  TosaBuilder tb = mb.at(name);
  return layerNorm(mb, tb, x, name, kLayerNormEps);
}

FailureOr<Value> Graph::residual(Value x, const std::string &normName,
                                 Sublayer sublayer) {
  if (style.preNorm) {
    FailureOr<Value> n = norm(x, normName);
    if (failed(n))
      return failure();
    FailureOr<Value> y = sublayer(*n);
    if (failed(y))
      return failure();
    TosaBuilder tb = mb.at(normName);
    return tb.add(x, *y);
  }
  FailureOr<Value> y = sublayer(x);
  if (failed(y))
    return failure();
  TosaBuilder tb = mb.at(normName);
  return norm(tb.add(x, *y), normName);
}

/// The attention `name`'s k and v projections of kv, not yet split into
/// heads (the rank's heads: column-parallel).
static FailureOr<KeysValues> projections(ModelBuilder &mb, TosaBuilder &tb,
                                         const std::string &name, Value kv,
                                         const AttentionLayout &l) {
  const Parallel columns{Parallel::Columns};
  FailureOr<Value> k =
      linear(mb, tb, kv, name + "." + l.k.str(), l.inner, l.bias, columns);
  if (failed(k))
    return failure();
  FailureOr<Value> v =
      linear(mb, tb, kv, name + "." + l.v.str(), l.inner, l.bias, columns);
  if (failed(v))
    return failure();
  return KeysValues{*k, *v};
}

FailureOr<KeysValues> projectKeysValues(ModelBuilder &mb,
                                        const std::string &name, Value kv,
                                        int64_t heads,
                                        const AttentionLayout &l) {
  TosaBuilder tb = mb.at(name);
  FailureOr<KeysValues> p = projections(mb, tb, name, kv, l);
  if (failed(p))
    return failure();
  int64_t local = heads / mb.ranks();
  Value k = splitHeads(tb, p->first, local);
  return KeysValues{k, splitHeads(tb, p->second, local)};
}

FailureOr<Value> projectedAttention(ModelBuilder &mb, const std::string &name,
                                    Value x, Value kv, Value mask,
                                    int64_t heads, const AttentionLayout &l,
                                    bool causal, AttentionStack stack,
                                    int64_t layer, KVCache *cache,
                                    const KeysValues *given) {
  TosaBuilder tb = mb.at(name);
  auto project = [&](Value in, StringRef proj, int64_t out, Parallel p) {
    return linear(mb, tb, in, name + "." + proj.str(), out, l.bias, p);
  };
  FailureOr<Value> q = project(x, l.q, l.inner, {Parallel::Columns});
  if (failed(q))
    return failure();
  FailureOr<KeysValues> projected = KeysValues();
  if (!given)
    projected = projections(mb, tb, name, kv, l);
  if (failed(projected))
    return failure();
  // Named temporaries keep the op order independent of the compiler's
  // argument evaluation order.
  int64_t local = heads / mb.ranks();
  Value qh = splitHeads(tb, *q, local);
  Value kh = given ? given->first : splitHeads(tb, projected->first, local);
  Value vh = given ? given->second : splitHeads(tb, projected->second, local);
  if (cache)
    std::tie(kh, vh) = cache->append(tb, layer, kh, vh);
  Value probs;
  Value ctx = scaledDotProductAttention(tb, qh, kh, vh, mask, l.scale, causal,
                                        /*softcap=*/0, &probs);
  mb.attentionMap(stack, layer, probs);
  return project(mergeHeads(tb, ctx), l.out,
                 cast<RankedTensorType>(x.getType()).getShape().back(),
                 {Parallel::Rows});
}

Value timesScalar(TosaBuilder &tb, Value x, double factor) {
  Type f32 = tb.builder().getF32Type();
  auto t = cast<RankedTensorType>(x.getType());
  Value scaled = tb.mul(tb.cast(x, f32), tb.splat(factor, f32, t.getRank()));
  return tb.cast(scaled, t.getElementType());
}

AttentionLayout Graph::layout(int64_t heads) const {
  return {"q_proj",
          "k_proj",
          "v_proj",
          "out_proj",
          /*bias=*/true,
          cfg.hidden,
          1.0 / std::sqrt(static_cast<double>(cfg.hidden / heads))};
}

FailureOr<Value> Graph::attention(const std::string &name, Value x, Value kv,
                                  Value mask, int64_t heads, bool causal,
                                  AttentionStack stack, int64_t layer,
                                  KVCache *cache, const KeysValues *given) {
  return projectedAttention(mb, name, x, kv, mask, heads, layout(heads), causal,
                            stack, layer, cache, given);
}

FailureOr<KeysValues> Graph::crossKeysValues(Value encoded, int64_t layer) {
  return projectKeysValues(
      mb, "decoder.layers." + std::to_string(layer) + ".encoder_attn", encoded,
      cfg.decoder.heads, layout(cfg.decoder.heads));
}

FailureOr<Value> Graph::feedForward(const std::string &layer, Value x,
                                    int64_t ffn) {
  TosaBuilder tb = mb.at(layer + ".fc1");
  FailureOr<Value> up = linear(mb, tb, x, layer + ".fc1", ffn, /*bias=*/true,
                               {Parallel::Columns});
  if (failed(up))
    return failure();
  return linear(mb, tb, activation(tb, *up, cfg.act), layer + ".fc2",
                cfg.hidden, /*bias=*/true, {Parallel::Rows});
}

Value Graph::sinusoids(TosaBuilder &tb, int64_t first, int64_t count) {
  // MarianSinusoidalPositionalEmbedding.create_weight: the angle of
  // position p and feature pair i is p / 10000^(2i / d) in float64; sin of
  // pairs 0.. in features [0, half), cos of pairs 0.. in [half, d), half =
  // ceil(d / 2); the table rounded to f32.
  int64_t d = cfg.hidden, half = (d + 1) / 2;
  SmallVector<float> values;
  values.reserve(count * d);
  for (int64_t p = first; p < first + count; ++p)
    for (int64_t j = 0; j < d; ++j) {
      int64_t pair = j < half ? j : j - half;
      double angle = static_cast<double>(p) /
                     std::pow(10000.0, static_cast<double>(2 * pair) /
                                           static_cast<double>(d));
      values.push_back(
          static_cast<float>(j < half ? std::sin(angle) : std::cos(angle)));
    }
  OpBuilder &b = tb.builder();
  auto type = RankedTensorType::get({1, count, d}, b.getF32Type());
  Value table = tosa::ConstOp::create(
      b, tb.getLoc(), type, DenseElementsAttr::get(type, ArrayRef(values)));
  return tb.cast(table, mb.getComputeType());
}

FailureOr<Value> Graph::embed(const std::string &stack, Value ids, Value table,
                              int64_t first, Value positions) {
  TosaBuilder tb = mb.at(stack + ".embed_tokens");
  int64_t count = cast<RankedTensorType>(ids.getType()).getDimSize(1);
  Value h = embeddingLookup(tb, table, ids);
  if (cfg.embedScale != 1.0)
    h = timesScalar(tb, h, cfg.embedScale);
  // The rows of positions first.., or of every position `positions` may
  // name, gathered per token.
  int64_t from = positions ? 0 : first,
          rows = positions ? first + count : count;
  Value place;
  if (style.sinusoidal) {
    place = sinusoids(tb, from, rows);
  } else {
    FailureOr<Value> learned = mb.weight(stack + ".embed_positions.weight",
                                         {cfg.positions + 2, cfg.hidden});
    if (failed(learned))
      return failure();
    place = tableRows(tb, *learned, from + 2, rows);
  }
  if (positions)
    place =
        embeddingLookup(tb, tb.reshape(place, {rows, cfg.hidden}), positions);
  h = tb.add(h, place);
  if (!style.layerNormEmbedding)
    return h;
  return norm(h, stack + ".layernorm_embedding");
}

FailureOr<Value> Graph::encoder(Value ids, Value mask) {
  FailureOr<Value> h = embed("encoder", ids, encoderTable, 0);
  for (int64_t l = 0; l < cfg.encoder.layers && succeeded(h); ++l) {
    std::string layer = "encoder.layers." + std::to_string(l);
    h = residual(*h, layer + ".self_attn_layer_norm", [&](Value x) {
      return attention(layer + ".self_attn", x, x, mask, cfg.encoder.heads,
                       /*causal=*/false, AttentionStack::Encoder, l);
    });
    if (succeeded(h))
      h = residual(*h, layer + ".final_layer_norm", [&](Value x) {
        return feedForward(layer, x, cfg.encoder.ffn);
      });
  }
  if (failed(h) || !style.preNorm)
    return h;
  return norm(*h, "encoder.layer_norm");
}

FailureOr<Value> Graph::decoder(Value ids, const DecoderInputs &in,
                                KVCache &cache) {
  FailureOr<Value> h =
      embed("decoder", ids, decoderTable, r.options.pastLen, in.positions);
  for (int64_t l = 0; l < cfg.decoder.layers && succeeded(h); ++l) {
    std::string layer = "decoder.layers." + std::to_string(l);
    h = residual(*h, layer + ".self_attn_layer_norm", [&](Value x) {
      return attention(layer + ".self_attn", x, x, in.selfMask,
                       cfg.decoder.heads, /*causal=*/true,
                       AttentionStack::Decoder, l, &cache);
    });
    if (succeeded(h))
      h = residual(*h, layer + ".encoder_attn_layer_norm", [&](Value x) {
        return attention(layer + ".encoder_attn", x, in.encoded, in.encoderMask,
                         cfg.decoder.heads, /*causal=*/false,
                         AttentionStack::Cross, l, nullptr,
                         in.cross.empty() ? nullptr : &in.cross[l]);
      });
    if (succeeded(h))
      h = residual(*h, layer + ".final_layer_norm", [&](Value x) {
        return feedForward(layer, x, cfg.decoder.ffn);
      });
  }
  if (failed(h) || !style.preNorm)
    return h;
  return norm(*h, "decoder.layer_norm");
}

FailureOr<Value> Graph::logits(Value hidden) {
  Value w = decoderTable;
  if (!cfg.tied) {
    FailureOr<Value> head =
        mb.weight("lm_head.weight", {cfg.decoderVocab, cfg.hidden},
                  /*prefixed=*/false);
    if (failed(head))
      return failure();
    w = *head;
  }
  TosaBuilder tb = mb.at("lm_head");
  // final_logits_bias, a buffer of the ...ForConditionalGeneration models
  // (zero where a checkpoint has none), added to the head's output in the
  // compute type.
  Value bias;
  if (r.weights.lookup("final_logits_bias")) {
    FailureOr<Value> b = mb.weight("final_logits_bias", {1, cfg.decoderVocab},
                                   /*prefixed=*/false);
    if (failed(b))
      return failure();
    bias = tb.reshape(*b, {cfg.decoderVocab});
  }
  return tb.cast(linearWith(tb, hidden, w, bias), tb.builder().getF32Type());
}

LogicalResult checkEncoderDecoderRequest(ImportRequest &r, StringRef family,
                                         int64_t positions) {
  const ImportOptions &o = r.options;
  std::string what = (r.config.path() + ": " + family).str();
  auto fail = [&](const Twine &message) {
    r.error = message.str();
    return failure();
  };
  bool encoderOnly = o.part == ModelPart::Encoder;
  if (o.output == ImportOutput::SentenceEmbedding)
    return fail(what + " is an encoder-decoder and has no sentence-embedding "
                       "pooling; its output is the decoder's last hidden "
                       "state or the logits (--output=hidden|logits)");
  if (o.tokenTypeIds)
    return fail(what + " takes no token_type_ids");
  if (o.positionIds && o.part != ModelPart::Decoder)
    return fail("--position-ids: " + what +
                "'s decoder_position_ids and decoder_attention_mask are "
                "inputs of the decoder part (--part=decoder)");
  if (o.crossKV && o.part == ModelPart::Whole)
    return fail("--cross-kv: the encoder part (--part=encoder) returns the "
                "cross-attention keys and values and the decoder part "
                "(--part=decoder) takes them; the whole model has neither");
  if (encoderOnly && o.output == ImportOutput::Logits)
    return fail("--output=logits: the encoder part (--part=encoder) returns "
                "encoder_hidden_states; the logits are the decoder's");
  if (encoderOnly && o.decoderSeqLen)
    return fail("--decoder-seq-len: the encoder part (--part=encoder) has no "
                "decoder tokens");
  if (!encoderOnly && !o.decoderSeqLen)
    return fail("--decoder-seq-len: missing: " + what +
                " is an encoder-decoder; give the decoder's token count "
                "(decoder_input_ids [B, T])");
  if (o.kvCache && o.part != ModelPart::Decoder)
    return fail("--kv-cache, --past-len: " + what +
                "'s KV cache is the decoder's; build the decoder part "
                "(--part=decoder)");
  if (positions <= 0)
    return success();
  if (!encoderOnly && o.pastLen + o.decoderSeqLen > positions)
    return fail((o.pastLen ? "--past-len " + Twine(o.pastLen) + " + " : "") +
                "--decoder-seq-len " + Twine(o.decoderSeqLen) +
                " exceeds max_position_embeddings (" + Twine(positions) +
                ") in " + r.config.path());
  if (o.part != ModelPart::Decoder && o.seqLen > positions)
    return fail("--seq-len " + Twine(o.seqLen) +
                " exceeds max_position_embeddings (" + Twine(positions) +
                ") in " + r.config.path());
  return success();
}

FailureOr<OwningOpRef<ModuleOp>>
buildEncoderDecoder(ImportRequest &r, const EncoderDecoderStyle &style) {
  FailureOr<EncoderDecoderConfig> cfgOr = readConfig(r.config, style, r.error);
  if (failed(cfgOr))
    return failure();
  const EncoderDecoderConfig &cfg = *cfgOr;
  if (failed(checkEncoderDecoderRequest(r, style.family, cfg.positions)))
    return failure();
  FailureOr<std::string> prefix = weightPrefix(
      r, cfg.shared ? "shared.weight" : "encoder.embed_tokens.weight",
      "model.");
  if (failed(prefix))
    return failure();

  ModelBuilder mb(r, *prefix);
  if (failed(mb.declareEncoderDecoderStacks(r.options.part, cfg.encoder.layers,
                                            cfg.decoder.layers)) ||
      failed(
          checkTensorParallel(r, mb,
                              {{"encoder_attention_heads", cfg.encoder.heads},
                               {"decoder_attention_heads", cfg.decoder.heads},
                               {"encoder_ffn_dim", cfg.encoder.ffn},
                               {"decoder_ffn_dim", cfg.decoder.ffn}})))
    return failure();
  Graph graph(r, mb, style, cfg);
  return runEncoderDecoder(mb, r.options, graph, cfg.hidden, cfg.decoder.layers,
                           cfg.decoder.heads, cfg.hidden / cfg.decoder.heads);
}

FailureOr<OwningOpRef<ModuleOp>>
runEncoderDecoder(ModelBuilder &mb, const ImportOptions &o,
                  EncoderDecoderGraph &graph, int64_t hidden,
                  int64_t decoderLayers, int64_t heads, int64_t headDim) {
  Type i64 = mb.getBuilder().getI64Type();
  auto tokens = [&](int64_t count) {
    return RankedTensorType::get({o.batch, count}, i64);
  };
  auto crossName = [](int64_t l, StringRef which) {
    return "cross_key_values." + std::to_string(l) + "." + which.str();
  };
  // A tensor-parallel build's cross keys and values and KV cache are its
  // rank's heads (axis 1), as a decoder's cache is.
  int64_t localHeads = heads / mb.ranks();
  auto splitKV = [&](const KeysValues &kv) {
    mb.splitAlong(kv.first, 1);
    mb.splitAlong(kv.second, 1);
  };
  Value ids, decoderIds;
  DecoderInputs in;
  if (o.part == ModelPart::Decoder) {
    decoderIds = mb.addInput("decoder_input_ids", tokens(o.decoderSeqLen));
    auto type = [&](ArrayRef<int64_t> shape) {
      return RankedTensorType::get(shape, mb.getComputeType());
    };
    if (!o.crossKV)
      in.encoded = mb.addInput("encoder_hidden_states",
                               type({o.batch, o.seqLen, hidden}));
    for (int64_t l = 0; o.crossKV && l < decoderLayers; ++l) {
      Value k = mb.addInput(crossName(l, "key"),
                            type({o.batch, localHeads, o.seqLen, headDim}));
      in.cross.push_back(
          {k, mb.addInput(crossName(l, "value"),
                          type({o.batch, localHeads, o.seqLen, headDim}))});
      splitKV(in.cross.back());
    }
  } else {
    ids = mb.addInput("input_ids", tokens(o.seqLen));
  }
  in.encoderMask = extendedAttentionMask(
      mb, "attention_mask", mb.addInput("attention_mask", tokens(o.seqLen)));
  if (o.part == ModelPart::Whole)
    decoderIds = mb.addInput("decoder_input_ids", tokens(o.decoderSeqLen));
  if (o.positionIds) {
    // The cache's slots and the new tokens; positions outside them are
    // refused before a run (the manifest's bounds), the clamp keeps the
    // gathers in range all the same.
    int64_t keys = o.pastLen + o.decoderSeqLen;
    in.selfMask = extendedAttentionMask(
        mb, "decoder_attention_mask",
        mb.addInput("decoder_attention_mask", tokens(keys)));
    TosaBuilder tb = mb.at("decoder_position_ids");
    in.positions =
        tb.clampInt(mb.addInput("decoder_position_ids", tokens(o.decoderSeqLen),
                                std::make_pair(int64_t(0), keys)),
                    0, keys - 1);
  }
  KVCache cache(mb, o, decoderLayers, localHeads, headDim);

  if (failed(graph.prepare(o.part != ModelPart::Decoder,
                           o.part != ModelPart::Encoder)))
    return failure();
  if (ids) {
    FailureOr<Value> e = graph.encoder(ids, in.encoderMask);
    if (failed(e))
      return failure();
    in.encoded = *e;
  }
  if (o.part == ModelPart::Encoder) {
    SmallVector<Value> results = {in.encoded};
    SmallVector<std::string> names = {"encoder_hidden_states"};
    for (int64_t l = 0; o.crossKV && l < decoderLayers; ++l) {
      FailureOr<KeysValues> kv = graph.crossKeysValues(in.encoded, l);
      if (failed(kv))
        return failure();
      results.append({kv->first, kv->second});
      names.append({crossName(l, "key"), crossName(l, "value")});
      splitKV(*kv);
    }
    return mb.finish(results, names);
  }
  FailureOr<Value> h = graph.decoder(decoderIds, in, cache);
  if (failed(h))
    return failure();
  if (o.output != ImportOutput::Logits)
    return cache.finish(mb, *h, "last_hidden_state");
  FailureOr<Value> logits = graph.logits(*h);
  if (failed(logits))
    return failure();
  return cache.finish(mb, *logits, "logits");
}

} // namespace tfc::importer
