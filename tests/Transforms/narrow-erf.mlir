// RUN: tfc-opt %s --tfc-math-approximation | FileCheck %s
//
// An f32 erf whose result is only ever rounded to a 16-bit float (a bf16 or
// f16 model's GELU, computed in f32) becomes one rational approximation on
// |x| <= 4: clamp, eleven fused multiply-adds, one division, the sign put
// back and a NaN passed through. Anywhere else, MLIR's approximation, which
// picks its coefficients among three intervals, keeps f32's accuracy.

// CHECK-LABEL: func.func @gelu_to_bf16
// CHECK-NOT: math.erf
// CHECK: math.absf
// CHECK: arith.minnumf %{{.*}}, %cst{{.*}} : f32
// CHECK-COUNT-11: math.fma
// CHECK: arith.divf
// CHECK: math.copysign
// CHECK: arith.cmpf uno
// CHECK: arith.select
// CHECK: arith.truncf %{{.*}} : f32 to bf16
func.func @gelu_to_bf16(%x: f32) -> bf16 {
  %c = arith.constant 0.707106769 : f32
  %h = arith.constant 5.000000e-01 : f32
  %one = arith.constant 1.000000e+00 : f32
  %a = arith.mulf %x, %c : f32
  %e = math.erf %a : f32
  %p = arith.addf %e, %one : f32
  %m = arith.mulf %x, %h : f32
  %g = arith.mulf %m, %p : f32
  %r = arith.truncf %g : f32 to bf16
  return %r : bf16
}

// Vectors too, rounded to f16, through two paths.
// CHECK-LABEL: func.func @two_paths_to_f16
// CHECK-NOT: math.erf
// CHECK-COUNT-11: math.fma {{.*}} : vector<16xf32>
// CHECK: arith.truncf %{{.*}} : vector<16xf32> to vector<16xf16>
// CHECK: arith.truncf %{{.*}} : vector<16xf32> to vector<16xf16>
func.func @two_paths_to_f16(%x: vector<16xf32>)
    -> (vector<16xf16>, vector<16xf16>) {
  %e = math.erf %x : vector<16xf32>
  %n = arith.negf %e : vector<16xf32>
  %a = arith.truncf %e : vector<16xf32> to vector<16xf16>
  %b = arith.truncf %n : vector<16xf32> to vector<16xf16>
  return %a, %b : vector<16xf16>, vector<16xf16>
}

// One use keeps f32: MLIR's three intervals (no single rational).
// CHECK-LABEL: func.func @also_f32
// CHECK-NOT: math.erf
// CHECK-NOT: math.copysign
// CHECK: arith.cmpf olt
// CHECK: return
func.func @also_f32(%x: f32) -> (bf16, f32) {
  %e = math.erf %x : f32
  %r = arith.truncf %e : f32 to bf16
  return %r, %e : bf16, f32
}

// Stored as f32: MLIR's form.
// CHECK-LABEL: func.func @stored_f32
// CHECK-NOT: math.copysign
// CHECK: arith.cmpf olt
func.func @stored_f32(%x: f32, %m: memref<4xf32>, %i: index) {
  %e = math.erf %x : f32
  memref.store %e, %m[%i] : memref<4xf32>
  return
}
