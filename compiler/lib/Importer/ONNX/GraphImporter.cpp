//===- GraphImporter.cpp - Translating an ONNX graph to TOSA --------------===//

#include "GraphImporter.h"
#include "Folding.h"

#include "tfc/runtime/abi.h"

#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <set>

using namespace mlir;
using namespace llvm;

namespace tfc::onnx_import {

namespace {

/// Float initializers of at most this many elements are folded into the
/// graph as constants (scales, epsilons); larger ones are weights.
constexpr int64_t kInlineElements = 16;

std::string nodeName(const onnx::NodeProto &node) {
  return node.name().empty()
             ? "(unnamed, output '" +
                   (node.output_size() ? node.output(0) : "") + "')"
             : "'" + node.name() + "'";
}

} // namespace

//===----------------------------------------------------------------------===//
// NodeContext
//===----------------------------------------------------------------------===//

NodeContext::NodeContext(GraphImporter &importer, const onnx::NodeProto &node,
                         int64_t opset)
    : node(node), opset(opset),
      tb(importer.builder(),
         NameLoc::get(importer.builder().getStringAttr(
             node.name().empty() ? node.op_type() : node.name()))),
      importer(importer) {}

const OnnxFile &NodeContext::file() const { return importer.file(); }

bool NodeContext::has(size_t i) const {
  return i < numInputs() && !node.input(int(i)).empty();
}

OnnxValue &NodeContext::input(size_t i) {
  return *importer.lookup(node.input(int(i)));
}

const HostTensor *NodeContext::constant(size_t i) {
  OnnxValue &v = input(i);
  return v.constant ? &*v.constant : nullptr;
}

bool NodeContext::allConstant() {
  for (size_t i = 0; i < numInputs(); ++i)
    if (has(i) && !constant(i))
      return false;
  return true;
}

Value NodeContext::value(size_t i) { return importer.materialize(input(i)); }

Value NodeContext::constantOp(const HostTensor &t) {
  return importer.constantOp(tb.getLoc(), t);
}

Type NodeContext::graphType(OnnxType t) const { return importer.graphType(t); }

RankedTensorType NodeContext::type(size_t i) {
  OnnxValue &v = input(i);
  if (v.value)
    return cast<RankedTensorType>(v.value.getType());
  return RankedTensorType::get(v.constant->shape, graphType(v.constant->type));
}

const onnx::AttributeProto *NodeContext::attr(StringRef name) const {
  for (const onnx::AttributeProto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t NodeContext::attrInt(StringRef name, int64_t fallback) const {
  const onnx::AttributeProto *a = attr(name);
  return a ? a->i() : fallback;
}

double NodeContext::attrFloat(StringRef name, double fallback) const {
  const onnx::AttributeProto *a = attr(name);
  return a ? double(a->f()) : fallback;
}

std::string NodeContext::attrString(StringRef name, StringRef fallback) const {
  const onnx::AttributeProto *a = attr(name);
  return a ? a->s() : fallback.str();
}

std::optional<SmallVector<int64_t>>
NodeContext::attrInts(StringRef name) const {
  const onnx::AttributeProto *a = attr(name);
  if (!a)
    return std::nullopt;
  return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
}

LogicalResult NodeContext::fail(const Twine &message) {
  importer.error() = importer.file().path() + ": node " + nodeName(node) +
                     " (" + node.op_type() + "): " + message.str();
  return failure();
}

LogicalResult NodeContext::setResult(size_t i, Value v) {
  if (i >= numResults())
    return success(); // an output the model does not name
  if (!node.output(int(i)).empty())
    importer.define(node.output(int(i)), OnnxValue{v, std::nullopt});
  return success();
}

LogicalResult NodeContext::setConstant(size_t i, HostTensor t) {
  if (!elementType(context(), t.type))
    return fail("a result of element type " + typeName(t.type) +
                " is not supported");
  if (i < numResults() && !node.output(int(i)).empty())
    importer.define(node.output(int(i)), OnnxValue{Value(), std::move(t)});
  return success();
}

FailureOr<int64_t> NodeContext::normalizeAxis(int64_t axis, int64_t rank,
                                              StringRef what) {
  if (axis < -rank || axis >= rank)
    return fail(what + " " + Twine(axis) + " is out of range for rank " +
                Twine(rank));
  return axis < 0 ? axis + rank : axis;
}

//===----------------------------------------------------------------------===//
// GraphImporter
//===----------------------------------------------------------------------===//

const ConverterMap &converters() {
  static const ConverterMap map = [] {
    ConverterMap m;
    registerElementwiseOps(m);
    registerShapeOps(m);
    registerMatmulOps(m);
    registerNormalizationOps(m);
    registerConstantOps(m);
    registerConvOps(m);
    registerScatterOps(m);
    registerAttentionOps(m);
    return m;
  }();
  return map;
}

GraphImporter::GraphImporter(MLIRContext &context, const OnnxFile &file,
                             const OnnxImportOptions &options,
                             std::string &error)
    : context_(context), file_(file), options_(options), error_(error),
      builder_(&context) {
  switch (options.computeType) {
  case ComputeType::F32:
    floatType_ = builder_.getF32Type();
    break;
  case ComputeType::F16:
    floatType_ = builder_.getF16Type();
    break;
  case ComputeType::BF16:
    floatType_ = builder_.getBF16Type();
    break;
  }
}

void GraphImporter::define(const std::string &name, OnnxValue v) {
  values_[name] = std::move(v);
}

OnnxValue *GraphImporter::lookup(const std::string &name) {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

Value createConstant(OpBuilder &b, Location loc, const HostTensor &t) {
  DenseElementsAttr attr = t.toAttr(b.getContext());
  return tosa::ConstOp::create(b, loc, attr.getType(), attr);
}

Type GraphImporter::graphType(OnnxType t) const {
  if (t == onnx::TensorProto::FLOAT)
    return floatType_;
  return elementType(&context_, t);
}

Value GraphImporter::constantOp(Location loc, const HostTensor &t) {
  if (t.type != onnx::TensorProto::FLOAT || floatType_.isF32())
    return createConstant(builder_, loc, t);
  OnnxType to = onnxType(floatType_);
  HostTensor narrow = t.castTo(to);
  double largest =
      APFloat::getLargest(floatType_.getFloatSemantics()).convertToDouble();
  for (auto [wide, v] : llvm::zip_equal(t.floats, narrow.floats))
    if (std::isfinite(wide) && std::isinf(v))
      v = std::copysign(largest, wide);
  return createConstant(builder_, loc, narrow);
}

Value GraphImporter::materialize(OnnxValue &v) {
  if (!v.value)
    v.value = constantOp(builder_.getUnknownLoc(), *v.constant);
  return v.value;
}

FailureOr<SmallVector<int64_t>>
GraphImporter::inputShape(const onnx::ValueInfoProto &input) {
  const std::string &name = input.name();
  const onnx::TypeProto::Tensor &tensor = input.type().tensor_type();
  auto given = options_.inputShapes.find(name);
  std::string where = file_.path() + ": input '" + name + "'";
  if (!tensor.has_shape()) {
    if (given != options_.inputShapes.end())
      return SmallVector<int64_t>(given->second.begin(), given->second.end());
    error_ = where + ": the file gives no shape: give --input-shape " + name +
             "=...";
    return failure();
  }
  const auto &dims = tensor.shape().dim();
  if (given != options_.inputShapes.end() &&
      given->second.size() != size_t(dims.size())) {
    error_ = where + ": --input-shape gives " +
             std::to_string(given->second.size()) +
             " dimensions, the file has " + std::to_string(dims.size());
    return failure();
  }
  SmallVector<int64_t> shape;
  for (auto [i, dim] : llvm::enumerate(dims)) {
    std::string which =
        "dimension " + std::to_string(i) +
        (dim.has_dim_param() ? " ('" + dim.dim_param() + "')" : std::string());
    if (given != options_.inputShapes.end()) {
      int64_t want = given->second[i];
      if (dim.has_dim_value() && dim.dim_value() != want) {
        error_ = where + ": " + which + " is " +
                 std::to_string(dim.dim_value()) + " in the file, " +
                 std::to_string(want) + " in --input-shape";
        return failure();
      }
      if (dim.has_dim_param())
        dimParams_.try_emplace(dim.dim_param(), want);
      shape.push_back(want);
      continue;
    }
    if (dim.has_dim_value() && dim.dim_value() >= 0) {
      shape.push_back(dim.dim_value());
      continue;
    }
    if (dim.has_dim_param()) {
      auto known = dimParams_.find(dim.dim_param());
      if (known != dimParams_.end()) {
        shape.push_back(known->second);
        continue;
      }
    }
    std::optional<int64_t> value =
        i == 0 ? std::optional<int64_t>(options_.batch) : options_.seqLen;
    if (!value) {
      error_ = where + ": " + which +
               " is dynamic: give --seq-len or --input-shape " + name + "=...";
      return failure();
    }
    if (dim.has_dim_param())
      dimParams_.try_emplace(dim.dim_param(), *value);
    shape.push_back(*value);
  }
  return shape;
}

LogicalResult GraphImporter::addInputs() {
  std::set<std::string> initializers;
  for (const onnx::TensorProto &t : file_.graph().initializer())
    initializers.insert(t.name());
  // Inputs named by --input-shape first, so that their dim_params give the
  // other inputs' dimensions.
  std::vector<const onnx::ValueInfoProto *> inputs;
  for (const onnx::ValueInfoProto &input : file_.graph().input())
    if (!initializers.count(input.name()))
      inputs.push_back(&input);
  std::partition(inputs.begin(), inputs.end(), [&](const auto *input) {
    return options_.inputShapes.count(input->name()) != 0;
  });
  for (const auto &entry : options_.inputShapes)
    if (llvm::none_of(
            inputs, [&](const auto *i) { return i->name() == entry.first; })) {
      const std::string &name = entry.first;
      error_ = file_.path() + ": --input-shape names '" + name +
               "', which is not an input of the graph";
      return failure();
    }
  std::map<std::string, std::pair<RankedTensorType, Location>> resolved;
  for (const onnx::ValueInfoProto *input : inputs) {
    if (!input->type().has_tensor_type()) {
      error_ = file_.path() + ": input '" + input->name() +
               "' is not a tensor (sequences and maps are not supported)";
      return failure();
    }
    OnnxType t = input->type().tensor_type().elem_type();
    Type et = graphType(t);
    if (!et || t == onnx::TensorProto::DOUBLE) {
      error_ = file_.path() + ": input '" + input->name() + "': element type " +
               typeName(t) + " is not supported";
      return failure();
    }
    FailureOr<SmallVector<int64_t>> shape = inputShape(*input);
    if (failed(shape))
      return failure();
    resolved.insert_or_assign(
        input->name(),
        std::make_pair(
            RankedTensorType::get(*shape, et),
            Location(NameLoc::get(builder_.getStringAttr(input->name())))));
  }
  // Arguments in the file's order.
  for (const onnx::ValueInfoProto &input : file_.graph().input()) {
    auto it = resolved.find(input.name());
    if (it == resolved.end())
      continue;
    Value arg = body_->addArgument(it->second.first, it->second.second);
    argAttrs_.push_back(builder_.getDictionaryAttr(
        {builder_.getNamedAttr("tfc.name",
                               builder_.getStringAttr(input.name())),
         builder_.getNamedAttr("tfc.role", builder_.getStringAttr("input"))}));
    define(input.name(), OnnxValue{arg, std::nullopt});
  }
  return success();
}

Value GraphImporter::addWeight(const onnx::TensorProto &tensor,
                               const TensorLocation &location) {
  SmallVector<int64_t> shape(tensor.dims().begin(), tensor.dims().end());
  // An argument of the compute type: where the file holds another, the
  // runtime converts its elements (`dtype`) once, when it binds them.
  Type et = graphType(tensor.data_type());
  Value arg =
      body_->addArgument(RankedTensorType::get(shape, et),
                         NameLoc::get(builder_.getStringAttr(tensor.name())));
  Builder &b = builder_;
  SmallVector<NamedAttribute> where = {
      b.getNamedAttr("file", b.getStringAttr(location.file)),
      b.getNamedAttr("offset", b.getI64IntegerAttr(location.offset)),
      b.getNamedAttr("nbytes", b.getI64IntegerAttr(location.nbytes)),
      b.getNamedAttr("check", b.getStringAttr(location.check))};
  Type stored = elementType(&context_, tensor.data_type());
  if (stored != et)
    where.push_back(b.getNamedAttr("dtype", TypeAttr::get(stored)));
  argAttrs_.push_back(b.getDictionaryAttr(
      {b.getNamedAttr("tfc.name", b.getStringAttr(tensor.name())),
       b.getNamedAttr("tfc.role", b.getStringAttr("weight")),
       b.getNamedAttr("tfc.weight_location", b.getDictionaryAttr(where))}));
  return arg;
}

LogicalResult GraphImporter::recordFolded(const onnx::TensorProto &tensor) {
  // Its bytes (the whole TensorProto, or the external data) as the file
  // holds them now: the runtime refuses a file where they differ, since
  // the compiled code holds the values.
  const TensorLocation *location = file_.location(tensor.name());
  if (!location || location->protoOffset < 0) {
    error_ = file_.path() + ": initializer '" + tensor.name() +
             "': internal error: not found in the file";
    return failure();
  }
  bool external = tensor.data_location() == onnx::TensorProto::EXTERNAL;
  return recordCompiledBytes(
      "initializer '" + tensor.name() + "'", external ? location->file : "",
      external ? location->offset : location->protoOffset,
      external ? location->nbytes : location->protoLength);
}

LogicalResult GraphImporter::recordCompiledBytes(const std::string &what,
                                                 const std::string &file,
                                                 int64_t offset,
                                                 int64_t nbytes) {
  std::string bytes = file_.readRange(file, offset, nbytes);
  if (int64_t(bytes.size()) != nbytes) {
    error_ = file_.path() + ": " + what + ": its bytes could not be read";
    return failure();
  }
  uint64_t hash =
      tfc_hash_bytes_(0xcbf29ce484222325ull, bytes.data(), bytes.size());
  Builder &b = builder_;
  folded_.push_back(b.getDictionaryAttr(
      {b.getNamedAttr("name", b.getStringAttr(what)),
       b.getNamedAttr("file", b.getStringAttr(file)),
       b.getNamedAttr("offset", b.getI64IntegerAttr(offset)),
       b.getNamedAttr("nbytes", b.getI64IntegerAttr(nbytes)),
       b.getNamedAttr("hash", b.getI64IntegerAttr(int64_t(hash)))}));
  return success();
}

LogicalResult GraphImporter::addInitializers() {
  for (const onnx::TensorProto &tensor : file_.graph().initializer()) {
    std::string where = file_.path() + ": initializer '" + tensor.name() + "'";
    if (tensor.name().empty()) {
      error_ = file_.path() + ": an initializer has no name";
      return failure();
    }
    if (lookup(tensor.name())) {
      error_ = where + ": defined twice";
      return failure();
    }
    int64_t elements = 1;
    for (int64_t d : tensor.dims()) {
      if (d < 0 || (d > 0 && elements > (int64_t(1) << 40) / d)) {
        error_ = where + ": dims that are negative or too large";
        return failure();
      }
      elements *= d;
    }
    const TensorLocation *location = file_.location(tensor.name());
    if (location && location->offset < 0)
      location = nullptr; // typed fields: read, folded
    Type et = elementType(&context_, tensor.data_type());
    int64_t size = typeSize(tensor.data_type());
    // Integer tensors (positions, indices, shapes) are folded like the
    // small float ones: the graph computes with them when it compiles.
    bool weight = isFloatType(tensor.data_type()) ? elements > kInlineElements
                                                  : elements > kMaxFoldElements;
    if (location && weight && et &&
        tensor.data_type() != onnx::TensorProto::DOUBLE) {
      if (location->nbytes != elements * size) {
        error_ = where + ": holds " + std::to_string(location->nbytes) +
                 " bytes of data, its dims say " +
                 std::to_string(elements * size);
        return failure();
      }
      // A weight: an argument (finish() drops those no node reads).
      define(tensor.name(), OnnxValue{addWeight(tensor, *location), {}});
      continue;
    }
    HostTensor host;
    if (!readTensor(tensor, file_, host, error_)) {
      error_ = where + ": " + error_;
      return failure();
    }
    if (!et) {
      error_ = where + ": has unsupported data type " + typeName(host.type);
      return failure();
    }
    define(tensor.name(), OnnxValue{Value(), std::move(host)});
    if (failed(recordFolded(tensor)))
      return failure();
  }
  return success();
}

LogicalResult GraphImporter::addNodes() {
  const ConverterMap &map = converters();
  for (const onnx::NodeProto &node : file_.graph().node()) {
    NodeContext ctx(*this, node, file_.opset());
    std::string domain = node.domain();
    if (!domain.empty() && domain != "ai.onnx") {
      int64_t version = 0;
      for (const auto &set : file_.model().opset_import())
        if (set.domain() == domain)
          version = set.version();
      return ctx.fail("operator of domain '" + domain + "' (opset " +
                      Twine(version) + ") is not supported");
    }
    auto it = map.find(node.op_type());
    if (it == map.end())
      return ctx.fail("operator not supported (domain 'ai.onnx', opset " +
                      Twine(file_.opset()) + ")");
    FailureOr<OpVersion> version = checkOpVersion(ctx);
    if (failed(version))
      return failure();
    // The translations read the inputs the schema requires without asking
    // has().
    unsigned required = version->minInputs;
    if (ctx.numInputs() < required)
      return ctx.fail("needs " + Twine(required) + " inputs, has " +
                      Twine(ctx.numInputs()));
    if (!version->variadic() && ctx.numInputs() > version->maxInputs)
      return ctx.fail("takes at most " + Twine(version->maxInputs) +
                      (version->maxInputs == 1 ? " input" : " inputs") +
                      " (version " + Twine(version->since) + "), has " +
                      Twine(ctx.numInputs()));
    // A variadic list (Concat, Max, Min) has no optional member.
    bool variadic = version->variadic();
    for (unsigned i = 0, e = variadic ? ctx.numInputs() : required; i < e; ++i)
      if (!ctx.has(i))
        return ctx.fail("input " + Twine(i) +
                        " is required (its name is empty)");
    for (const std::string &input : node.input())
      if (!input.empty() && !lookup(input))
        return ctx.fail("input '" + input +
                        "' is defined by no node, input or initializer "
                        "before it");
    if (failed(it->second(ctx)))
      return failure();
    for (const std::string &output : node.output())
      if (!output.empty() && !lookup(output))
        return ctx.fail("internal error: output '" + output + "' not set");
  }
  return success();
}

FailureOr<OwningOpRef<ModuleOp>> GraphImporter::finish() {
  SmallVector<Value> results;
  SmallVector<std::string> names;
  for (const onnx::ValueInfoProto &output : file_.graph().output()) {
    OnnxValue *v = lookup(output.name());
    if (!v) {
      error_ = file_.path() + ": output '" + output.name() +
               "' is computed by no node";
      return failure();
    }
    bool empty =
        v->constant
            ? v->constant->size() == 0
            : cast<ShapedType>(v->value.getType()).getNumElements() == 0;
    if (empty) {
      error_ = file_.path() + ": output '" + output.name() +
               "' has no elements; tfc does not return empty tensors";
      return failure();
    }
    results.push_back(materialize(*v));
    names.push_back(output.name());
  }
  if (results.empty()) {
    error_ = file_.path() + ": the graph has no outputs";
    return failure();
  }
  func::ReturnOp::create(builder_, func_.getLoc(), results);
  // Weights no node read are not arguments.
  for (int64_t i = int64_t(body_->getNumArguments()) - 1; i >= 0; --i) {
    if (!body_->getArgument(unsigned(i)).use_empty())
      continue;
    auto role = argAttrs_[size_t(i)].getAs<StringAttr>("tfc.role");
    if (role && role.getValue() == "weight") {
      body_->eraseArgument(unsigned(i));
      argAttrs_.erase(argAttrs_.begin() + i);
    }
  }
  SmallVector<Type> resultTypes;
  for (Value r : results)
    resultTypes.push_back(r.getType());
  func_.setType(
      builder_.getFunctionType(body_->getArgumentTypes(), resultTypes));
  func_.setAllArgAttrs(argAttrs_);
  if (!folded_.empty())
    (*module_)->setAttr("tfc.folded_initializers",
                        builder_.getArrayAttr(folded_));
  for (auto [i, name] : llvm::enumerate(names))
    func_.setResultAttr(unsigned(i), "tfc.name", builder_.getStringAttr(name));
  std::string diagnostics;
  {
    ScopedDiagnosticHandler handler(&context_, [&](Diagnostic &diag) {
      raw_string_ostream os(diagnostics);
      os << diag.getLocation() << ": " << diag << "; ";
      return success();
    });
    if (failed(verify(*module_))) {
      error_ = file_.path() +
               ": internal error: the imported graph does not verify: " +
               diagnostics;
      return failure();
    }
  }
  return std::move(module_);
}

FailureOr<OwningOpRef<ModuleOp>> GraphImporter::run() {
  context_.loadDialect<func::FuncDialect, tosa::TosaDialect>();
  Location loc = NameLoc::get(builder_.getStringAttr("model"));
  module_ = ModuleOp::create(loc);
  builder_.setInsertionPointToEnd(module_->getBody());
  func_ = func::FuncOp::create(builder_, loc, "main",
                               builder_.getFunctionType({}, {}));
  body_ = func_.addEntryBlock();
  builder_.setInsertionPointToStart(body_);
  if (failed(addInputs()) || failed(addInitializers()) || failed(addNodes()))
    return failure();
  // The nodes (with their Constant values) are compiled in as well.
  if (file_.nodes().offset >= 0 &&
      failed(recordCompiledBytes("the graph's nodes", "", file_.nodes().offset,
                                 file_.nodes().nbytes)))
    return failure();
  return finish();
}

} // namespace tfc::onnx_import

namespace tfc {

FailureOr<OwningOpRef<ModuleOp>> importOnnx(MLIRContext &context,
                                            StringRef path,
                                            const OnnxImportOptions &options,
                                            std::string &error) {
  std::unique_ptr<onnx_import::OnnxFile> file =
      onnx_import::OnnxFile::open(path, error);
  if (!file)
    return failure();
  onnx_import::GraphImporter importer(context, *file, options, error);
  return importer.run();
}

std::vector<std::string> supportedOnnxOperators() {
  std::vector<std::string> names;
  for (const auto &entry : onnx_import::converters())
    names.push_back(entry.getKey().str());
  llvm::sort(names);
  return names;
}

} // namespace tfc
