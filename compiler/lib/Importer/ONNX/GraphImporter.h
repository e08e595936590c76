//===- GraphImporter.h - Translating an ONNX graph to TOSA -------*- C++
//-*-===//
//
// The state of one import: the function being built, what each ONNX value
// name stands for (an MLIR value, a tensor known at compile time, or both),
// and the per-node context that operator translations work through.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_LIB_IMPORTER_ONNX_GRAPHIMPORTER_H
#define TFC_LIB_IMPORTER_ONNX_GRAPHIMPORTER_H

#include "HostTensor.h"
#include "OnnxFile.h"

#include "tfc/Dialect/Transformer/Utils/TosaBuilder.h"
#include "tfc/Importer/Onnx.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include <optional>

namespace tfc::onnx_import {

/// What an ONNX value name stands for.
struct OnnxValue {
  /// The value in the graph; null until a constant is first used as one.
  mlir::Value value;
  /// The elements, where known when the model compiles.
  std::optional<HostTensor> constant;
};

class GraphImporter;

/// One node being translated: its inputs, attributes and results.
class NodeContext {
public:
  NodeContext(GraphImporter &importer, const onnx::NodeProto &node,
              int64_t opset);

  const onnx::NodeProto &node;
  /// The version of the default operator set the model imports.
  const int64_t opset;
  TosaBuilder tb;
  mlir::OpBuilder &b() { return tb.builder(); }
  mlir::MLIRContext *context() { return b().getContext(); }
  const OnnxFile &file() const;

  /// The node's inputs; an optional input left out is absent (has() false).
  size_t numInputs() const { return size_t(node.input_size()); }
  bool has(size_t i) const;
  /// The elements of input i where known at compile time, else nullptr.
  const HostTensor *constant(size_t i);
  /// Whether every present input is known at compile time.
  bool allConstant();
  /// Input i as a graph value (a constant becomes a tosa.const).
  mlir::Value value(size_t i);
  /// `t` as a tosa.const of the graph at the node's location: f32 in the
  /// compute type (GraphImporter::graphType).
  mlir::Value constantOp(const HostTensor &t);
  /// The element type of the graph's tensors of `t`.
  mlir::Type graphType(OnnxType t) const;
  mlir::RankedTensorType type(size_t i);
  llvm::ArrayRef<int64_t> shape(size_t i) { return type(i).getShape(); }
  int64_t rank(size_t i) { return type(i).getRank(); }
  OnnxType onnxTypeOf(size_t i) { return onnxType(type(i).getElementType()); }

  const onnx::AttributeProto *attr(llvm::StringRef name) const;
  int64_t attrInt(llvm::StringRef name, int64_t fallback) const;
  double attrFloat(llvm::StringRef name, double fallback) const;
  std::string attrString(llvm::StringRef name,
                         llvm::StringRef fallback = "") const;
  /// An INTS attribute; nullopt when absent.
  std::optional<llvm::SmallVector<int64_t>>
  attrInts(llvm::StringRef name) const;

  /// Records "file: node 'n' (Op): message" as the error; returns failure.
  mlir::LogicalResult fail(const llvm::Twine &message);
  /// Makes result i stand for `v` (or the constant `t`).
  mlir::LogicalResult setResult(size_t i, mlir::Value v);
  mlir::LogicalResult setConstant(size_t i, HostTensor t);
  size_t numResults() const { return size_t(node.output_size()); }

  /// An axis attribute or input value in [-rank, rank) made non-negative;
  /// fails naming `what` otherwise.
  mlir::FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank,
                                         llvm::StringRef what);

private:
  OnnxValue &input(size_t i);
  GraphImporter &importer;
};

/// `t` as a tosa.const of exactly its type.
mlir::Value createConstant(mlir::OpBuilder &b, mlir::Location loc,
                           const HostTensor &t);

using Converter = mlir::LogicalResult (*)(NodeContext &);
using ConverterMap = llvm::StringMap<Converter>;

/// The translations by op type, registered by each Ops*.cpp.
void registerElementwiseOps(ConverterMap &map);
void registerShapeOps(ConverterMap &map);
void registerMatmulOps(ConverterMap &map);
void registerNormalizationOps(ConverterMap &map);
void registerConstantOps(ConverterMap &map);
void registerConvOps(ConverterMap &map);
void registerScatterOps(ConverterMap &map);
void registerAttentionOps(ConverterMap &map);

/// One version of an ONNX operator: its since_version and its input counts
/// (the schema's min_input; max_input, ~0u where its last input is
/// variadic).
struct OpVersion {
  int64_t since;
  unsigned minInputs, maxInputs;
  bool variadic() const { return maxInputs == ~0u; }
};

/// The version of the node's operator that the model's operator set
/// selects; fails naming the node where tfc does not translate that
/// version (OpVersions.cpp).
mlir::FailureOr<OpVersion> checkOpVersion(NodeContext &ctx);

/// a @ b with numpy's rules (OpsMatmul.cpp); failure through ctx.
mlir::FailureOr<mlir::Value> matmul(NodeContext &ctx, mlir::Value a,
                                    mlir::Value b);
/// Softmax, or LogSoftmax, of `x` over `axis` as a framework computes it
/// (max-subtracted exponentials; OpsNormalization.cpp).
mlir::Value softmaxOn(TosaBuilder &tb, mlir::Value x, int32_t axis, bool log);

/// Every translation, built once.
const ConverterMap &converters();

class GraphImporter {
public:
  GraphImporter(mlir::MLIRContext &context, const OnnxFile &file,
                const OnnxImportOptions &options, std::string &error);

  mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>> run();

  const OnnxFile &file() const { return file_; }
  mlir::OpBuilder &builder() { return builder_; }
  std::string &error() { return error_; }
  /// The value named `name`; nullptr where no node, input or initializer
  /// defines it.
  OnnxValue *lookup(const std::string &name);
  /// `v`'s graph value, materialising a constant on first use.
  mlir::Value materialize(OnnxValue &v);
  /// The element type of the graph's tensors of `t`: the compute type for
  /// f32 (options.computeType), elementType(t) otherwise.
  mlir::Type graphType(OnnxType t) const;
  /// `t` as a tosa.const of graphType(t.type): f32 values rounded to the
  /// compute type, finite ones beyond its range to its largest (f32's
  /// lowest, a mask's fill, is f16's lowest, not -inf).
  mlir::Value constantOp(mlir::Location loc, const HostTensor &t);
  void define(const std::string &name, OnnxValue v);

private:
  mlir::LogicalResult addInputs();
  mlir::LogicalResult addInitializers();
  mlir::LogicalResult addNodes();
  mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>> finish();
  mlir::FailureOr<llvm::SmallVector<int64_t>>
  inputShape(const onnx::ValueInfoProto &input);
  mlir::LogicalResult recordFolded(const onnx::TensorProto &tensor);
  /// Records `what`, bytes the compiled code is made of, with their hash
  /// (tfc.folded_initializers): the runtime checks them when it binds.
  mlir::LogicalResult recordCompiledBytes(const std::string &what,
                                          const std::string &file,
                                          int64_t offset, int64_t nbytes);
  mlir::Value addWeight(const onnx::TensorProto &tensor,
                        const TensorLocation &location);

  mlir::MLIRContext &context_;
  const OnnxFile &file_;
  const OnnxImportOptions &options_;
  std::string &error_;
  mlir::OpBuilder builder_;
  /// What the graph's f32 tensors are.
  mlir::FloatType floatType_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
  mlir::func::FuncOp func_;
  mlir::Block *body_ = nullptr;
  llvm::SmallVector<mlir::DictionaryAttr> argAttrs_;
  /// What of the file is compiled in (the initializers folded into
  /// constants, the nodes), with the hash of its bytes
  /// (`tfc.folded_initializers`).
  llvm::SmallVector<mlir::Attribute> folded_;
  llvm::StringMap<OnnxValue> values_;
  /// dim_param name -> value, as inputs resolve them.
  llvm::StringMap<int64_t> dimParams_;
};

} // namespace tfc::onnx_import

#endif // TFC_LIB_IMPORTER_ONNX_GRAPHIMPORTER_H
