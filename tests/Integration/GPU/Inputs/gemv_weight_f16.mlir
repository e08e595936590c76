// A decode step's projection: 4 rows of A by a weight W stored [N, K]
// (f16, K = 512, N = 48), f32 result: the tensor-core GEMV.
func.func @main(%a: tensor<1x4x512xf16>, %w: tensor<1x48x512xf16>) -> tensor<1x4x48xf32> {
  %et = tensor.empty() : tensor<1x512x48xf16>
  %b = linalg.transpose ins(%w : tensor<1x48x512xf16>) outs(%et : tensor<1x512x48xf16>) permutation = [0, 2, 1]
  %e = tensor.empty() : tensor<1x4x48xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x4x48xf32>) -> tensor<1x4x48xf32>
  %c = linalg.batch_matmul ins(%a, %b : tensor<1x4x512xf16>, tensor<1x512x48xf16>) outs(%f : tensor<1x4x48xf32>) -> tensor<1x4x48xf32>
  return %c : tensor<1x4x48xf32>
}
