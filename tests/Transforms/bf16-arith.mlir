// RUN: tfc-opt %s --tfc-expand-bf16-casts | FileCheck %s --check-prefix=CASTS
// RUN: tfc-opt %s --tfc-cpu-pipeline | FileCheck %s --check-prefix=PIPE
//
// Without AVX512-BF16, LLVM computes each bf16 operation in f32 and rounds
// it with a call of compiler-rt's __truncsfbf2, one element at a time. The
// CPU pipeline computes bf16 arithmetic in f32 itself (MLIR's
// arith-emulate-unsupported-floats: the same per-operation rounding), and
// tfc-expand-bf16-casts turns the conversions into integer arithmetic on
// the bits (round to nearest even), which vectorises.

// CASTS-LABEL: func.func @casts
// CASTS-NOT: arith.truncf
// CASTS-NOT: arith.extf
// CASTS: arith.bitcast %{{.*}} : vector<8xf32> to vector<8xi32>
// CASTS: arith.addi
// CASTS: arith.shrui
// CASTS: arith.bitcast %{{.*}} : vector<8xi16> to vector<8xbf16>
// CASTS: arith.shli
// CASTS: arith.bitcast %{{.*}} : i32 to f32
func.func @casts(%a: vector<8xf32>, %b: bf16) -> (vector<8xbf16>, f32) {
  %t = arith.truncf %a : vector<8xf32> to vector<8xbf16>
  %e = arith.extf %b : bf16 to f32
  return %t, %e : vector<8xbf16>, f32
}

// A bf16 result that the next operation reads is rounded, even between the
// `contract` casts that arith-emulate-unsupported-floats puts around each
// bf16 op (whose extf(truncf(x)) a folder would turn into x): the sum
// reaches the second add only through the rounding's shift.
// CASTS-LABEL: func.func @rounded_between_ops
// CASTS-SAME: (%[[X:.*]]: f32, %[[Y:.*]]: f32)
// CASTS-NOT: arith.addf %[[X]], %[[Y]] : f32
// CASTS: %[[S:.*]] = arith.addf %[[X]], %{{.*}} : f32
// CASTS: arith.bitcast %[[S]] : f32 to i32
// CASTS: arith.shrui
// CASTS: arith.shli
// CASTS: %[[W:.*]] = arith.bitcast %{{.*}} : i32 to f32
// CASTS: arith.addf %[[W]], %[[Y]] : f32
func.func @rounded_between_ops(%x: f32, %y: f32) -> f32 {
  %s = arith.addf %x, %y : f32
  %t = arith.truncf %s fastmath<contract> : f32 to bf16
  %e = arith.extf %t fastmath<contract> : bf16 to f32
  %r = arith.addf %e, %y : f32
  return %r : f32
}

// A bf16 product: an f32 multiply between the bits' widening and rounding;
// no bf16 arithmetic and no fptrunc reach LLVM.
// PIPE-LABEL: llvm.func @product
// PIPE: llvm.fmul %{{.*}}, %{{.*}} : f32
// PIPE-NOT: llvm.fmul {{.*}} : bf16
// PIPE-NOT: llvm.fptrunc
func.func @product(%a: tensor<4x64xbf16>, %b: tensor<4x64xbf16>) -> tensor<4x64xbf16> {
  %s = "tosa.const"() {values = dense<0> : tensor<1xi8>} : () -> tensor<1xi8>
  %c = tosa.mul %a, %b, %s : (tensor<4x64xbf16>, tensor<4x64xbf16>, tensor<1xi8>) -> tensor<4x64xbf16>
  return %c : tensor<4x64xbf16>
}
