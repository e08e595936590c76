//===- VisionTower.h - What ViT and CLIP share ------------------*- C++ -*-===//
//
// The pieces of the image encoders (ViT, CLIP's vision tower) and of CLIP's
// text tower: the image input and its geometry, the patch embedding (a
// convolution whose stride is its kernel, written as a reshape, a transpose
// and one matmul), the class token, and the pre-LayerNorm encoder layer
// (h + attention(norm1(h)), then h + MLP(norm2(h))) both families stack.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_LIB_IMPORTER_VISIONTOWER_H
#define TFC_LIB_IMPORTER_VISIONTOWER_H

#include "Architectures.h"
#include "Layers.h"

namespace tfc::importer {

/// An image of `channels` x `height` x `width` cut into patches of
/// `patchHeight` x `patchWidth`.
struct ImageGeometry {
  int64_t channels = 3, height = 0, width = 0, patchHeight = 0, patchWidth = 0;
  int64_t patches() const {
    return (height / patchHeight) * (width / patchWidth);
  }
  /// "24x24"
  std::string sizeText() const;
};

/// image_size, patch_size (each a positive integer, or with `rectangular` a
/// list [height, width] as ViT allows) and num_channels (default 3) of
/// `config`; the image must be a whole number of patches each way.
mlir::FailureOr<ImageGeometry> readImageGeometry(const JsonConfig &config,
                                                 bool rectangular,
                                                 std::string &error);

/// What an encoder `family` refuses: the decoders' flags (a KV cache,
/// position ids), token_type_ids; and where `image` (pixel_values of that
/// geometry, no tokens) --seq-len.
mlir::LogicalResult checkEncoderRequest(ImportRequest &request,
                                        llvm::StringRef family,
                                        const ImageGeometry *image);

/// The model input pixel_values [batch, channels, height, width], f32
/// whatever the compute type, cast to the compute type (as transformers
/// casts it to the weights' dtype).
mlir::Value addPixelInput(ModelBuilder &mb, int64_t batch,
                          const ImageGeometry &geometry);

/// nn.Conv2d(channels, hidden, kernel = stride = patch) on `pixels` [B, C,
/// H, W], flattened and transposed as transformers does: [B, patches,
/// hidden], patches in row-major order. The weight `name`.weight is
/// [hidden, C, patch height, patch width], the bias `name`.bias [hidden]
/// (with `bias`).
mlir::FailureOr<mlir::Value> patchEmbedding(ModelBuilder &mb, TosaBuilder &tb,
                                            mlir::Value pixels,
                                            llvm::StringRef name,
                                            const ImageGeometry &geometry,
                                            int64_t hidden, bool bias);

/// `token` (any shape of hidden elements) before the patches [B, N,
/// hidden]: [B, 1 + N, hidden].
mlir::Value prependClassToken(TosaBuilder &tb, mlir::Value token,
                              mlir::Value patches);

/// The tensors of one pre-LayerNorm encoder layer, full names under the
/// builder's prefix: the two norms, Q, K, V, the attention's output
/// projection, and the MLP's two projections.
struct EncoderLayerNames {
  std::string norm1, query, key, value, out, norm2, fc1, fc2;
};

/// The sizes and arithmetic of a pre-LayerNorm encoder.
struct EncoderShape {
  int64_t hidden = 0, layers = 0, heads = 0, intermediate = 0;
  double eps = 1e-12;
  Activation act = Activation::GeluErf;
  bool qkvBias = true; ///< Whether Q, K and V have biases.
};

/// hidden_size, num_hidden_layers, num_attention_heads (which must divide
/// hidden_size), intermediate_size, layer_norm_eps (default `eps`) and
/// hidden_act (default `act`) of `config`.
mlir::FailureOr<EncoderShape> readEncoderShape(const JsonConfig &config,
                                               double eps, llvm::StringRef act,
                                               std::string &error);

/// One layer on h [B, S, hidden]: h + out(attention(norm1(h))), then
/// h + fc2(act(fc1(norm2(h)))); attention scaled by head_dim^-0.5, with
/// the additive `mask` ([B, 1, 1, S] or null) and, when `causal`, the
/// causal limit (scaledDotProductAttention). Ops located at `scope`.
/// `probs`, when given, receives the attention probabilities [B, heads, S,
/// S] (for ModelBuilder::attentionMap).
mlir::FailureOr<mlir::Value>
preNormEncoderLayer(ModelBuilder &mb, llvm::StringRef scope, mlir::Value h,
                    const EncoderLayerNames &names, const EncoderShape &shape,
                    mlir::Value mask = {}, bool causal = false,
                    mlir::Value *probs = nullptr);

} // namespace tfc::importer

#endif // TFC_LIB_IMPORTER_VISIONTOWER_H
