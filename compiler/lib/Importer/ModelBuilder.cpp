//===- ModelBuilder.cpp - Shared state of one model import ----------------===//

#include "ModelBuilder.h"

#include "Architectures.h"

#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace llvm;

namespace tfc::importer {

static std::string shapeText(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? ", " : "") + std::to_string(d);
  return s + "]";
}

static Type elementTypeOf(OpBuilder &b, ComputeType type) {
  switch (type) {
  case ComputeType::F32:
    return b.getF32Type();
  case ComputeType::F16:
    return b.getF16Type();
  case ComputeType::BF16:
    return b.getBF16Type();
  }
  llvm_unreachable("unknown compute type");
}

ModelBuilder::ModelBuilder(MLIRContext &context, const WeightIndex &weights,
                           std::string prefix, ComputeType computeType,
                           std::string &error)
    : builder(&context), computeType(elementTypeOf(builder, computeType)),
      weights(weights), prefix(std::move(prefix)), error(error) {
  Location loc = NameLoc::get(builder.getStringAttr("model"));
  module = ModuleOp::create(loc);
  builder.setInsertionPointToEnd(module->getBody());
  func = func::FuncOp::create(builder, loc, "main",
                              builder.getFunctionType({}, {}));
  body = func.addEntryBlock();
  builder.setInsertionPointToStart(body);
}

ModelBuilder::ModelBuilder(ImportRequest &r, std::string prefix)
    : ModelBuilder(r.context, r.weights, std::move(prefix),
                   r.options.computeType, r.error) {
  tensorParallel = r.options.tensorParallel;
  quantizeActivations = r.options.quantizeActivations;
  mapsAsked = r.options.attentionMaps;
  if (mapsAsked.empty() && tensorParallel == 1)
    return;
  // The architecture (the model_type without one), as messages name it.
  std::string unused;
  FailureOr<std::vector<std::string>> names =
      r.config.stringList("architectures", unused);
  FailureOr<std::string> type = r.config.string("model_type", unused, "");
  std::string name = succeeded(names) && !names->empty() ? names->front()
                     : succeeded(type)                   ? *type
                                                         : "";
  modelText = r.config.path() + ": \"" + name + "\"";
}

static StringRef stackName(AttentionStack stack) {
  switch (stack) {
  case AttentionStack::Only:
    return "";
  case AttentionStack::Encoder:
    return "encoder";
  case AttentionStack::Decoder:
    return "decoder";
  case AttentionStack::Cross:
    return "cross";
  case AttentionStack::Vision:
    return "vision";
  case AttentionStack::Text:
    return "text";
  }
  llvm_unreachable("unknown attention stack");
}

LogicalResult ModelBuilder::declareAttentionStacks(
    ArrayRef<std::pair<AttentionStack, int64_t>> stacks) {
  stacksDeclared = true;
  // A build of one stack (a model's, or one of CLIP's towers) names its
  // layers by number alone.
  bool single =
      stacks.size() == 1 && (stacks[0].first == AttentionStack::Only ||
                             stacks[0].first == AttentionStack::Vision ||
                             stacks[0].first == AttentionStack::Text);
  for (const AttentionMapSelection &s : mapsAsked) {
    auto bad = [&](const Twine &why) {
      return fail("--attention-maps: '" + s.text + "': " + why);
    };
    if (single && !s.stack.empty())
      return bad("this model has one stack of attention layers, named by "
                 "number alone (0-" +
                 Twine(stacks[0].second - 1) + ")");
    // A number or range without a stack: only `all` names every stack.
    if (!single && s.stack.empty() && s.last >= 0)
      return bad("an encoder-decoder's layers are named by their stack: "
                 "encoder.N, decoder.N or cross.N");
    bool found = false;
    for (auto [stack, count] : stacks) {
      if (!s.stack.empty() && stackName(stack) != s.stack)
        continue;
      found = true;
      if (s.last >= count)
        return bad("layer " + Twine(s.last) + " is out of range: " +
                   (stack == AttentionStack::Only ? Twine("the model")
                    : single ? "the " + stackName(stack) + " tower"
                             : "the " + stackName(stack) + " stack") +
                   " has " + Twine(count) + " layers (0-" + Twine(count - 1) +
                   ")");
      for (int64_t l = s.first; l <= (s.last < 0 ? count - 1 : s.last); ++l)
        maps[{stack, l}] = Value();
    }
    if (!found)
      return bad("the part built (--part) has no " + s.stack + " attention");
  }
  return success();
}

LogicalResult ModelBuilder::declareEncoderDecoderStacks(ModelPart part,
                                                        int64_t encoderLayers,
                                                        int64_t decoderLayers) {
  SmallVector<std::pair<AttentionStack, int64_t>> stacks;
  if (part != ModelPart::Decoder)
    stacks.push_back({AttentionStack::Encoder, encoderLayers});
  if (part != ModelPart::Encoder) {
    stacks.push_back({AttentionStack::Decoder, decoderLayers});
    stacks.push_back({AttentionStack::Cross, decoderLayers});
  }
  return declareAttentionStacks(stacks);
}

void ModelBuilder::attentionMap(AttentionStack stack, int64_t layer,
                                Value probs) {
  auto it = maps.find({stack, layer});
  if (it != maps.end())
    it->second = probs;
}

TosaBuilder ModelBuilder::at(StringRef scope) {
  return TosaBuilder(builder, NameLoc::get(builder.getStringAttr(scope)));
}

Value ModelBuilder::addInput(
    StringRef name, RankedTensorType type,
    std::optional<std::pair<int64_t, int64_t>> bounds) {
  Value arg =
      body->addArgument(type, NameLoc::get(builder.getStringAttr(name)));
  SmallVector<NamedAttribute> attrs = {
      builder.getNamedAttr("tfc.name", builder.getStringAttr(name)),
      builder.getNamedAttr("tfc.role", builder.getStringAttr("input"))};
  if (bounds)
    attrs.push_back(builder.getNamedAttr(
        "tfc.bounds",
        builder.getDenseI64ArrayAttr({bounds->first, bounds->second})));
  argAttrs.push_back(builder.getDictionaryAttr(attrs));
  return arg;
}

void ModelBuilder::bound(Value input, int64_t lo, int64_t hi) {
  auto arg = cast<BlockArgument>(input);
  NamedAttrList attrs(argAttrs[arg.getArgNumber()]);
  attrs.set("tfc.bounds", builder.getDenseI64ArrayAttr({lo, hi}));
  argAttrs[arg.getArgNumber()] = attrs.getDictionary(getContext());
}

LogicalResult ModelBuilder::fail(const Twine &message) {
  error = message.str();
  return failure();
}

FailureOr<Value> ModelBuilder::weight(StringRef name, ArrayRef<int64_t> shape,
                                      bool prefixed, WeightSplit split) {
  std::string full = (prefixed ? prefix : "") + name.str();
  auto cached = weightValues.find(full);
  if (cached != weightValues.end())
    return cached->second;

  const WeightInfo *info = weights.lookup(full);
  if (!info) {
    (void)fail(weights.primaryFile() + ": missing tensor \"" + full +
               "\" (expected shape " + shapeText(shape) + ")");
    return failure();
  }
  if (ArrayRef<int64_t>(info->shape) != shape) {
    (void)fail(info->file + ": tensor \"" + full + "\": expected shape " +
               shapeText(shape) + ", got " + shapeText(info->shape));
    return failure();
  }
  switch (info->dtype) {
  case DType::F32:
  case DType::F16:
  case DType::BF16:
    break;
  default:
    (void)fail(info->file + ": tensor \"" + full + "\": dtype " +
               safetensorsDTypeName(info->dtype) +
               " is not supported (expected F32, F16 or BF16)");
    return failure();
  }

  // The weight is an argument of the type the model computes in, whatever
  // the checkpoint holds: the runtime converts it once when it binds the
  // file (an f32 checkpoint for --dtype=bf16, say), where a cast in the
  // graph would convert every weight on every run.
  Location loc = NameLoc::get(builder.getStringAttr(full));
  SmallVector<int64_t> part(shape);
  SmallVector<NamedAttribute> attrs = {
      builder.getNamedAttr("tfc.name", builder.getStringAttr(full)),
      builder.getNamedAttr("tfc.role", builder.getStringAttr("weight"))};
  if (split.axis >= 0 && tensorParallel > 1) {
    // The importer splits only what divides (checkTensorParallel), but a
    // vocabulary, whose parts are padded: the whole length then follows.
    int64_t whole = shape[split.axis];
    part[split.axis] = (whole + tensorParallel - 1) / tensorParallel;
    SmallVector<int64_t> value = {split.axis, split.groups};
    if (whole % tensorParallel != 0)
      value.push_back(whole);
    attrs.push_back(
        builder.getNamedAttr("tfc.split", builder.getDenseI64ArrayAttr(value)));
  }
  Value value =
      body->addArgument(RankedTensorType::get(part, computeType), loc);
  argAttrs.push_back(builder.getDictionaryAttr(attrs));
  weightValues[full] = value;
  return value;
}

FailureOr<OwningOpRef<ModuleOp>>
ModelBuilder::finish(ArrayRef<Value> results, ArrayRef<std::string> names) {
  if (!mapsAsked.empty() && !stacksDeclared) {
    (void)fail("internal error: --attention-maps: " + modelText +
               " declares no attention stacks");
    return failure();
  }
  SmallVector<Value> all(results);
  SmallVector<std::string> allNames(names);
  allNames.resize(results.size());
  for (auto [key, probs] : maps) {
    if (!probs) {
      (void)fail("internal error: the attention map of layer " +
                 Twine(key.second) + " was not built");
      return failure();
    }
    all.push_back(probs);
    std::string stack = stackName(key.first).str();
    allNames.push_back((stack.empty() ? stack : stack + "_") + "attentions." +
                       std::to_string(key.second));
  }
  if (tensorParallel > 1 && !parallelDeclared) {
    (void)fail("--tensor-parallel=" + Twine(tensorParallel) + ": " + modelText +
               " is not split across ranks (the LLaMA-type decoders, "
               "GPT-2, BERT, RoBERTa and the encoder-decoders are)");
    return failure();
  }
  results = all;
  names = allNames;
  func::ReturnOp::create(builder, func.getLoc(), results);
  SmallVector<Type> resultTypes;
  for (Value r : results)
    resultTypes.push_back(r.getType());
  func.setType(builder.getFunctionType(body->getArgumentTypes(), resultTypes));
  func.setAllArgAttrs(argAttrs);
  for (auto [i, name] : llvm::enumerate(names))
    if (!name.empty())
      func.setResultAttr(i, "tfc.name", builder.getStringAttr(name));
  if (tensorParallel > 1) {
    // Split inputs and results (a KV cache's): {axis, groups 1}.
    auto splitAttr = [&](int64_t axis) {
      return builder.getDenseI64ArrayAttr({axis, 1});
    };
    for (BlockArgument arg : body->getArguments())
      if (auto it = splitValues.find(arg); it != splitValues.end())
        func.setArgAttr(arg.getArgNumber(), "tfc.split", splitAttr(it->second));
    for (auto [i, r] : llvm::enumerate(results))
      if (auto it = splitValues.find(r); it != splitValues.end())
        func.setResultAttr(i, "tfc.split", splitAttr(it->second));
    (*module)->setAttr("tfc.tensor_parallel",
                       builder.getI64IntegerAttr(tensorParallel));
  }

  std::string diagnostics;
  {
    ScopedDiagnosticHandler handler(getContext(), [&](Diagnostic &diag) {
      raw_string_ostream os(diagnostics);
      os << diag.getLocation() << ": " << diag << "; ";
      return success();
    });
    if (failed(verify(*module))) {
      (void)fail("internal error: the emitted module does not verify: " +
                 diagnostics);
      return failure();
    }
  }
  return std::move(module);
}

} // namespace tfc::importer
