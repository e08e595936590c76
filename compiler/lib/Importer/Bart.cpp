//===- Bart.cpp - Marian, BART and mBART encoder-decoders -----------------===//
//
// The three families of EncoderDecoder.cpp's graph, by their layout:
// Marian (modeling_marian.py), sinusoidal positions, post-LN layers, no
// LayerNorm after the embeddings, and the encoder's and the decoder's token
// tables shared unless share_encoder_decoder_embeddings is false; BART
// (modeling_bart.py), learned positions from row 2, a LayerNorm after the
// embeddings, post-LN layers; mBART (modeling_mbart.py), BART's embeddings
// with pre-LN layers and a final layer_norm after each stack.
//
//===----------------------------------------------------------------------===//

#include "EncoderDecoder.h"

using namespace mlir;

namespace tfc::importer {

FailureOr<OwningOpRef<ModuleOp>> buildMarian(ImportRequest &r) {
  EncoderDecoderStyle style;
  style.family = "Marian";
  style.sinusoidal = true;
  style.optionalSharing = true;
  return buildEncoderDecoder(r, style);
}

FailureOr<OwningOpRef<ModuleOp>> buildBart(ImportRequest &r) {
  EncoderDecoderStyle style;
  style.family = "BART";
  style.layerNormEmbedding = true;
  return buildEncoderDecoder(r, style);
}

FailureOr<OwningOpRef<ModuleOp>> buildMBart(ImportRequest &r) {
  EncoderDecoderStyle style;
  style.family = "mBART";
  style.layerNormEmbedding = true;
  style.preNorm = true;
  return buildEncoderDecoder(r, style);
}

} // namespace tfc::importer
