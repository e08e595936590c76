//===- OpVersions.cpp - The ONNX operator versions tfc translates ---------===//
//
// An ONNX node's semantics are those of its operator's newest version whose
// since_version is at most the model's default operator set. This file
// keeps ONNX's version history of each operator the importer translates
// (onnx 1.23.2, operator sets up to 28, from
// onnx.defs.get_all_schemas_with_history()) and refuses a node whose
// operator set selects a version tfc does not translate.
//
// The versions after operator set 24 change only types, which the importer
// refuses by element type where it does not compute in them (int2 and
// uint2 in 25, float6 in 28), but for Range 27 (stash_type, the precision
// of an f16 or bf16 range: tfc computes every range exactly and rounds
// once, as stash_type FLOAT or DOUBLE do to the type's precision) and
// Attention 25 (sliding windows), which is not translated.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace llvm;

namespace tfc::onnx_import {

namespace {

using Versions = SmallVector<int64_t, 12>;

/// Each translated operator's since_versions in ONNX's default domain.
const StringMap<Versions> &histories() {
  static const StringMap<Versions> map = {
      {"Abs", {1, 6, 13}},
      {"Add", {1, 6, 7, 13, 14}},
      {"And", {1, 7}},
      {"Attention", {23, 24, 25}},
      {"Cast", {1, 6, 9, 13, 19, 21, 23, 24, 25, 28}},
      {"CastLike", {15, 19, 21, 23, 24, 25}},
      {"Ceil", {1, 6, 13}},
      {"Clip", {1, 6, 11, 12, 13}},
      {"Concat", {1, 4, 11, 13}},
      {"Constant", {1, 9, 11, 12, 13, 19, 21, 23, 24, 25}},
      {"ConstantOfShape", {9, 20, 21, 23, 24, 25}},
      {"Conv", {1, 11, 22}},
      {"Cos", {7, 22}},
      {"CumSum", {11, 14}},
      {"Div", {1, 6, 7, 13, 14}},
      {"Dropout", {1, 6, 7, 10, 12, 13, 22}},
      {"Equal", {1, 7, 11, 13, 19}},
      {"Erf", {9, 13}},
      {"Exp", {1, 6, 13}},
      {"Expand", {8, 13}},
      {"Flatten", {1, 9, 11, 13, 21, 23, 24, 25}},
      {"Floor", {1, 6, 13}},
      {"Gather", {1, 11, 13}},
      {"GatherElements", {11, 13}},
      {"GatherND", {11, 12, 13}},
      {"Gelu", {20}},
      {"Gemm", {1, 6, 7, 9, 11, 13}},
      {"Greater", {1, 7, 9, 13}},
      {"GreaterOrEqual", {12, 16}},
      {"Identity", {1, 13, 14, 16, 19, 21, 23, 24, 25}},
      {"IsNaN", {9, 13, 20}},
      {"LayerNormalization", {17}},
      {"Less", {1, 7, 9, 13}},
      {"LessOrEqual", {12, 16}},
      {"Log", {1, 6, 13}},
      {"LogSoftmax", {1, 11, 13}},
      {"MatMul", {1, 9, 13}},
      {"Max", {1, 6, 8, 12, 13}},
      {"Min", {1, 6, 8, 12, 13}},
      {"Mul", {1, 6, 7, 13, 14}},
      {"Neg", {1, 6, 13}},
      {"Not", {1}},
      {"Or", {1, 7}},
      {"Pow", {1, 7, 12, 13, 15}},
      {"RMSNormalization", {23}},
      {"Range", {11, 27}},
      {"Reciprocal", {1, 6, 13}},
      {"ReduceL1", {1, 11, 13, 18}},
      {"ReduceL2", {1, 11, 13, 18}},
      {"ReduceLogSum", {1, 11, 13, 18, 28}},
      {"ReduceLogSumExp", {1, 11, 13, 18, 28}},
      {"ReduceMax", {1, 11, 12, 13, 18, 20}},
      {"ReduceMean", {1, 11, 13, 18}},
      {"ReduceMin", {1, 11, 12, 13, 18, 20}},
      {"ReduceSum", {1, 11, 13}},
      {"ReduceSumSquare", {1, 11, 13, 18}},
      {"Relu", {1, 6, 13, 14}},
      {"Reshape", {1, 5, 13, 14, 19, 21, 23, 24, 25}},
      {"ScatterND", {11, 13, 16, 18}},
      {"Shape", {1, 13, 15, 19, 21, 23, 24, 25}},
      {"Sigmoid", {1, 6, 13}},
      {"Sin", {7, 22}},
      {"Size", {1, 13, 19, 21, 23, 24, 25}},
      {"Slice", {1, 10, 11, 13}},
      {"Softmax", {1, 11, 13}},
      {"Split", {1, 2, 11, 13, 18}},
      {"Sqrt", {1, 6, 13}},
      {"Squeeze", {1, 11, 13, 21, 23, 24, 25}},
      {"Sub", {1, 6, 7, 13, 14}},
      {"Tanh", {1, 6, 13}},
      {"Tile", {1, 6, 13}},
      {"Transpose", {1, 13, 21, 23, 24, 25}},
      {"Trilu", {14}},
      {"Unsqueeze", {1, 11, 13, 21, 23, 24, 25}},
      {"Where", {9, 16}},
      {"Xor", {1, 7}},
  };
  return map;
}

/// The versions of ONNX's history that the importer does not translate.
bool translated(StringRef op, int64_t version) {
  return !(op == "Attention" && version == 25);
}

} // namespace

LogicalResult checkOpVersion(NodeContext &ctx) {
  StringRef op = ctx.node.op_type();
  auto it = histories().find(op);
  if (it == histories().end())
    return ctx.fail("internal error: no ONNX version history for the "
                    "operator");
  const Versions &history = it->second;
  auto newer = llvm::upper_bound(history, ctx.opset);
  if (newer == history.begin())
    return ctx.fail("ai.onnx operator " + op + " does not exist in opset " +
                    Twine(ctx.opset) + " (it is defined from version " +
                    Twine(history.front()) + ")");
  int64_t version = *std::prev(newer);
  if (!translated(op, version)) {
    SmallVector<std::string> known;
    for (int64_t v : history)
      if (translated(op, v))
        known.push_back(std::to_string(v));
    return ctx.fail("ai.onnx operator " + op + " version " + Twine(version) +
                    " (selected by opset " + Twine(ctx.opset) +
                    ") is not supported: tfc translates its versions " +
                    join(known, ", "));
  }
  if (op == "Range" && version >= 27) {
    int64_t stash = ctx.attrInt("stash_type", onnx::TensorProto::FLOAT);
    if (stash != onnx::TensorProto::FLOAT && stash != onnx::TensorProto::DOUBLE)
      return ctx.fail("stash_type " + Twine(stash) +
                      " is not FLOAT (1) or DOUBLE (11)");
  }
  return success();
}

} // namespace tfc::onnx_import
