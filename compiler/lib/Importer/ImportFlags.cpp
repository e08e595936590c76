//===- ImportFlags.cpp - The command-line flags of a model import ---------===//

#include "tfc/Importer/ImportFlags.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

using namespace llvm;

namespace tfc {

ImportFlags::ImportFlags(cl::OptionCategory &category, StringRef note)
    : descriptions{(note +
                    "Batch size, default 1; several, comma-separated (1,8), "
                    "build one library that runs any batch size as the "
                    "smallest built one that holds it (inputs padded, "
                    "outputs cut), a larger one in slices of the largest")
                       .str(),
                   (note +
                    "Sequence length (new tokens), default 128; several, "
                    "comma-separated (16,32,128), build one library that "
                    "runs any length up to the longest as the shortest built "
                    "one that holds it (inputs padded, outputs cut)")
                       .str(),
                   (note +
                    "Element type the model computes in: f32 (default), f16 "
                    "or bf16 (activations and weights in that type, matmuls "
                    "accumulating in f32, norms and activations computed in "
                    "f32, as PyTorch runs a half-precision model); ONNX "
                    "files too: their f32 tensors take that type")
                       .str(),
                   (note + "What the model returns").str(),
                   (note +
                    "Encoders: take token_type_ids as a third input (default: "
                    "all zero)")
                       .str(),
                   (note +
                    "Decoders: also return every layer's keys and values "
                    "(present.L.key/value) after the first result")
                       .str(),
                   (note +
                    "Decoders: take the keys and values of this many earlier "
                    "tokens as inputs (past_key_values.L.key/value; implies "
                    "--kv-cache): attention_mask covers past + new tokens, "
                    "positions start after the past")
                       .str(),
                   (note +
                    "Decoders: take position_ids [B, S] after attention_mask "
                    "(each new token's position, instead of past-len, "
                    "past-len + 1, ...): with a cache whose unused slots the "
                    "mask hides, one build serves every decode step; an "
                    "encoder-decoder's decoder part takes "
                    "decoder_attention_mask [B, past-len + T] and "
                    "decoder_position_ids [B, T] after attention_mask")
                       .str(),
                   (note + "Decoders with a KV cache: what "
                           "present.L.key/value hold")
                       .str(),
                   (note + "ONNX files: the shape of input NAME (its "
                           "dynamic dimensions and, by their names, those "
                           "of other inputs); repeatable")
                       .str(),
                   (note + "Encoder-decoders (Marian, BART, mBART, T5): the "
                           "decoder's token count, decoder_input_ids [B, T] "
                           "(--seq-len is the encoder's)")
                       .str(),
                   (note + "Encoder-decoders and CLIP: the part built").str(),
                   (note +
                    "Also return these layers' attention probabilities [B, "
                    "heads, Sq, Skv] (attentions.L; encoder-decoders: "
                    "encoder_attentions.L, decoder_attentions.L, "
                    "cross_attentions.L), in the compute type, after the "
                    "other results: layer numbers, ranges (0-2) or all, "
                    "comma-separated; an encoder-decoder's after encoder., "
                    "decoder. or cross. (decoder.0-1). Those layers' "
                    "attention is not fused")
                       .str(),
                   (note +
                    "Encoder-decoders: the encoder part also returns each "
                    "decoder layer's cross-attention keys and values "
                    "(cross_key_values.L.key/value [B, heads, S, head dim]), "
                    "the decoder part takes them instead of "
                    "encoder_hidden_states")
                       .str(),
                   (note + "Decoders (the LLaMA family, GPT-2), CPU: split "
                           "the heads and the MLP across N ranks of an MPI "
                           "job (Megatron's split; docs/tensor-parallel.md): "
                           "one library, run with mpirun -np N tfc-run")
                       .str(),
                   (note + "With --tensor-parallel: split (default) the "
                           "token embeddings and the LM head by vocabulary "
                           "across the ranks, or replicate them on each")
                       .str()},
      batch("batch", cl::desc(descriptions[0]), cl::init("1"),
            cl::value_desc("n[,n...]"), cl::cat(category)),
      seqLen("seq-len", cl::desc(descriptions[1]), cl::init("128"),
             cl::value_desc("n[,n...]"), cl::cat(category)),
      dtype("dtype", cl::desc(descriptions[2]), cl::init("f32"),
            cl::cat(category)),
      output("output", cl::desc(descriptions[3]),
             cl::values(
                 clEnumValN(ImportOutput::SentenceEmbedding, "embedding",
                            "pooled (and normalised) sentence embedding [B, "
                            "hidden] (the default for encoders)"),
                 clEnumValN(ImportOutput::LastHiddenState, "hidden",
                            "last hidden state [B, S, hidden] (the default "
                            "for decoders)"),
                 clEnumValN(ImportOutput::Logits, "logits",
                            "decoders: the language-model head's logits [B, "
                            "S, vocab], f32; ViTForImageClassification: the "
                            "classifier's [B, labels]"),
                 clEnumValN(ImportOutput::Pooled, "pooled",
                            "ViT and CLIP: the pooler's output [B, hidden], "
                            "f32")),
             cl::init(ImportOutput::Default), cl::cat(category)),
      tokenTypeIds("token-type-ids", cl::desc(descriptions[4]), cl::init(false),
                   cl::cat(category)),
      kvCache("kv-cache", cl::desc(descriptions[5]), cl::init(false),
              cl::cat(category)),
      pastLen("past-len", cl::desc(descriptions[6]), cl::init(0),
              cl::cat(category)),
      positionIds("position-ids", cl::desc(descriptions[7]), cl::init(false),
                  cl::cat(category)),
      present("present", cl::desc(descriptions[8]),
              cl::values(clEnumValN(PresentKV::All, "all",
                                    "the past and the new tokens' keys and "
                                    "values: the next step's past (default)"),
                         clEnumValN(PresentKV::New, "new",
                                    "the new tokens' only, [B, kv heads, "
                                    "seq-len, head dim], for the caller to "
                                    "write into its cache: a step does not "
                                    "copy the cache")),
              cl::init(PresentKV::All), cl::cat(category)),
      inputShape("input-shape", cl::desc(descriptions[9]),
                 cl::value_desc("NAME=DxD..."), cl::cat(category)),
      decoderSeqLen("decoder-seq-len", cl::desc(descriptions[10]), cl::init(0),
                    cl::value_desc("T"), cl::cat(category)),
      part("part", cl::desc(descriptions[11]),
           cl::values(clEnumValN(ModelPart::Whole, "whole",
                                 "input_ids, attention_mask, "
                                 "decoder_input_ids -> the decoder's output "
                                 "(default)"),
                      clEnumValN(ModelPart::Encoder, "encoder",
                                 "input_ids, attention_mask -> "
                                 "encoder_hidden_states [B, S, hidden]"),
                      clEnumValN(ModelPart::Decoder, "decoder",
                                 "decoder_input_ids, encoder_hidden_states, "
                                 "attention_mask -> the decoder's output"),
                      clEnumValN(ModelPart::Vision, "vision",
                                 "CLIP's image tower: pixel_values -> "
                                 "image_embeds"),
                      clEnumValN(ModelPart::Text, "text",
                                 "CLIP's text tower: input_ids, "
                                 "attention_mask -> text_embeds")),
           cl::init(ModelPart::Whole), cl::cat(category)),
      crossKV("cross-kv", cl::desc(descriptions[13]), cl::init(false),
              cl::cat(category)),
      attentionMaps("attention-maps", cl::desc(descriptions[12]),
                    cl::value_desc("LAYERS"), cl::cat(category)),
      tensorParallel("tensor-parallel", cl::desc(descriptions[14]), cl::init(1),
                     cl::value_desc("N"), cl::cat(category)),
      tensorParallelVocab("tensor-parallel-vocab", cl::desc(descriptions[15]),
                          cl::init("split"), cl::value_desc("split|replicate"),
                          cl::cat(category)) {}

std::vector<std::string> ImportFlags::given() const {
  std::vector<std::string> out;
  const cl::Option *flags[] = {
      &batch,         &seqLen,         &dtype,
      &output,        &tokenTypeIds,   &kvCache,
      &pastLen,       &positionIds,    &present,
      &decoderSeqLen, &part,           &crossKV,
      &attentionMaps, &tensorParallel, &tensorParallelVocab};
  for (const cl::Option *o : flags)
    if (o->getNumOccurrences())
      out.push_back(("--" + o->ArgStr).str());
  if (inputShape.getNumOccurrences())
    out.push_back("--input-shape");
  return out;
}

/// The largest batch size, length or past length a build takes, and the
/// most tokens (batch times past and new tokens) it holds: tensor sizes
/// stay far from overflowing 64 bits however wide the model.
static constexpr int64_t kMaxSize = (int64_t(1) << 31) - 1;
static constexpr int64_t kMaxTokens = int64_t(1) << 40;

/// The positive integers of a comma-separated list, increasing, each once;
/// failure with `error` naming `flag` otherwise.
static FailureOr<std::vector<int64_t>>
parseSizes(StringRef list, StringRef flag, std::string &error) {
  std::vector<int64_t> sizes;
  SmallVector<StringRef> parts;
  list.split(parts, ',');
  for (StringRef part : parts) {
    int64_t size = 0;
    if (part.trim().getAsInteger(10, size) || size <= 0) {
      error = ("--" + flag +
               ": expected positive integers separated by commas, got '" +
               part + "'")
                  .str();
      return failure();
    }
    if (size > kMaxSize) {
      error = ("--" + flag + ": " + Twine(size) + " is larger than " +
               Twine(kMaxSize) + ", the most a build takes")
                  .str();
      return failure();
    }
    sizes.push_back(size);
  }
  llvm::sort(sizes);
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

FailureOr<std::vector<AttentionMapSelection>>
parseAttentionMaps(StringRef list, std::string &error) {
  std::vector<AttentionMapSelection> out;
  SmallVector<StringRef> items;
  list.split(items, ',');
  for (StringRef item : items) {
    item = item.trim();
    AttentionMapSelection s;
    s.text = item.str();
    auto [stack, layers] = item.split('.');
    if (layers.empty() && !item.contains('.'))
      std::swap(stack, layers);
    s.stack = stack.str();
    bool ok = stack.empty() || stack == "encoder" || stack == "decoder" ||
              stack == "cross";
    if (layers != "all") {
      auto [from, to] = layers.split('-');
      if (!layers.contains('-'))
        to = from;
      ok = ok && !from.getAsInteger(10, s.first) &&
           !to.getAsInteger(10, s.last) && s.first >= 0 && s.first <= s.last &&
           s.last <= kMaxSize;
    }
    if (!ok) {
      error = ("--attention-maps: '" + item +
               "': expected a layer number, a range (0-2) or all, after "
               "encoder., decoder. or cross. for an encoder-decoder; items "
               "separated by commas")
                  .str();
      return failure();
    }
    out.push_back(std::move(s));
  }
  return out;
}

FailureOr<std::vector<int64_t>> ImportFlags::seqLens(std::string &error) const {
  return parseSizes(seqLen, "seq-len", error);
}

FailureOr<std::vector<int64_t>> ImportFlags::batches(std::string &error) const {
  return parseSizes(batch, "batch", error);
}

FailureOr<ImportOptions> ImportFlags::options(std::string &error) const {
  auto fail = [&](const Twine &message) {
    error = message.str();
    return failure();
  };
  FailureOr<std::vector<int64_t>> batchSizes = batches(error);
  if (failed(batchSizes))
    return failure();
  FailureOr<std::vector<int64_t>> lengths = seqLens(error);
  if (failed(lengths))
    return failure();
  if (pastLen < 0)
    return fail("--past-len: expected a non-negative integer");
  if (pastLen > kMaxSize)
    return fail("--past-len: " + Twine(int64_t(pastLen)) + " is larger than " +
                Twine(kMaxSize) + ", the most a build takes");
  // Each at most 2^31 - 1: the products below do not overflow.
  int64_t tokens = batchSizes->back() * (pastLen + lengths->back());
  if (tokens > kMaxTokens)
    return fail("--batch " + Twine(batchSizes->back()) + " with " +
                Twine(pastLen + lengths->back()) +
                " tokens per sequence (past and new): " + Twine(tokens) +
                " tokens, more than a build takes (" + Twine(kMaxTokens) + ")");
  if (decoderSeqLen.getNumOccurrences() &&
      (decoderSeqLen <= 0 || decoderSeqLen > kMaxSize))
    return fail("--decoder-seq-len: expected a positive integer of at most " +
                Twine(kMaxSize));
  if (present == PresentKV::New && !kvCache && pastLen == 0)
    return fail("--present=new: the model has no KV cache to return (add "
                "--kv-cache or --past-len)");
  FailureOr<ComputeType> computeType =
      parseComputeType(dtype, "--dtype", error);
  if (failed(computeType))
    return failure();
  ImportOptions o;
  o.batch = batchSizes->back();
  o.seqLen = lengths->back();
  o.seqLenGiven = seqLen.getNumOccurrences() > 0;
  o.computeType = *computeType;
  o.output = output;
  o.tokenTypeIds = tokenTypeIds;
  o.kvCache = kvCache || pastLen > 0;
  o.pastLen = pastLen;
  o.positionIds = positionIds;
  o.present = present;
  o.decoderSeqLen = decoderSeqLen;
  o.part = part;
  o.crossKV = crossKV;
  if (tensorParallel < 1 || tensorParallel > 4096)
    return fail("--tensor-parallel: expected a rank count from 1 to 4096, "
                "got " +
                Twine(int64_t(tensorParallel)));
  o.tensorParallel = tensorParallel;
  if (tensorParallelVocab != "split" && tensorParallelVocab != "replicate")
    return fail("--tensor-parallel-vocab: expected split or replicate, got " +
                Twine(tensorParallelVocab));
  o.splitVocabulary = tensorParallelVocab == "split";
  if (attentionMaps.getNumOccurrences()) {
    if (lengths->size() > 1)
      return fail("--attention-maps: a build of several --seq-len cuts one "
                  "axis of its outputs, the maps [B, heads, S, S] have two: "
                  "give one length");
    FailureOr<std::vector<AttentionMapSelection>> maps =
        parseAttentionMaps(attentionMaps, error);
    if (failed(maps))
      return failure();
    o.attentionMaps = std::move(*maps);
  }
  return o;
}

FailureOr<OnnxImportOptions>
ImportFlags::onnxOptions(std::string &error) const {
  const cl::Option *hfOnly[] = {
      &output,      &tokenTypeIds,  &kvCache,        &pastLen,
      &positionIds, &present,       &decoderSeqLen,  &part,
      &crossKV,     &attentionMaps, &tensorParallel, &tensorParallelVocab};
  for (const cl::Option *o : hfOnly)
    if (o->getNumOccurrences()) {
      error = ("--" + o->ArgStr +
               " applies to Hugging Face imports (--hf), not to ONNX files")
                  .str();
      return failure();
    }
  FailureOr<std::vector<int64_t>> batchSizes = batches(error);
  if (failed(batchSizes))
    return failure();
  FailureOr<ComputeType> computeType =
      parseComputeType(dtype, "--dtype", error);
  if (failed(computeType))
    return failure();
  OnnxImportOptions o;
  o.batch = batchSizes->back();
  o.computeType = *computeType;
  if (seqLen.getNumOccurrences()) {
    FailureOr<std::vector<int64_t>> lengths = seqLens(error);
    if (failed(lengths))
      return failure();
    o.seqLen = lengths->back();
  }
  for (const std::string &text : inputShape) {
    auto [name, dims] = StringRef(text).split('=');
    std::vector<int64_t> shape;
    bool ok = !name.empty() && StringRef(text).contains('=');
    SmallVector<StringRef> parts;
    if (!dims.empty())
      dims.split(parts, 'x');
    for (StringRef part : parts) {
      int64_t d = 0;
      ok = ok && !part.getAsInteger(10, d) && d >= 0 && d <= kMaxSize;
      shape.push_back(d);
    }
    if (!ok) {
      error = "--input-shape=" + text +
              ": expected NAME=DIMxDIM... (e.g. input_ids=1x128), each "
              "dimension at most " +
              std::to_string(kMaxSize);
      return failure();
    }
    o.inputShapes[name.str()] = std::move(shape);
  }
  return o;
}

} // namespace tfc
