//===- HuggingFace.cpp - Import Hugging Face model directories ------------===//

#include "tfc/Importer/HuggingFace.h"

#include "Architectures.h"
#include "Layers.h"
#include "TensorParallel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace llvm;

namespace tfc {
namespace importer {

static const StringRef bertNames[] = {
    "BertModel",
    "BertForMaskedLM",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "BertForQuestionAnswering",
    "BertForMultipleChoice",
    "BertForNextSentencePrediction",
    "BertForPreTraining",
    "BertLMHeadModel",
};

static const StringRef robertaNames[] = {
    "RobertaModel",
    "RobertaForMaskedLM",
    "RobertaForSequenceClassification",
    "RobertaForTokenClassification",
    "RobertaForQuestionAnswering",
    "RobertaForMultipleChoice",
};

static const StringRef xlmRobertaNames[] = {
    "XLMRobertaModel",
    "XLMRobertaForMaskedLM",
    "XLMRobertaForSequenceClassification",
    "XLMRobertaForTokenClassification",
    "XLMRobertaForQuestionAnswering",
    "XLMRobertaForMultipleChoice",
};

static const StringRef gpt2Names[] = {"GPT2Model", "GPT2LMHeadModel"};

static const StringRef llamaNames[] = {"LlamaModel", "LlamaForCausalLM"};

static const StringRef mistralNames[] = {"MistralModel", "MistralForCausalLM"};

static const StringRef qwen2Names[] = {"Qwen2Model", "Qwen2ForCausalLM"};

static const StringRef qwen3Names[] = {"Qwen3Model", "Qwen3ForCausalLM"};

static const StringRef phi3Names[] = {"Phi3Model", "Phi3ForCausalLM"};

static const StringRef graniteNames[] = {"GraniteModel", "GraniteForCausalLM"};

static const StringRef olmo2Names[] = {"Olmo2Model", "Olmo2ForCausalLM"};

static const StringRef gemmaNames[] = {"GemmaModel", "GemmaForCausalLM"};

static const StringRef gemma2Names[] = {"Gemma2Model", "Gemma2ForCausalLM"};

static const StringRef gemma3Names[] = {"Gemma3TextModel", "Gemma3ForCausalLM"};

static const StringRef neoxNames[] = {"GPTNeoXModel", "GPTNeoXForCausalLM"};

static const StringRef phiNames[] = {"PhiModel", "PhiForCausalLM"};

static const StringRef stableLmNames[] = {"StableLmModel",
                                          "StableLmForCausalLM"};

static const StringRef marianNames[] = {"MarianModel", "MarianMTModel"};

static const StringRef bartNames[] = {"BartModel",
                                      "BartForConditionalGeneration"};

static const StringRef mbartNames[] = {"MBartModel",
                                       "MBartForConditionalGeneration"};

static const StringRef t5Names[] = {"T5Model", "T5ForConditionalGeneration"};

static const StringRef vitNames[] = {"ViTModel", "ViTForImageClassification"};

static const StringRef clipNames[] = {"CLIPModel"};

static const StringRef clipVisionNames[] = {"CLIPVisionModel"};

static const StringRef clipTextNames[] = {"CLIPTextModel"};

ArrayRef<Architecture> architectures() {
  static const Architecture registry[] = {
      {"bert", bertNames, buildBert},
      {"roberta", robertaNames, buildRoberta},
      {"xlm-roberta", xlmRobertaNames, buildRoberta},
      {"gpt2", gpt2Names, buildGpt2},
      {"llama", llamaNames, buildLlama},
      {"mistral", mistralNames, buildLlama},
      {"qwen2", qwen2Names, buildQwen2},
      {"qwen3", qwen3Names, buildQwen3},
      {"phi3", phi3Names, buildPhi3},
      {"granite", graniteNames, buildGranite},
      {"olmo2", olmo2Names, buildOlmo2},
      {"gemma", gemmaNames, buildGemma},
      {"gemma2", gemma2Names, buildGemma2},
      {"gemma3_text", gemma3Names, buildGemma3},
      {"gpt_neox", neoxNames, buildGptNeoX},
      {"phi", phiNames, buildPhi},
      {"stablelm", stableLmNames, buildStableLm},
      {"marian", marianNames, buildMarian, /*encoderDecoder=*/true},
      {"bart", bartNames, buildBart, /*encoderDecoder=*/true},
      {"mbart", mbartNames, buildMBart, /*encoderDecoder=*/true},
      {"t5", t5Names, buildT5, /*encoderDecoder=*/true},
      {"vit", vitNames, buildVit, false, false, /*pooled=*/true},
      {"clip", clipNames, buildClip, false, /*towers=*/true, true},
      {"clip_vision_model", clipVisionNames, buildClipVision, false, true,
       true},
      {"clip_text_model", clipTextNames, buildClipText, false, true, true},
  };
  return registry;
}

static std::string join(StringRef dir, StringRef a, StringRef b = "") {
  SmallString<256> path(dir);
  sys::path::append(path, a);
  if (!b.empty())
    sys::path::append(path, b);
  return std::string(path);
}

FailureOr<std::string> weightPrefix(ImportRequest &r, StringRef anchor,
                                    StringRef examplePrefix) {
  FailureOr<std::string> prefix = r.weights.findPrefix(anchor);
  if (failed(prefix))
    r.error =
        (r.weights.primaryFile() + ": missing tensor \"" + anchor +
         "\" (with or without a prefix such as \"" + examplePrefix + "\")")
            .str();
  return prefix;
}

TokenInputs addTokenInputs(ModelBuilder &mb, const ImportOptions &o) {
  Type i64 = mb.getBuilder().getI64Type();
  auto tokens = RankedTensorType::get({o.batch, o.seqLen}, i64);
  Value ids = mb.addInput("input_ids", tokens);
  Value mask =
      mb.addInput("attention_mask",
                  RankedTensorType::get({o.batch, o.pastLen + o.seqLen}, i64));
  Value positions;
  if (o.positionIds) {
    // Positions outside the cache are refused before a run (the manifest's
    // bounds); the clamp keeps the gathers in range all the same.
    TosaBuilder tb = mb.at("position_ids");
    positions = tb.clampInt(
        mb.addInput("position_ids", tokens,
                    std::make_pair(int64_t(0), o.pastLen + o.seqLen)),
        0, o.pastLen + o.seqLen - 1);
  }
  return {ids, mask, positions};
}

KVCache::KVCache(ModelBuilder &mb, const ImportOptions &o, int64_t layers,
                 int64_t heads, int64_t headDim)
    : enabled(o.kvCache), newOnly(o.present == PresentKV::New) {
  if (!enabled || o.pastLen == 0)
    return;
  auto type = RankedTensorType::get({o.batch, heads, o.pastLen, headDim},
                                    mb.getComputeType());
  for (int64_t l = 0; l < layers; ++l) {
    std::string name = "past_key_values." + std::to_string(l);
    Value k = mb.addInput(name + ".key", type);
    past.push_back({k, mb.addInput(name + ".value", type)});
    // A tensor-parallel build caches its rank's heads only.
    mb.splitAlong(past.back().first, 1);
    mb.splitAlong(past.back().second, 1);
  }
}

std::pair<Value, Value> KVCache::append(TosaBuilder &tb, int64_t layer, Value k,
                                        Value v) {
  if (enabled && newOnly)
    present.push_back({k, v});
  if (!past.empty()) {
    k = tb.concat({past[layer].first, k}, 2);
    v = tb.concat({past[layer].second, v}, 2);
  }
  if (enabled && !newOnly)
    present.push_back({k, v});
  return {k, v};
}

FailureOr<OwningOpRef<ModuleOp>> KVCache::finish(ModelBuilder &mb, Value first,
                                                 StringRef firstName) const {
  SmallVector<Value> results = {first};
  SmallVector<std::string> names = {firstName.str()};
  for (auto [l, kv] : llvm::enumerate(present)) {
    std::string name = "present." + std::to_string(l);
    results.append({kv.first, kv.second});
    names.append({name + ".key", name + ".value"});
    mb.splitAlong(kv.first, 1);
    mb.splitAlong(kv.second, 1);
  }
  return mb.finish(results, names);
}

std::string tokenCountText(const ImportOptions &o) {
  std::string text = "--seq-len " + std::to_string(o.seqLen);
  return o.pastLen ? "--past-len " + std::to_string(o.pastLen) + " + " + text
                   : text;
}

FailureOr<OwningOpRef<ModuleOp>>
finishDecoder(ImportRequest &r, ModelBuilder &mb, const KVCache &cache,
              Value hidden, Value embeddings, const DecoderHead &head) {
  if (r.options.output != ImportOutput::Logits)
    return cache.finish(mb, hidden, "last_hidden_state");
  FailureOr<bool> tied =
      r.config.boolean("tie_word_embeddings", r.error, head.tiedByDefault);
  if (failed(tied))
    return failure();
  auto table = cast<RankedTensorType>(embeddings.getType());
  // `vocab`: the table's rows, of a vocabulary-split one the rank's part
  // of the `whole` vocabulary.
  bool split = splitsVocabulary(r, mb);
  int64_t vocab = table.getDimSize(0), width = table.getDimSize(1);
  int64_t whole = split ? head.vocab : vocab;
  Value w = embeddings;
  if (!*tied) {
    FailureOr<Value> weight = vocabularyWeight(
        mb, split, head.name + ".weight", {whole, width}, /*prefixed=*/false);
    if (failed(weight))
      return failure();
    w = *weight;
  }
  TosaBuilder tb = mb.at("lm_head");
  auto x = cast<RankedTensorType>(hidden.getType());
  int64_t b = x.getDimSize(0), s = x.getDimSize(1);
  Type f32 = tb.builder().getF32Type();
  Value wt = tb.transpose(tb.reshape(w, {1, vocab, width}), {0, 2, 1});
  Value y = tb.matmul(tb.reshape(hidden, {1, b * s, width}), wt, f32);
  if (head.bias) {
    FailureOr<Value> bias = vocabularyWeight(mb, split, head.name + ".bias",
                                             {whole}, /*prefixed=*/false);
    if (failed(bias))
      return failure();
    y = tb.add(y, tb.reshape(tb.cast(*bias, f32), {1, 1, vocab}));
  }
  // The head's output in the compute type, as the framework rounds it.
  Value logits = tb.cast(y, x.getElementType());
  if (head.divisor != 1)
    logits =
        tb.mul(logits, tb.splat(1.0 / head.divisor, x.getElementType(), 3));
  if (head.softcap > 0)
    logits = softcapped(tb, logits, head.softcap);
  y = tb.cast(logits, f32);
  if (split)
    y = gatherVocabulary(tb, y, whole, mb.ranks());
  return cache.finish(mb, tb.reshape(y, {b, s, whole}), "logits");
}

LogicalResult checkDecoderRequest(ImportRequest &r, StringRef family,
                                  int64_t positions, StringRef positionsField) {
  const ImportOptions &o = r.options;
  if (o.output == ImportOutput::SentenceEmbedding)
    r.error = (r.config.path() + ": " + family +
               " is a decoder and has no sentence-embedding pooling; its "
               "output is the last hidden state or the logits "
               "(--output=hidden|logits)")
                  .str();
  else if (o.tokenTypeIds)
    r.error =
        (r.config.path() + ": " + family + " takes no token_type_ids").str();
  else if (o.pastLen + o.seqLen > positions)
    r.error = (tokenCountText(o) + " exceeds " + positionsField + " (" +
               Twine(positions) + ") in " + r.config.path())
                  .str();
  else
    return success();
  return failure();
}

FailureOr<Value> sentenceEmbedding(ImportRequest &r, ModelBuilder &mb,
                                   Value hidden, Value mask) {
  bool cls = false;
  std::string poolingPath = join(r.dir, "1_Pooling", "config.json");
  if (sys::fs::exists(poolingPath)) {
    FailureOr<JsonConfig> pooling = JsonConfig::load(poolingPath, r.error);
    if (failed(pooling))
      return failure();
    FailureOr<bool> mean =
        pooling->boolean("pooling_mode_mean_tokens", r.error, false);
    FailureOr<bool> first =
        pooling->boolean("pooling_mode_cls_token", r.error, false);
    if (failed(mean) || failed(first))
      return failure();
    for (StringRef other :
         {"pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
          "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"}) {
      FailureOr<bool> on = pooling->boolean(other, r.error, false);
      if (failed(on))
        return failure();
      if (*on) {
        (void)pooling->fieldError(other, "this pooling mode is not supported",
                                  r.error);
        return failure();
      }
    }
    if (*mean == *first) {
      (void)pooling->fieldError(
          "pooling_mode_mean_tokens",
          "expected exactly one of pooling_mode_mean_tokens and "
          "pooling_mode_cls_token to be true",
          r.error);
      return failure();
    }
    cls = *first;
  }

  bool normalize = true;
  std::string modulesPath = join(r.dir, "modules.json");
  if (sys::fs::exists(modulesPath)) {
    FailureOr<json::Value> parsed = parseJsonFile(modulesPath, r.error);
    if (failed(parsed))
      return failure();
    const json::Array *modules = parsed->getAsArray();
    if (!modules) {
      r.error = modulesPath + ": expected a JSON array of modules";
      return failure();
    }
    normalize = false;
    for (const json::Value &m : *modules) {
      const json::Object *obj = m.getAsObject();
      std::optional<StringRef> type =
          obj ? obj->getString("type") : std::nullopt;
      if (!type) {
        r.error = modulesPath + ": each module needs a string \"type\"";
        return failure();
      }
      if (type->ends_with(".Normalize"))
        normalize = true;
    }
  }

  TosaBuilder tb = mb.at("pooling");
  // Pooling and normalisation in f32 whatever the compute type.
  hidden = tb.cast(hidden, tb.builder().getF32Type());
  Value pooled = cls ? clsPool(tb, hidden) : meanPool(tb, hidden, mask);
  if (!normalize)
    return pooled;
  TosaBuilder nb = mb.at("normalize");
  return l2Normalize(nb, pooled);
}

} // namespace importer

FailureOr<ComputeType> parseComputeType(StringRef name, StringRef flag,
                                        std::string &error) {
  if (name == "f32")
    return ComputeType::F32;
  if (name == "f16")
    return ComputeType::F16;
  if (name == "bf16")
    return ComputeType::BF16;
  error = (flag + ": unknown element type '" + name +
           "' (expected f32, f16 or bf16)")
              .str();
  return failure();
}

std::vector<std::string> supportedHuggingFaceArchitectures() {
  std::vector<std::string> out;
  for (const importer::Architecture &a : importer::architectures())
    for (StringRef n : a.names)
      out.push_back(n.str());
  return out;
}

FailureOr<OwningOpRef<ModuleOp>> importHuggingFace(MLIRContext &context,
                                                   StringRef dir,
                                                   const ImportOptions &options,
                                                   std::string &error) {
  using namespace importer;
  if (options.batch <= 0 || options.seqLen <= 0) {
    error = "batch and sequence length must be positive";
    return failure();
  }
  if (options.pastLen < 0 || (options.pastLen > 0 && !options.kvCache)) {
    error = "the past length must be non-negative, and positive only with a "
            "KV cache";
    return failure();
  }
  if (options.present == PresentKV::New && !options.kvCache) {
    error = "the new tokens' keys and values are returned only with a KV "
            "cache";
    return failure();
  }
  if (!sys::fs::is_directory(dir)) {
    error = (dir + ": not a directory").str();
    return failure();
  }
  std::string configPath = join(dir, "config.json");
  if (!sys::fs::exists(configPath)) {
    error = configPath + ": no such file";
    return failure();
  }
  FailureOr<JsonConfig> config = JsonConfig::load(configPath, error);
  if (failed(config))
    return failure();

  FailureOr<std::vector<std::string>> names =
      config->stringList("architectures", error);
  if (failed(names))
    return failure();
  FailureOr<std::string> modelType = config->string("model_type", error, "");
  if (failed(modelType))
    return failure();

  const Architecture *chosen = nullptr;
  for (const Architecture &a : architectures()) {
    for (const std::string &n : *names)
      if (llvm::is_contained(a.names, StringRef(n)))
        chosen = &a;
    if (!chosen && names->empty() && a.modelType == *modelType)
      chosen = &a;
    if (chosen)
      break;
  }
  if (!chosen) {
    std::string supported;
    for (const std::string &s : supportedHuggingFaceArchitectures())
      supported += (supported.empty() ? "" : ", ") + s;
    if (names->empty())
      (void)config->fieldError(
          "architectures",
          modelType->empty() ? Twine("missing (and no known \"model_type\")")
                             : Twine("missing, and model_type \"" + *modelType +
                                     "\" is not supported"),
          error);
    else
      (void)config->fieldError("architectures",
                               "unsupported architecture \"" + names->front() +
                                   "\" (supported: " + supported + ")",
                               error);
    return failure();
  }

  bool towerPart =
      options.part == ModelPart::Vision || options.part == ModelPart::Text;
  if (!chosen->encoderDecoder &&
      (options.decoderSeqLen || options.crossKV ||
       (options.part != ModelPart::Whole && !towerPart))) {
    error = (Twine(options.decoderSeqLen ? "--decoder-seq-len"
                   : options.crossKV     ? "--cross-kv"
                                         : "--part") +
             ": " + configPath + ": \"" +
             (names->empty() ? *modelType : names->front()) +
             "\" is not an encoder-decoder (those are Marian, BART, mBART, T5)")
                .str();
    return failure();
  }
  StringRef given = names->empty() ? StringRef(*modelType) : names->front();
  if (towerPart && !chosen->towers) {
    error = ("--part: " + configPath + ": \"" + given +
             "\" has no vision and text towers (CLIP has)")
                .str();
    return failure();
  }
  if (options.output == ImportOutput::Pooled && !chosen->pooled) {
    error = ("--output=pooled: " + configPath + ": \"" + given +
             "\" has no pooled output (ViT and CLIP have)")
                .str();
    return failure();
  }

  FailureOr<WeightIndex> weights = WeightIndex::load(dir, error);
  if (failed(weights))
    return failure();

  context.loadDialect<func::FuncDialect, tosa::TosaDialect>();
  ImportRequest request{context, dir.str(), *config, *weights, options, error};
  return chosen->build(request);
}

} // namespace tfc
