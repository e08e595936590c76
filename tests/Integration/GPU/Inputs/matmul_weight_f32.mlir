// C = A·Wᵀ for a weight W stored [N, K], as imported models multiply: f32,
// M = 128 rows (the FMA GEMM), K = N = 64.
func.func @main(%a: tensor<1x128x64xf32>, %w: tensor<1x64x64xf32>) -> tensor<1x128x64xf32> {
  %wt = tosa.transpose %w {perms = array<i32: 0, 2, 1>} : (tensor<1x64x64xf32>) -> tensor<1x64x64xf32>
  %zp = "tosa.const"() {values = dense<0.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %c = tosa.matmul %a, %wt, %zp, %zp : (tensor<1x128x64xf32>, tensor<1x64x64xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x128x64xf32>
  return %c : tensor<1x128x64xf32>
}
