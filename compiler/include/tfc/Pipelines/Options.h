//===- Options.h - The words tfc's pipeline options take --------*- C++ -*-===//
//
// The enum types of the options that take one of a fixed set of words, with
// their words, declared once for the pipelines' options (CPU.h, GPU.h), the
// passes that take them (tfc/Conversion/Passes.td) and tfc-compile's flags;
// the check that crosses the two quantization options; and the registration
// of a pipeline whose options are verified before it is built.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_PIPELINES_OPTIONS_H
#define TFC_PIPELINES_OPTIONS_H

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/LLVM.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/CommandLine.h"

#include <string>

namespace tfc {

/// How the CPU matmuls' weights are quantized as the kernels pack them.
enum class QuantizeWeights { None, Int8, Int4 };

/// Whether the CPU matmuls with quantized weights quantize their
/// activations too.
enum class QuantizeActivations { None, Int8 };

/// What the NVPTX kernels become: PTX, or a cubin made by ptxas.
enum class GpuBinaryFormat { Isa, Bin };

inline llvm::cl::ValuesClass quantizeWeightsValues() {
  return llvm::cl::values(
      clEnumValN(QuantizeWeights::None, "none", "f32/f16/bf16 weights"),
      clEnumValN(QuantizeWeights::Int8, "int8",
                 "int8, a scale per output column"),
      clEnumValN(QuantizeWeights::Int4, "int4",
                 "int4, a scale per output column and 128 input rows"));
}

inline llvm::cl::ValuesClass quantizeActivationsValues() {
  return llvm::cl::values(
      clEnumValN(QuantizeActivations::None, "none", "f32 activations"),
      clEnumValN(QuantizeActivations::Int8, "int8",
                 "int8, a scale per row and block of 128"));
}

inline llvm::cl::ValuesClass gpuBinaryFormatValues() {
  return llvm::cl::values(
      clEnumValN(GpuBinaryFormat::Isa, "isa", "PTX"),
      clEnumValN(GpuBinaryFormat::Bin, "bin", "a cubin, by ptxas"));
}

/// Fails, with `error` set, where activations are quantized without the
/// weights. `prefix` comes before each option's name in the message ("--"
/// for tfc-compile's flags).
inline mlir::LogicalResult verifyQuantization(QuantizeWeights weights,
                                              QuantizeActivations activations,
                                              std::string &error,
                                              llvm::StringRef prefix = "") {
  if (activations == QuantizeActivations::Int8 &&
      weights == QuantizeWeights::None) {
    error = (prefix + "quantize-activations=int8 needs " + prefix +
             "quantize-weights=int8 or int4")
                .str();
    return mlir::failure();
  }
  return mlir::success();
}

/// Registers the pipeline `arg` built by `build` from the options of
/// `OptionsT`, which are verified first (`OptionsT::verify`): an error
/// there fails the pipeline's parse with its message.
template <typename OptionsT>
void registerVerifiedPipeline(llvm::StringRef arg, llvm::StringRef description,
                              void (*build)(mlir::OpPassManager &,
                                            const OptionsT &)) {
  mlir::registerPassPipeline(
      arg, description,
      [build](mlir::OpPassManager &pm, llvm::StringRef text,
              llvm::function_ref<mlir::LogicalResult(const llvm::Twine &)>
                  errorHandler) {
        OptionsT options;
        if (mlir::failed(options.parseFromString(text)))
          return mlir::failure();
        std::string error;
        if (mlir::failed(options.verify(error))) {
          (void)errorHandler(error);
          return mlir::failure();
        }
        build(pm, options);
        return mlir::success();
      },
      [](llvm::function_ref<void(const mlir::detail::PassOptions &)> handler) {
        handler(OptionsT());
      });
}

} // namespace tfc

#endif // TFC_PIPELINES_OPTIONS_H
