//===- EncoderDecoder.h - Marian, BART and mBART graphs ---------*- C++ -*-===//
//
// The graph the encoder-decoder families share (transformers'
// modeling_bart.py and its copies, eager attention): token embeddings
// (times sqrt(d_model) with scale_embedding) plus positions; an encoder of
// layers of bidirectional self-attention under the padding mask and a
// feed-forward (fc1, activation, fc2); a decoder whose layers hold causal
// self-attention, cross-attention from the decoder's states to the
// encoder's output under the encoder's padding mask, and the feed-forward;
// the LM head tied to the token embeddings plus final_logits_bias. The
// families differ in their positions, a LayerNorm after the embeddings and
// where the layers normalise (EncoderDecoderStyle).
//
// Interface (ImportOptions::part): the whole model takes input_ids and
// attention_mask [B, S] and decoder_input_ids [B, T] (T = decoderSeqLen),
// the encoder part input_ids and attention_mask, the decoder part
// decoder_input_ids, encoder_hidden_states [B, S, d_model] and
// attention_mask; the decoder returns its last hidden state [B, T, d_model]
// or the logits, and with a KV cache (decoder part) its self-attention keys
// and values after (KVCache). With --cross-kv the encoder part also returns
// each decoder layer's cross-attention keys and values
// (cross_key_values.L.key, .value [B, heads, S, head dim]) and the decoder
// part takes them in place of encoder_hidden_states; with --position-ids
// the decoder part takes decoder_attention_mask [B, P + T] and
// decoder_position_ids [B, T] after attention_mask: a fixed-size cache
// whose slot j holds position j, one build for every step. That interface
// and its checks (runEncoderDecoder, checkEncoderDecoderRequest) serve T5
// as well (T5.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef TFC_LIB_IMPORTER_ENCODERDECODER_H
#define TFC_LIB_IMPORTER_ENCODERDECODER_H

#include "Architectures.h"

namespace tfc::importer {

struct EncoderDecoderStyle {
  llvm::StringRef family; ///< "Marian", "BART", "mBART", in messages
  /// Marian's fixed sinusoidal positions (sin of the position's angles in
  /// the first half of the features, cos in the second); otherwise a learned
  /// table, embed_positions.weight, whose rows start at 2.
  bool sinusoidal = false;
  /// A LayerNorm after the embeddings (layernorm_embedding).
  bool layerNormEmbedding = false;
  /// Pre-LN layers (x + f(LN(x))) and a final layer_norm after each stack;
  /// otherwise post-LN (LN(x + f(x))).
  bool preNorm = false;
  /// Whether config.json's share_encoder_decoder_embeddings (Marian) may
  /// give the encoder and the decoder tables of their own
  /// (encoder.embed_tokens, decoder.embed_tokens of decoder_vocab_size
  /// rows); otherwise both read shared.weight.
  bool optionalSharing = false;
};

/// The model of `request` in the family `style`.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildEncoderDecoder(ImportRequest &request, const EncoderDecoderStyle &style);

/// One attention's projections: their names under the attention's
/// (BART's q_proj, k_proj, v_proj, out_proj; T5's q, k, v, o), whether they
/// add biases, the width of all heads together and the scores' scale.
struct AttentionLayout {
  llvm::StringRef q, k, v, out;
  bool bias = true;
  int64_t inner = 0;
  double scale = 1.0;
};

/// An attention's keys and values, [B, heads, Skv, head dim].
using KeysValues = std::pair<mlir::Value, mlir::Value>;

/// The keys and values of the attention `name` to kv [B, Skv, d]: its k and
/// v projections split into `heads` heads (in a tensor-parallel build this
/// rank's heads / ranks of them: Q, K and V column-parallel, the output
/// projection row-parallel, here and in projectedAttention).
mlir::FailureOr<KeysValues> projectKeysValues(ModelBuilder &mb,
                                              const std::string &name,
                                              mlir::Value kv, int64_t heads,
                                              const AttentionLayout &layout);

/// The attention `name` of x [B, Sq, d] to kv [B, Skv, d] in `heads`
/// heads, layer `layer` of `stack`: the projections (or, with `given`,
/// those keys and values, kv unused), `cache`'s keys and values of that
/// layer before the new ones (when given), eager attention under the
/// additive `mask` (null: none) and with `causal` the causal limit (its
/// probabilities handed to ModelBuilder::attentionMap), and the output
/// projection back to d.
mlir::FailureOr<mlir::Value>
projectedAttention(ModelBuilder &mb, const std::string &name, mlir::Value x,
                   mlir::Value kv, mlir::Value mask, int64_t heads,
                   const AttentionLayout &layout, bool causal,
                   AttentionStack stack, int64_t layer,
                   KVCache *cache = nullptr, const KeysValues *given = nullptr);

/// x times a Python float as PyTorch computes it: in f32 (its opmath type
/// for f16 and bf16), rounded once to x's type.
mlir::Value timesScalar(TosaBuilder &tb, mlir::Value x, double factor);

/// What no encoder-decoder builds (a sentence embedding, token_type_ids,
/// flags a part does not take, a missing --decoder-seq-len, an encoder's
/// KV cache), and with `positions` > 0 sequences longer than
/// that (max_position_embeddings): one line naming the flag, in
/// request.error. `family` names the model in messages.
mlir::LogicalResult checkEncoderDecoderRequest(ImportRequest &request,
                                               llvm::StringRef family,
                                               int64_t positions);

/// The decoder's inputs besides its tokens.
struct DecoderInputs {
  /// The encoder's output [B, S, d]; null where `cross` holds each decoder
  /// layer's cross-attention keys and values (--cross-kv).
  mlir::Value encoded;
  llvm::SmallVector<KeysValues> cross;
  /// The encoder's padding mask, additive [B, 1, 1, S].
  mlir::Value encoderMask;
  /// With --position-ids the decoder's self-attention mask, additive
  /// [B, 1, 1, P + T], and its new tokens' positions [B, T] (within
  /// [0, P + T)), cache slot j at position j; null otherwise (positions
  /// P.., no key hidden but by the causal limit).
  mlir::Value selfMask, positions;
};

/// One family's stacks and head, which runEncoderDecoder calls in order.
class EncoderDecoderGraph {
public:
  virtual ~EncoderDecoderGraph() = default;
  /// Once the inputs are added: the tensors the stacks share (the token
  /// tables), for the encoder and/or the decoder.
  virtual mlir::LogicalResult prepare(bool encoder, bool decoder) = 0;
  /// The encoder's output [B, S, d] for ids [B, S] under the additive
  /// padding mask [B, 1, 1, S].
  virtual mlir::FailureOr<mlir::Value> encoder(mlir::Value ids,
                                               mlir::Value mask) = 0;
  /// Decoder layer `layer`'s cross-attention keys and values of the
  /// encoder's output `encoded`.
  virtual mlir::FailureOr<KeysValues> crossKeysValues(mlir::Value encoded,
                                                      int64_t layer) = 0;
  /// The decoder's last hidden state [B, T, d] for ids [B, T] (after
  /// ImportOptions::pastLen cached tokens) and `in`; its self-attention
  /// keys and values go through `cache`.
  virtual mlir::FailureOr<mlir::Value>
  decoder(mlir::Value ids, const DecoderInputs &in, KVCache &cache) = 0;
  /// The LM head's logits [B, T, vocab] (f32) of the decoder's output.
  virtual mlir::FailureOr<mlir::Value> logits(mlir::Value hidden) = 0;
};

/// The model of ImportOptions::part on `graph`: its inputs (the interface
/// above), the cache of `decoderLayers` layers of `heads` heads of
/// `headDim` features, the stacks and the outputs.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
runEncoderDecoder(ModelBuilder &mb, const ImportOptions &options,
                  EncoderDecoderGraph &graph, int64_t hidden,
                  int64_t decoderLayers, int64_t heads, int64_t headDim);

} // namespace tfc::importer

#endif // TFC_LIB_IMPORTER_ENCODERDECODER_H
