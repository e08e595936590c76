//===- Onnx.h - Import ONNX models ---------------------------------*- C++
//-*-===//
//
// Reads an ONNX model (`.onnx`, with its external data files if any) and
// emits the unfused TOSA graph it computes, as one `func.func @main`, the
// way the Hugging Face importer writes a framework's graph: the fusion
// passes then find attention, softmax and the norms in it.
//
// Initializers of more than a few elements become weight arguments
// (`tfc.role = "weight"`, `tfc.name` = the initializer's name) carrying
// `tfc.weight_location` (where their bytes lie in the file), so that the
// runtime binds them by mapping the `.onnx` file; smaller ones and
// everything computed from shapes and constants are folded into constants.
// Dynamic dimensions take their values from the options. With a compute
// type other than f32, the graph's f32 tensors (inputs, weights, constants,
// what nodes compute and cast to, outputs) take that type; the runtime
// converts the file's f32 weights when it binds them.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_IMPORTER_ONNX_H
#define TFC_IMPORTER_ONNX_H

#include "tfc/Importer/HuggingFace.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tfc {

struct OnnxImportOptions {
  /// The value of a graph input's first dimension where the file leaves it
  /// dynamic (a dim_param such as "batch", or none).
  int64_t batch = 1;
  /// The value of its other dynamic dimensions; without it they are an
  /// error naming the input and the dimension.
  std::optional<int64_t> seqLen;
  /// Whole shapes by input name (--input-shape NAME=2x128); they win over
  /// batch and seqLen, and their dim_params give other inputs' dims of the
  /// same name.
  std::map<std::string, std::vector<int64_t>> inputShapes;
  /// What the graph's f32 tensors compute in (--dtype), f16 or bf16 as in
  /// the Hugging Face import: float inputs, outputs and weights in that
  /// type, LayerNormalization and RMSNormalization statistics in f32.
  ComputeType computeType = ComputeType::F32;
};

/// Imports the model file `path`. On failure returns failure() and sets
/// `error` to one line naming the file and the node, tensor or field at
/// fault. The returned module has been verified.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
importOnnx(mlir::MLIRContext &context, llvm::StringRef path,
           const OnnxImportOptions &options, std::string &error);

/// The ONNX operators the importer translates, sorted.
std::vector<std::string> supportedOnnxOperators();

} // namespace tfc

#endif // TFC_IMPORTER_ONNX_H
