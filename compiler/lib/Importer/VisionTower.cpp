//===- VisionTower.cpp - What ViT and CLIP share --------------------------===//

#include "VisionTower.h"

#include "llvm/ADT/Twine.h"

#include <cmath>

using namespace mlir;
using namespace llvm;

namespace tfc::importer {

std::string ImageGeometry::sizeText() const {
  return std::to_string(height) + "x" + std::to_string(width);
}

/// The size `field` of `config`: a positive integer (both sides), or with
/// `rectangular` a list [height, width] of them.
static LogicalResult readSize(const JsonConfig &config, StringRef field,
                              bool rectangular, int64_t &height, int64_t &width,
                              std::string &error) {
  const json::Array *list = config.object().getArray(field);
  if (!list || !rectangular) {
    FailureOr<int64_t> side = config.positiveInt(field, error);
    if (failed(side))
      return failure();
    height = width = *side;
    return success();
  }
  std::optional<int64_t> h, w;
  if (list->size() == 2) {
    h = (*list)[0].getAsInteger();
    w = (*list)[1].getAsInteger();
  }
  if (!h || !w || *h <= 0 || *w <= 0)
    return config.fieldError(
        field, "expected a positive integer or a list [height, width] of them",
        error);
  height = *h;
  width = *w;
  return success();
}

FailureOr<ImageGeometry>
readImageGeometry(const JsonConfig &c, bool rectangular, std::string &error) {
  ImageGeometry g;
  if (failed(
          readSize(c, "image_size", rectangular, g.height, g.width, error)) ||
      failed(readSize(c, "patch_size", rectangular, g.patchHeight, g.patchWidth,
                      error)))
    return failure();
  if (c.has("num_channels") &&
      failed(readPositiveInts(c, {{"num_channels", &g.channels}}, error)))
    return failure();
  if (g.height % g.patchHeight || g.width % g.patchWidth) {
    (void)c.fieldError("image_size",
                       g.sizeText() + " is not a whole number of patches of " +
                           std::to_string(g.patchHeight) + "x" +
                           std::to_string(g.patchWidth) + " (patch_size)",
                       error);
    return failure();
  }
  return g;
}

FailureOr<EncoderShape> readEncoderShape(const JsonConfig &c, double eps,
                                         StringRef act, std::string &error) {
  EncoderShape shape;
  if (failed(readPositiveInts(c,
                              {{"hidden_size", &shape.hidden},
                               {"num_hidden_layers", &shape.layers},
                               {"num_attention_heads", &shape.heads},
                               {"intermediate_size", &shape.intermediate}},
                              error)))
    return failure();
  if (shape.hidden % shape.heads != 0) {
    (void)c.fieldError(
        "num_attention_heads",
        "does not divide hidden_size (" + Twine(shape.hidden) + ")", error);
    return failure();
  }
  FailureOr<double> epsilon = c.positiveNumber("layer_norm_eps", error, eps);
  if (failed(epsilon))
    return failure();
  shape.eps = *epsilon;
  FailureOr<Activation> activation =
      readActivation(c, "hidden_act", act, error);
  if (failed(activation))
    return failure();
  shape.act = *activation;
  return shape;
}

LogicalResult checkEncoderRequest(ImportRequest &r, StringRef family,
                                  const ImageGeometry *image) {
  const ImportOptions &o = r.options;
  if (o.kvCache || o.positionIds)
    r.error = (r.config.path() + ": " + family +
               " is an encoder and has no KV cache (--kv-cache, "
               "--past-len, --position-ids are for decoders)")
                  .str();
  else if (o.tokenTypeIds)
    r.error =
        (r.config.path() + ": " + family + " takes no token_type_ids").str();
  else if (image && o.seqLenGiven)
    r.error = ("--seq-len: " + family + " takes images, pixel_values [B, " +
               Twine(image->channels) + ", " + Twine(image->height) + ", " +
               Twine(image->width) + "] (image_size in " + r.config.path() +
               "), not tokens: give --batch only")
                  .str();
  else
    return success();
  return failure();
}

Value addPixelInput(ModelBuilder &mb, int64_t batch, const ImageGeometry &g) {
  auto type = RankedTensorType::get({batch, g.channels, g.height, g.width},
                                    mb.getBuilder().getF32Type());
  Value pixels = mb.addInput("pixel_values", type);
  TosaBuilder tb = mb.at("pixel_values");
  return tb.cast(pixels, mb.getComputeType());
}

FailureOr<Value> patchEmbedding(ModelBuilder &mb, TosaBuilder &tb, Value pixels,
                                StringRef name, const ImageGeometry &g,
                                int64_t hidden, bool bias) {
  int64_t b = cast<RankedTensorType>(pixels.getType()).getDimSize(0);
  int64_t rows = g.height / g.patchHeight, cols = g.width / g.patchWidth;
  int64_t k = g.channels * g.patchHeight * g.patchWidth;
  FailureOr<Value> w =
      mb.weight((name + ".weight").str(),
                {hidden, g.channels, g.patchHeight, g.patchWidth});
  if (failed(w))
    return failure();
  Value bv;
  if (bias) {
    FailureOr<Value> given = mb.weight((name + ".bias").str(), {hidden});
    if (failed(given))
      return failure();
    bv = *given;
  }
  // [B, C, rows, ph, cols, pw] -> [B, rows, cols, C, ph, pw]: each patch's
  // pixels in the kernel's (C, ph, pw) order, patches row by row.
  Value x = tb.reshape(
      pixels, {b, g.channels, rows, g.patchHeight, cols, g.patchWidth});
  x = tb.reshape(tb.transpose(x, {0, 2, 4, 1, 3, 5}), {b, rows * cols, k});
  return linearWith(tb, x, tb.reshape(*w, {hidden, k}), bv);
}

Value prependClassToken(TosaBuilder &tb, Value token, Value patches) {
  ArrayRef<int64_t> s = cast<RankedTensorType>(patches.getType()).getShape();
  Value cls = tb.tile(tb.reshape(token, {1, 1, s[2]}), {s[0], 1, 1});
  return tb.concat({cls, patches}, 1);
}

FailureOr<Value> preNormEncoderLayer(ModelBuilder &mb, StringRef scope, Value h,
                                     const EncoderLayerNames &names,
                                     const EncoderShape &shape, Value mask,
                                     bool causal, Value *probs) {
  TosaBuilder tb = mb.at(scope);
  double scale =
      1.0 / std::sqrt(static_cast<double>(shape.hidden / shape.heads));
  FailureOr<Value> a = layerNorm(mb, tb, h, names.norm1, shape.eps);
  if (failed(a))
    return failure();
  FailureOr<Value> q =
      linear(mb, tb, *a, names.query, shape.hidden, shape.qkvBias);
  if (failed(q))
    return failure();
  FailureOr<Value> k =
      linear(mb, tb, *a, names.key, shape.hidden, shape.qkvBias);
  if (failed(k))
    return failure();
  FailureOr<Value> v =
      linear(mb, tb, *a, names.value, shape.hidden, shape.qkvBias);
  if (failed(v))
    return failure();
  // Named temporaries keep the op order independent of the compiler's
  // argument evaluation order.
  Value qh = splitHeads(tb, *q, shape.heads);
  Value kh = splitHeads(tb, *k, shape.heads);
  Value vh = splitHeads(tb, *v, shape.heads);
  Value ctx = scaledDotProductAttention(tb, qh, kh, vh, mask, scale, causal,
                                        /*softcap=*/0, probs);
  FailureOr<Value> o =
      linear(mb, tb, mergeHeads(tb, ctx), names.out, shape.hidden);
  if (failed(o))
    return failure();
  h = tb.add(*o, h);
  FailureOr<Value> m = layerNorm(mb, tb, h, names.norm2, shape.eps);
  if (failed(m))
    return failure();
  FailureOr<Value> up = linear(mb, tb, *m, names.fc1, shape.intermediate);
  if (failed(up))
    return failure();
  FailureOr<Value> down =
      linear(mb, tb, activation(tb, *up, shape.act), names.fc2, shape.hidden);
  if (failed(down))
    return failure();
  return tb.add(*down, h);
}

} // namespace tfc::importer
