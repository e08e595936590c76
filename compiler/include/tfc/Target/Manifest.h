//===- Manifest.h - The signature of a compiled model -----------*- C++ -*-===//
//
// What tfc-compile records of the entry function before lowering: names,
// roles, dtypes and shapes of its arguments and results. It becomes the
// `tfc_manifest` of runtime/include/tfc/runtime/abi.h.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_TARGET_MANIFEST_H
#define TFC_TARGET_MANIFEST_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tfc {

struct TensorSpec {
  std::string name;
  int32_t dtype; // tfc_dtype
  int32_t role;  // tfc_tensor_role
  std::vector<int64_t> shape;
  /// [lo, hi) for integer inputs that index a table (tfc_tensor_desc.bounds).
  std::optional<std::pair<int64_t, int64_t>> bounds;
  /// Tensor-parallel models (`tfc.split = array<i64: axis, groups>`): the
  /// axis split across the ranks and its groups (tfc_tensor_split of
  /// abi.h); axis -1: whole on every rank. `splitWhole`: the whole
  /// tensor's length along the axis (`tfc.split`'s third entry, for a
  /// weight padded to the ranks' parts; else the parts'); 0: not split.
  int32_t splitAxis = -1, splitGroups = 1;
  int64_t splitWhole = 0;
};

/// Where a weight's bytes lie in the model file (ONNX imports,
/// `tfc.weight_location`): tfc_weight_location of abi.h.
struct WeightLocation {
  std::string file;
  int64_t offset = 0, nbytes = 0;
  std::string check;
  /// The tfc_dtype of the bytes in the file (the weight's own, or f32
  /// converted when bound to an f16/bf16 weight).
  int32_t dtype = 0;
};

/// An initializer compiled in as a constant, and the hash of its bytes
/// (`tfc.folded_initializers`): tfc_folded_tensor of abi.h.
struct FoldedTensor {
  std::string name, file;
  int64_t offset = 0, nbytes = 0;
  uint64_t hash = 0;
};

/// tfc_weight_file of abi.h: one location per weight, in order.
struct WeightFile {
  std::vector<WeightLocation> weights;
  std::vector<FoldedTensor> folded;
};

struct Manifest {
  std::string entry;
  std::string target;
  std::vector<TensorSpec> args;
  std::vector<TensorSpec> results;
  /// For a model whose weights lie in its own file (ONNX).
  std::optional<WeightFile> weightFile;
  /// The ranks a tensor-parallel model is split across
  /// (`tfc.tensor_parallel` of the module); 1: not split.
  int32_t tensorParallel = 1;
};

/// One of the builds of a model for several batch sizes or sequence lengths
/// (abi.h, "Variants"): the model's function for `batch` sequences of
/// `length` new tokens.
struct ModelVariant {
  int64_t batch;
  int64_t length;
  Manifest manifest;
};

/// The module attribute that convert-linalg-matmul-to-cpu leaves: a
/// dictionary from each function's name to the indices (array<i64>) of its
/// weight arguments that no code reads but the GEMM kernel, which packs
/// them once with loads of any alignment. The library tells the runtime
/// (abi.h, tfc_model_weight_alignment), which then binds them in place
/// wherever they lie in a weights file.
inline constexpr llvm::StringLiteral kPackedOnlyWeightsAttr =
    "tfc.packed_only_weights";

/// Reads the signature of the entry function: `entry` if given, else the only
/// public function. Arguments and results must be statically shaped tensors
/// of a supported dtype; names come from `tfc.name` attributes (else
/// `input<i>` / `output<i>`), roles from `tfc.role` ("input" or "weight").
/// An integer input that indexes a tosa.gather gets the bounds [0, rows of
/// the table), which the runtime checks on every run. Weights that carry
/// `tfc.weight_location` (all or none) give the manifest's weightFile.
/// Emits an error naming the function and argument otherwise.
mlir::FailureOr<Manifest> extractManifest(mlir::ModuleOp module,
                                          llvm::StringRef entry);

} // namespace tfc

#endif // TFC_TARGET_MANIFEST_H
