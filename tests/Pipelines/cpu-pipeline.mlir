// RUN: tfc-opt %s --tfc-cpu-pipeline | FileCheck %s
// RUN: tfc-opt %s --tfc-cpu-pipeline-unfused | FileCheck %s --check-prefix=UNFUSED
// RUN: tfc-opt %s --tfc-cpu-pipeline=fuse=false | FileCheck %s --check-prefix=UNFUSED
// RUN: tfc-opt %s --tfc-cpu-pipeline="quantize-weights=int4 quantize-activations=int8" --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=OPTIONS
// RUN: tfc-opt %s --tfc-nvptx-pipeline="chip=sm_90a wgmma=true tma=true decode-stages=3" --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=GPUOPTIONS
// RUN: not tfc-opt %s --tfc-cpu-pipeline=quantise=int8 2>&1 | FileCheck %s --check-prefix=BADOPTION
// RUN: not tfc-opt %s --tfc-cpu-pipeline=quantize-weights=int3 2>&1 | FileCheck %s --check-prefix=BADVALUE
// RUN: not tfc-opt %s --tfc-cpu-pipeline=quantize-activations=int8 2>&1 | FileCheck %s --check-prefix=BADQUANT
// RUN: not tfc-opt %s --tfc-nvptx-pipeline=chip=sm_75 2>&1 | FileCheck %s --check-prefix=BADCHIP
// RUN: not tfc-opt %s --tfc-nvptx-pipeline="chip=sm_90 wgmma=true" 2>&1 | FileCheck %s --check-prefix=BADWGMMA
// RUN: not tfc-opt %s --tfc-nvptx-pipeline=format=sass 2>&1 | FileCheck %s --check-prefix=BADFORMAT

// The pipelines take the options tfc-compile sets from its flags, by name;
// each reaches the pass it configures.
// OPTIONS: transformer-fuse
// OPTIONS: convert-linalg-matmul-to-cpu{quantize-activations=int8 quantize-weights=int4}
// GPUOPTIONS: convert-transformer-to-nvptx{{.*}} decode-stages=3 {{.*}}wgmma=true
// GPUOPTIONS: convert-linalg-matmul-to-nvptx{tma=true wgmma=true}
// GPUOPTIONS: nvvm-attach-target{{.*}}chip=sm_90a
// BADOPTION: no such option quantise
// The options are verified before the pipeline is built.
// BADVALUE: for the --quantize-weights option: Cannot find option named 'int3'!
// BADQUANT: error: quantize-activations=int8 needs quantize-weights=int8 or int4
// BADCHIP: error: unknown chip 'sm_75' (expected sm_80 or newer, e.g. sm_80, sm_90, sm_90a)
// BADWGMMA: error: wgmma needs chip=sm_90a (wgmma is not part of sm_90)
// BADFORMAT: for the --format option: Cannot find option named 'sass'!

// The whole CPU lowering to the LLVM dialect, runnable by hand. Fused: the
// attention is one call into the micro-kernel, writing the out-parameter;
// unfused: the matmuls call the GEMM kernel and the softmax is loops (on
// OpenMP threads), with no attention kernel.

// CHECK:       llvm.func private @tfc_uk_attention_f32(
// CHECK:         llvm.call @_mlir_ciface_tfc_uk_attention_f32
// CHECK-LABEL: llvm.func @main(
// CHECK:         llvm.call @tfc_uk_attention_f32(
// CHECK-NOT:     tfc_uk_batch_matmul

// UNFUSED:       llvm.call @_mlir_ciface_tfc_uk_batch_matmul_f32
// UNFUSED-LABEL: llvm.func @main(
// UNFUSED:         omp.parallel
// UNFUSED:         llvm.call @tfc_uk_batch_matmul_f32(
// UNFUSED-NOT:     tfc_uk_attention
func.func @main(%q: tensor<1x4x77x64xf32>, %k: tensor<1x2x200x64xf32>, %v: tensor<1x2x200x64xf32>) -> tensor<1x4x77x64xf32> {
  %o = transformer.attention %q, %k, %v {is_causal} : tensor<1x4x77x64xf32>, tensor<1x2x200x64xf32>, tensor<1x2x200x64xf32> -> tensor<1x4x77x64xf32>
  return %o : tensor<1x4x77x64xf32>
}
