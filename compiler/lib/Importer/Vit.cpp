//===- Vit.cpp - ViT image encoders (ViTModel, ViTForImageClassification) -===//
//
// Follows transformers' modeling_vit.py (eager attention) on the tensors'
// names of the checkpoints it reads and writes: the patch embedding (a
// convolution of kernel and stride patch_size, with its bias), the class
// token before the patches, learned position embeddings, N pre-LayerNorm
// layers (layernorm_before, attention with biases on Q, K, V per
// qkv_bias, output.dense; layernorm_after, intermediate.dense, activation,
// output.dense), then the final layernorm. The result is the last hidden
// state [B, 1 + patches, hidden]; with --output=logits the classifier's
// logits on the class token (ViTForImageClassification), with
// --output=pooled the pooler's tanh(dense(class token)) (ViTModel's).
// --attention-maps adds the layers' probabilities (attentions.L).
//
//===----------------------------------------------------------------------===//

#include "VisionTower.h"

#include "llvm/ADT/Twine.h"

using namespace mlir;
using namespace llvm;

namespace tfc::importer {

namespace {
struct VitConfig : EncoderShape {
  ImageGeometry image;
};
} // namespace

static FailureOr<VitConfig> readConfig(const JsonConfig &c,
                                       std::string &error) {
  FailureOr<EncoderShape> shape = readEncoderShape(c, 1e-12, "gelu", error);
  if (failed(shape))
    return failure();
  VitConfig cfg;
  static_cast<EncoderShape &>(cfg) = *shape;
  FailureOr<bool> qkvBias = c.boolean("qkv_bias", error, true);
  if (failed(qkvBias))
    return failure();
  cfg.qkvBias = *qkvBias;
  FailureOr<ImageGeometry> image =
      readImageGeometry(c, /*rectangular=*/true, error);
  if (failed(image))
    return failure();
  cfg.image = *image;
  return cfg;
}

/// The classifier's label count: the entries of id2label, else num_labels,
/// else 2 (transformers' default).
static FailureOr<int64_t> labelCount(const JsonConfig &c, std::string &error) {
  if (const json::Object *labels = c.object().getObject("id2label"))
    return static_cast<int64_t>(labels->size());
  if (!c.has("num_labels"))
    return 2;
  return c.positiveInt("num_labels", error);
}

/// ViTForImageClassification's classifier on the class token of `h`: [B,
/// labels], f32.
static FailureOr<Value> classifierLogits(ImportRequest &r, ModelBuilder &mb,
                                         Value h, int64_t hidden) {
  FailureOr<int64_t> labels = labelCount(r.config, r.error);
  if (failed(labels))
    return failure();
  FailureOr<Value> w =
      mb.weight("classifier.weight", {*labels, hidden}, /*prefixed=*/false);
  if (failed(w))
    return failure();
  FailureOr<Value> b =
      mb.weight("classifier.bias", {*labels}, /*prefixed=*/false);
  if (failed(b))
    return failure();
  TosaBuilder tb = mb.at("classifier");
  Value logits = linearWith(tb, clsPool(tb, h), *w, *b);
  return tb.cast(logits, tb.builder().getF32Type());
}

/// ViTPooler: tanh(dense(class token of `h`)), [B, pooler_output_size], f32.
static FailureOr<Value> pooler(ImportRequest &r, ModelBuilder &mb, Value h,
                               int64_t hidden) {
  const JsonConfig &c = r.config;
  int64_t size = hidden;
  const json::Value *given = c.object().get("pooler_output_size");
  if (given && given->kind() != json::Value::Null &&
      failed(readPositiveInts(c, {{"pooler_output_size", &size}}, r.error)))
    return failure();
  FailureOr<std::string> act = c.string("pooler_act", r.error, "tanh");
  if (failed(act))
    return failure();
  if (*act != "tanh") {
    (void)c.fieldError(
        "pooler_act",
        "unsupported activation \"" + *act + "\" (supported: tanh)", r.error);
    return failure();
  }
  TosaBuilder tb = mb.at("pooler");
  FailureOr<Value> dense = linear(mb, tb, clsPool(tb, h), "pooler.dense", size);
  if (failed(dense))
    return failure();
  return tb.tanh(tb.cast(*dense, tb.builder().getF32Type()));
}

FailureOr<OwningOpRef<ModuleOp>> buildVit(ImportRequest &r) {
  FailureOr<VitConfig> cfgOr = readConfig(r.config, r.error);
  if (failed(cfgOr))
    return failure();
  const VitConfig &cfg = *cfgOr;
  const ImportOptions &o = r.options;
  if (failed(checkEncoderRequest(r, "ViT", &cfg.image)))
    return failure();
  if (o.output == ImportOutput::SentenceEmbedding) {
    r.error = (r.config.path() +
               ": ViT has no sentence-embedding pooling; its outputs are "
               "the last hidden state, the classifier's logits and the "
               "pooler's output (--output=hidden|logits|pooled)");
    return failure();
  }
  FailureOr<std::string> prefix =
      weightPrefix(r, "embeddings.patch_embeddings.projection.weight", "vit.");
  if (failed(prefix))
    return failure();

  ModelBuilder mb(r, *prefix);
  if (failed(mb.declareAttentionStacks({{AttentionStack::Only, cfg.layers}})))
    return failure();
  Value pixels = addPixelInput(mb, o.batch, cfg.image);
  int64_t tokens = 1 + cfg.image.patches();
  Value h;
  {
    TosaBuilder tb = mb.at("embeddings");
    FailureOr<Value> patches =
        patchEmbedding(mb, tb, pixels, "embeddings.patch_embeddings.projection",
                       cfg.image, cfg.hidden, /*bias=*/true);
    if (failed(patches))
      return failure();
    FailureOr<Value> cls =
        mb.weight("embeddings.cls_token", {1, 1, cfg.hidden});
    if (failed(cls))
      return failure();
    FailureOr<Value> positions =
        mb.weight("embeddings.position_embeddings", {1, tokens, cfg.hidden});
    if (failed(positions))
      return failure();
    h = tb.add(prependClassToken(tb, *cls, *patches), *positions);
  }
  for (int64_t l = 0; l < cfg.layers; ++l) {
    std::string p = "encoder.layer." + std::to_string(l) + ".";
    EncoderLayerNames names{
        p + "layernorm_before",        p + "attention.attention.query",
        p + "attention.attention.key", p + "attention.attention.value",
        p + "attention.output.dense",  p + "layernorm_after",
        p + "intermediate.dense",      p + "output.dense"};
    Value probs;
    FailureOr<Value> next =
        preNormEncoderLayer(mb, "encoder.layer." + std::to_string(l), h, names,
                            cfg, /*mask=*/{}, /*causal=*/false, &probs);
    if (failed(next))
      return failure();
    mb.attentionMap(AttentionStack::Only, l, probs);
    h = *next;
  }
  {
    TosaBuilder tb = mb.at("layernorm");
    FailureOr<Value> out = layerNorm(mb, tb, h, "layernorm", cfg.eps);
    if (failed(out))
      return failure();
    h = *out;
  }
  if (o.output == ImportOutput::Logits) {
    FailureOr<Value> logits = classifierLogits(r, mb, h, cfg.hidden);
    if (failed(logits))
      return failure();
    return mb.finish({*logits}, {"logits"});
  }
  if (o.output == ImportOutput::Pooled) {
    FailureOr<Value> pooled = pooler(r, mb, h, cfg.hidden);
    if (failed(pooled))
      return failure();
    return mb.finish({*pooled}, {"pooler_output"});
  }
  return mb.finish({h}, {"last_hidden_state"});
}

} // namespace tfc::importer
