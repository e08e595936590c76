// RUN: tfc-opt %s --split-input-file --transformer-fuse-attention | FileCheck %s

// A sliding-window band added to a padding mask, as importers build it for
// 3 queries after 4 cached keys (positions 4..6) and a window of 2: hidden
// when limit (position - 2) >= key position. The band leaves the mask and
// becomes the op's window.
// CHECK-LABEL: func.func @band_with_padding
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x3x8xf32>, %[[K:.*]]: tensor<1x2x7x8xf32>, %[[V:.*]]: tensor<1x2x7x8xf32>, %[[PAD:.*]]: tensor<1x1x1x7xf32>)
// CHECK: transformer.attention %[[Q]], %[[K]], %[[V]] mask %[[PAD]] {is_causal, window = 2 : i64} : tensor<1x2x3x8xf32>, tensor<1x2x7x8xf32>, tensor<1x2x7x8xf32>, tensor<1x1x1x7xf32> -> tensor<1x2x3x8xf32>
func.func @band_with_padding(%q: tensor<1x2x3x8xf32>, %k: tensor<1x2x7x8xf32>, %v: tensor<1x2x7x8xf32>, %pad: tensor<1x1x1x7xf32>) -> tensor<1x2x3x8xf32> {
  %limit = "tosa.const"() <{values = dense<[[[[2.0], [3.0], [4.0]]]]> : tensor<1x1x3x1xf32>}> : () -> tensor<1x1x3x1xf32>
  %key = "tosa.const"() <{values = dense<[[[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]]]]> : tensor<1x1x1x7xf32>}> : () -> tensor<1x1x1x7xf32>
  %hidden = tosa.greater_equal %limit, %key : (tensor<1x1x3x1xf32>, tensor<1x1x1x7xf32>) -> tensor<1x1x3x7xi1>
  %ninf = "tosa.const"() <{values = dense<0xFF800000> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %zero = "tosa.const"() <{values = dense<0.0> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %band = tosa.select %hidden, %ninf, %zero : (tensor<1x1x3x7xi1>, tensor<1x1x1x1xf32>, tensor<1x1x1x1xf32>) -> tensor<1x1x3x7xf32>
  %mask = tosa.add %pad, %band : (tensor<1x1x1x7xf32>, tensor<1x1x3x7xf32>) -> tensor<1x1x3x7xf32>
  %o = transformer.attention %q, %k, %v mask %mask {is_causal} : tensor<1x2x3x8xf32>, tensor<1x2x7x8xf32>, tensor<1x2x7x8xf32>, tensor<1x1x3x7xf32> -> tensor<1x2x3x8xf32>
  return %o : tensor<1x2x3x8xf32>
}

// -----

// The band alone, written with a strict compare (hidden when limit > key,
// limit = position - 3 + 1) in f16 with integer positions offset by 10,
// and a finite fill: no mask is left.
// CHECK-LABEL: func.func @band_alone_strict
// CHECK: transformer.attention %{{.*}}, %{{.*}}, %{{.*}} {window = 3 : i64} : tensor<1x1x4x8xf16>, tensor<1x1x4x8xf16>, tensor<1x1x4x8xf16> -> tensor<1x1x4x8xf16>
func.func @band_alone_strict(%q: tensor<1x1x4x8xf16>, %k: tensor<1x1x4x8xf16>, %v: tensor<1x1x4x8xf16>) -> tensor<1x1x4x8xf16> {
  %limit = "tosa.const"() <{values = dense<[[[[8], [9], [10], [11]]]]> : tensor<1x1x4x1xi32>}> : () -> tensor<1x1x4x1xi32>
  %key = "tosa.const"() <{values = dense<[[[[10, 11, 12, 13]]]]> : tensor<1x1x1x4xi32>}> : () -> tensor<1x1x1x4xi32>
  %hidden = tosa.greater %limit, %key : (tensor<1x1x4x1xi32>, tensor<1x1x1x4xi32>) -> tensor<1x1x4x4xi1>
  %low = "tosa.const"() <{values = dense<-65504.0> : tensor<1x1x1x1xf16>}> : () -> tensor<1x1x1x1xf16>
  %zero = "tosa.const"() <{values = dense<0.0> : tensor<1x1x1x1xf16>}> : () -> tensor<1x1x1x1xf16>
  %band = tosa.select %hidden, %low, %zero : (tensor<1x1x4x4xi1>, tensor<1x1x1x1xf16>, tensor<1x1x1x1xf16>) -> tensor<1x1x4x4xf16>
  %o = transformer.attention %q, %k, %v mask %band : tensor<1x1x4x8xf16>, tensor<1x1x4x8xf16>, tensor<1x1x4x8xf16>, tensor<1x1x4x4xf16> -> tensor<1x1x4x8xf16>
  return %o : tensor<1x1x4x8xf16>
}

// -----

// A finite fill next to a padding mask stays in the mask: where the padding
// hides every key of a row's window, the keys the band hides count.
// CHECK-LABEL: func.func @finite_band_with_padding
// CHECK: transformer.attention {{.*}} mask %{{.*}} {is_causal} : {{.*}}, tensor<1x1x3x3xf32> -> tensor<1x1x3x8xf32>
// CHECK-NOT: window
func.func @finite_band_with_padding(%q: tensor<1x1x3x8xf32>, %k: tensor<1x1x3x8xf32>, %v: tensor<1x1x3x8xf32>, %pad: tensor<1x1x1x3xf32>) -> tensor<1x1x3x8xf32> {
  %limit = "tosa.const"() <{values = dense<[[[[-2.0], [-1.0], [0.0]]]]> : tensor<1x1x3x1xf32>}> : () -> tensor<1x1x3x1xf32>
  %key = "tosa.const"() <{values = dense<[[[[0.0, 1.0, 2.0]]]]> : tensor<1x1x1x3xf32>}> : () -> tensor<1x1x1x3xf32>
  %hidden = tosa.greater_equal %limit, %key : (tensor<1x1x3x1xf32>, tensor<1x1x1x3xf32>) -> tensor<1x1x3x3xi1>
  %low = "tosa.const"() <{values = dense<-3.40282347E+38> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %zero = "tosa.const"() <{values = dense<0.0> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %band = tosa.select %hidden, %low, %zero : (tensor<1x1x3x3xi1>, tensor<1x1x1x1xf32>, tensor<1x1x1x1xf32>) -> tensor<1x1x3x3xf32>
  %mask = tosa.add %band, %pad : (tensor<1x1x3x3xf32>, tensor<1x1x1x3xf32>) -> tensor<1x1x3x3xf32>
  %o = transformer.attention %q, %k, %v mask %mask {is_causal} : tensor<1x1x3x8xf32>, tensor<1x1x3x8xf32>, tensor<1x1x3x8xf32>, tensor<1x1x3x3xf32> -> tensor<1x1x3x8xf32>
  return %o : tensor<1x1x3x8xf32>
}

// -----

// Bands that are not a sliding window stay masks: key positions that skip
// one, a limit that does not move with the queries, and one that hides a
// query's own position.
// CHECK-LABEL: func.func @not_windows
// CHECK-NOT: window
// CHECK-COUNT-3: transformer.attention {{.*}} mask
// CHECK-NOT: window
func.func @not_windows(%q: tensor<1x1x3x8xf32>, %k: tensor<1x1x3x8xf32>, %v: tensor<1x1x3x8xf32>) -> (tensor<1x1x3x8xf32>, tensor<1x1x3x8xf32>, tensor<1x1x3x8xf32>) {
  %limit = "tosa.const"() <{values = dense<[[[[-2.0], [-1.0], [0.0]]]]> : tensor<1x1x3x1xf32>}> : () -> tensor<1x1x3x1xf32>
  %fixed = "tosa.const"() <{values = dense<[[[[0.0], [0.0], [0.0]]]]> : tensor<1x1x3x1xf32>}> : () -> tensor<1x1x3x1xf32>
  %own = "tosa.const"() <{values = dense<[[[[0.0], [1.0], [2.0]]]]> : tensor<1x1x3x1xf32>}> : () -> tensor<1x1x3x1xf32>
  %key = "tosa.const"() <{values = dense<[[[[0.0, 1.0, 2.0]]]]> : tensor<1x1x1x3xf32>}> : () -> tensor<1x1x1x3xf32>
  %skip = "tosa.const"() <{values = dense<[[[[0.0, 2.0, 4.0]]]]> : tensor<1x1x1x3xf32>}> : () -> tensor<1x1x1x3xf32>
  %ninf = "tosa.const"() <{values = dense<0xFF800000> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %zero = "tosa.const"() <{values = dense<0.0> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %h0 = tosa.greater_equal %limit, %skip : (tensor<1x1x3x1xf32>, tensor<1x1x1x3xf32>) -> tensor<1x1x3x3xi1>
  %b0 = tosa.select %h0, %ninf, %zero : (tensor<1x1x3x3xi1>, tensor<1x1x1x1xf32>, tensor<1x1x1x1xf32>) -> tensor<1x1x3x3xf32>
  %o0 = transformer.attention %q, %k, %v mask %b0 : tensor<1x1x3x8xf32>, tensor<1x1x3x8xf32>, tensor<1x1x3x8xf32>, tensor<1x1x3x3xf32> -> tensor<1x1x3x8xf32>
  %h1 = tosa.greater_equal %fixed, %key : (tensor<1x1x3x1xf32>, tensor<1x1x1x3xf32>) -> tensor<1x1x3x3xi1>
  %b1 = tosa.select %h1, %ninf, %zero : (tensor<1x1x3x3xi1>, tensor<1x1x1x1xf32>, tensor<1x1x1x1xf32>) -> tensor<1x1x3x3xf32>
  %o1 = transformer.attention %q, %k, %v mask %b1 : tensor<1x1x3x8xf32>, tensor<1x1x3x8xf32>, tensor<1x1x3x8xf32>, tensor<1x1x3x3xf32> -> tensor<1x1x3x8xf32>
  %h2 = tosa.greater_equal %own, %key : (tensor<1x1x3x1xf32>, tensor<1x1x1x3xf32>) -> tensor<1x1x3x3xi1>
  %b2 = tosa.select %h2, %ninf, %zero : (tensor<1x1x3x3xi1>, tensor<1x1x1x1xf32>, tensor<1x1x1x1xf32>) -> tensor<1x1x3x3xf32>
  %o2 = transformer.attention %q, %k, %v mask %b2 : tensor<1x1x3x8xf32>, tensor<1x1x3x8xf32>, tensor<1x1x3x8xf32>, tensor<1x1x3x3xf32> -> tensor<1x1x3x8xf32>
  return %o0, %o1, %o2 : tensor<1x1x3x8xf32>, tensor<1x1x3x8xf32>, tensor<1x1x3x8xf32>
}
