//===- Clip.cpp - CLIP (CLIPModel, CLIPVisionModel, CLIPTextModel) --------===//
//
// Follows transformers' modeling_clip.py (eager attention). The vision
// tower: the patch embedding (a convolution of kernel and stride
// patch_size, without bias), class_embedding before the patches, learned
// positions, pre_layrnorm, N pre-LayerNorm layers (layer_norm1, self_attn
// q/k/v/out_proj; layer_norm2, mlp fc1, activation (quick_gelu by default),
// fc2), then post_layernorm on the class token (the pooled output) and
// visual_projection. The text tower: token and position embeddings, the
// same layers with the causal limit and the padding mask, final_layer_norm,
// the state at each sequence's EOS token (the first token equal to
// eos_token_id, or with the old configs' eos_token_id 2 the first largest
// id, as transformers picks it) and text_projection.
//
// The towers take different inputs and a model library has one entry, so
// a build holds one: --part=vision (pixel_values -> image_embeds) or
// --part=text (input_ids, attention_mask -> text_embeds), each embedding
// projected and L2-normalised as CLIPModel returns them. CLIPVisionModel
// and CLIPTextModel are one tower without a projection: their default
// output is the pooled state. --output=pooled and =hidden give any tower's
// pooled and last hidden states. --attention-maps adds the tower's layers'
// probabilities (vision_attentions.L or text_attentions.L, layers named by
// number: a build holds one stack).
//
//===----------------------------------------------------------------------===//

#include "VisionTower.h"

#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "llvm/ADT/Twine.h"

#include <cmath>

using namespace mlir;
using namespace llvm;

namespace tfc::importer {

namespace {
/// Which checkpoint: both towers with their projections, or one tower.
enum class Variant { Both, VisionOnly, TextOnly };

struct TowerConfig : EncoderShape {
  ImageGeometry image;              ///< The vision tower's
  int64_t vocab = 0, positions = 0; ///< The text tower's
  int64_t eos = 49407;              ///< The text tower's
};
} // namespace

static StringRef variantName(Variant v) {
  switch (v) {
  case Variant::Both:
    return "CLIPModel";
  case Variant::VisionOnly:
    return "CLIPVisionModel";
  case Variant::TextOnly:
    return "CLIPTextModel";
  }
  llvm_unreachable("unknown CLIP variant");
}

static FailureOr<TowerConfig> readTower(const JsonConfig &c, bool vision,
                                        std::string &error) {
  FailureOr<EncoderShape> shape =
      readEncoderShape(c, 1e-5, "quick_gelu", error);
  if (failed(shape))
    return failure();
  TowerConfig cfg;
  static_cast<EncoderShape &>(cfg) = *shape;
  if (vision) {
    FailureOr<ImageGeometry> image =
        readImageGeometry(c, /*rectangular=*/false, error);
    if (failed(image))
      return failure();
    cfg.image = *image;
    return cfg;
  }
  if (failed(readPositiveInts(c,
                              {{"vocab_size", &cfg.vocab},
                               {"max_position_embeddings", &cfg.positions}},
                              error)))
    return failure();
  FailureOr<double> eos = c.number("eos_token_id", error, 49407.0);
  if (failed(eos))
    return failure();
  if (!(*eos >= 0 && *eos < 2147483648.0 && *eos == std::floor(*eos))) {
    (void)c.fieldError("eos_token_id", "expected a non-negative integer",
                       error);
    return failure();
  }
  cfg.eos = static_cast<int64_t>(*eos);
  return cfg;
}

/// The names of layer `l`'s tensors.
static EncoderLayerNames layerNames(int64_t l) {
  std::string p = "encoder.layers." + std::to_string(l) + ".";
  std::string a = p + "self_attn.";
  return {p + "layer_norm1", a + "q_proj",      a + "k_proj",  a + "v_proj",
          a + "out_proj",    p + "layer_norm2", p + "mlp.fc1", p + "mlp.fc2"};
}

/// The layers on h; `mask` and `causal` as preNormEncoderLayer takes them,
/// each layer's probabilities the map of its layer in the tower's stack
/// (the text tower's where `causal`).
static FailureOr<Value> encoder(ModelBuilder &mb, const TowerConfig &cfg,
                                Value h, Value mask, bool causal) {
  for (int64_t l = 0; l < cfg.layers; ++l) {
    Value probs;
    FailureOr<Value> next =
        preNormEncoderLayer(mb, "encoder.layers." + std::to_string(l), h,
                            layerNames(l), cfg, mask, causal, &probs);
    if (failed(next))
      return failure();
    mb.attentionMap(causal ? AttentionStack::Text : AttentionStack::Vision, l,
                    probs);
    h = *next;
  }
  return h;
}

/// CLIPVisionTransformer: the pooled state [B, hidden] (post_layernorm on
/// the class token); the encoder's output in `last`.
static FailureOr<Value> visionTower(ModelBuilder &mb, const TowerConfig &cfg,
                                    int64_t batch, Value &last) {
  Value pixels = addPixelInput(mb, batch, cfg.image);
  int64_t tokens = 1 + cfg.image.patches();
  Value h;
  {
    TosaBuilder tb = mb.at("embeddings");
    FailureOr<Value> patches =
        patchEmbedding(mb, tb, pixels, "embeddings.patch_embedding", cfg.image,
                       cfg.hidden, /*bias=*/false);
    if (failed(patches))
      return failure();
    FailureOr<Value> cls =
        mb.weight("embeddings.class_embedding", {cfg.hidden});
    if (failed(cls))
      return failure();
    FailureOr<Value> positions =
        mb.weight("embeddings.position_embedding.weight", {tokens, cfg.hidden});
    if (failed(positions))
      return failure();
    h = tb.add(prependClassToken(tb, *cls, *patches),
               tableRows(tb, *positions, 0, tokens));
    FailureOr<Value> pre = layerNorm(mb, tb, h, "pre_layrnorm", cfg.eps);
    if (failed(pre))
      return failure();
    h = *pre;
  }
  FailureOr<Value> out = encoder(mb, cfg, h, {}, /*causal=*/false);
  if (failed(out))
    return failure();
  last = *out;
  TosaBuilder tb = mb.at("post_layernorm");
  return layerNorm(mb, tb, clsPool(tb, last), "post_layernorm", cfg.eps);
}

/// Each sequence's state at its EOS token, h [B, S, H] -> [B, H]: the first
/// position whose id is `eos` (0 where none is), or with `eos` 2 the first
/// position of the largest id (CLIPTextTransformer's two rules).
static Value eosPool(TosaBuilder &tb, Value h, Value ids, int64_t eos) {
  ArrayRef<int64_t> s = cast<RankedTensorType>(h.getType()).getShape();
  OpBuilder &b = tb.builder();
  Type i32 = b.getI32Type();
  Value id = tb.cast(ids, i32);
  Value match =
      tb.equal(id, eos == 2 ? tb.reduceMax(id, 1) : tb.splat(eos, i32, 2));
  // S - j at the matches, 0 elsewhere: the largest marks the first match.
  SmallVector<int32_t> countdown;
  for (int64_t j = 0; j < s[1]; ++j)
    countdown.push_back(static_cast<int32_t>(s[1] - j));
  auto type = RankedTensorType::get({1, s[1]}, i32);
  Value down = tosa::ConstOp::create(
      b, tb.getLoc(), type,
      DenseElementsAttr::get(type, ArrayRef<int32_t>(countdown)));
  Value zero = tb.splat(0, i32, 2);
  Value best = tb.reduceMax(tb.select(match, down, zero), 1); // [B, 1]
  Value first = tb.select(tb.equal(best, zero), zero,
                          tb.sub(tb.splat(double(s[1]), i32, 2), best));
  return tb.reshape(tb.gather(h, first), {s[0], s[2]});
}

/// CLIPTextTransformer: the pooled state [B, hidden] (at the EOS tokens);
/// the final_layer_norm's output in `last`.
static FailureOr<Value> textTower(ModelBuilder &mb, const TowerConfig &cfg,
                                  const TokenInputs &tokens, int64_t seqLen,
                                  Value &last) {
  Value h;
  {
    TosaBuilder tb = mb.at("embeddings");
    FailureOr<Value> table =
        mb.weight("embeddings.token_embedding.weight", {cfg.vocab, cfg.hidden});
    if (failed(table))
      return failure();
    FailureOr<Value> positions = mb.weight(
        "embeddings.position_embedding.weight", {cfg.positions, cfg.hidden});
    if (failed(positions))
      return failure();
    Value embedded = embeddingLookup(tb, *table, tokens.ids);
    h = tb.add(embedded, tableRows(tb, *positions, 0, seqLen));
  }
  Value mask = extendedAttentionMask(mb, "attention_mask", tokens.mask);
  FailureOr<Value> out = encoder(mb, cfg, h, mask, /*causal=*/true);
  if (failed(out))
    return failure();
  TosaBuilder tb = mb.at("final_layer_norm");
  FailureOr<Value> norm = layerNorm(mb, tb, *out, "final_layer_norm", cfg.eps);
  if (failed(norm))
    return failure();
  last = *norm;
  TosaBuilder pb = mb.at("pooler");
  return eosPool(pb, last, tokens.ids, cfg.eos);
}

/// What a `variant` build for `part` cannot be; success or r.error set.
static LogicalResult checkPart(ImportRequest &r, Variant variant, bool vision) {
  const ImportOptions &o = r.options;
  StringRef name = variantName(variant);
  std::string at = r.config.path() + ": ";
  if (variant == Variant::Both && o.part == ModelPart::Whole)
    r.error = at + "CLIPModel's towers take different inputs (pixel_values; "
                   "input_ids and attention_mask) and a library has one "
                   "entry: build one with --part=vision or --part=text";
  else if (variant != Variant::Both && o.part != ModelPart::Whole &&
           vision != (o.part == ModelPart::Vision))
    r.error = (at + name + " has only the " + (vision ? "vision" : "text") +
               " tower (--part=" + (vision ? "vision" : "text") + ")")
                  .str();
  else if (o.output == ImportOutput::Logits)
    r.error = at + "--output=logits: CLIP's logits compare images with "
                   "texts; build --part=vision and --part=text and multiply "
                   "their embeddings";
  else if (o.output == ImportOutput::SentenceEmbedding &&
           variant != Variant::Both)
    r.error = (at + name +
               " has no projection: its outputs are the pooled and the last "
               "hidden states (--output=pooled|hidden)")
                  .str();
  else
    return success();
  return failure();
}

static FailureOr<OwningOpRef<ModuleOp>> buildClipVariant(ImportRequest &r,
                                                         Variant variant) {
  const ImportOptions &o = r.options;
  bool vision = variant == Variant::VisionOnly ||
                (variant == Variant::Both && o.part == ModelPart::Vision);
  if (failed(checkPart(r, variant, vision)))
    return failure();
  FailureOr<JsonConfig> sub =
      variant == Variant::Both
          ? r.config.nested(vision ? "vision_config" : "text_config", r.error)
          : FailureOr<JsonConfig>(r.config);
  if (failed(sub))
    return failure();
  FailureOr<TowerConfig> cfg = readTower(*sub, vision, r.error);
  if (failed(cfg))
    return failure();
  std::string family = (vision ? "CLIP's vision tower" : "CLIP's text tower");
  if (failed(checkEncoderRequest(r, family, vision ? &cfg->image : nullptr)))
    return failure();
  if (!vision && o.seqLen > cfg->positions) {
    r.error =
        ("--seq-len " + Twine(o.seqLen) + " exceeds max_position_embeddings (" +
         Twine(cfg->positions) + ") in " + r.config.path())
            .str();
    return failure();
  }
  StringRef tower = vision ? "vision_model." : "text_model.";
  FailureOr<std::string> prefix =
      weightPrefix(r,
                   vision ? "embeddings.patch_embedding.weight"
                          : "embeddings.token_embedding.weight",
                   tower);
  if (failed(prefix))
    return failure();

  ModelBuilder mb(r, *prefix);
  if (failed(mb.declareAttentionStacks(
          {{vision ? AttentionStack::Vision : AttentionStack::Text,
            cfg->layers}})))
    return failure();
  Value pooled, last;
  if (vision) {
    FailureOr<Value> p = visionTower(mb, *cfg, o.batch, last);
    if (failed(p))
      return failure();
    pooled = *p;
  } else {
    TokenInputs tokens = addTokenInputs(mb, o);
    FailureOr<Value> p = textTower(mb, *cfg, tokens, o.seqLen, last);
    if (failed(p))
      return failure();
    pooled = *p;
  }
  if (o.output == ImportOutput::LastHiddenState)
    return mb.finish({last}, {"last_hidden_state"});
  Type f32 = mb.getBuilder().getF32Type();
  if (o.output == ImportOutput::Pooled || variant != Variant::Both) {
    TosaBuilder tb = mb.at("pooler_output");
    return mb.finish({tb.cast(pooled, f32)}, {"pooler_output"});
  }
  // CLIPModel's projection, under the prefix the tower's is under.
  int64_t dim = 512;
  if (r.config.has("projection_dim") &&
      failed(readPositiveInts(r.config, {{"projection_dim", &dim}}, r.error)))
    return failure();
  StringRef base = *prefix;
  base.consume_back(tower);
  std::string projection =
      (base + (vision ? "visual_projection" : "text_projection")).str();
  FailureOr<Value> w = mb.weight(projection + ".weight", {dim, cfg->hidden},
                                 /*prefixed=*/false);
  if (failed(w))
    return failure();
  TosaBuilder tb = mb.at(projection);
  Value embeds = tb.cast(linearWith(tb, pooled, *w), f32);
  return mb.finish({l2Normalize(tb, embeds)},
                   {vision ? "image_embeds" : "text_embeds"});
}

FailureOr<OwningOpRef<ModuleOp>> buildClip(ImportRequest &r) {
  return buildClipVariant(r, Variant::Both);
}

FailureOr<OwningOpRef<ModuleOp>> buildClipVision(ImportRequest &r) {
  return buildClipVariant(r, Variant::VisionOnly);
}

FailureOr<OwningOpRef<ModuleOp>> buildClipText(ImportRequest &r) {
  return buildClipVariant(r, Variant::TextOnly);
}

} // namespace tfc::importer
