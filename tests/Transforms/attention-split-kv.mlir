// Attention whose keys and values are a fresh buffer filled by two copies
// along the key axis (a decoder's cache and its new tokens) reads the two
// sources instead: tfc_uk_attention_kv2_f32 (or its _bf16 / _f16 form for
// 16-bit keys and values), without the buffers and the copies. Buffers that the step returns, that something reads after the
// call, whose sources change before the call or that are not two parts with
// one split point stay as they are.
// RUN: tfc-opt %s --tfc-attention-split-kv | FileCheck %s

!dyn = memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
!dyn16 = memref<?x?x?x?xbf16, strided<[?, ?, ?, ?], offset: ?>>
func.func private @tfc_uk_attention_f32(!dyn, !dyn, !dyn, !dyn, !dyn, f32, i32, i32, f32, i64) attributes {llvm.emit_c_interface}
func.func private @tfc_uk_attention_f32_bf16(!dyn, !dyn16, !dyn16, !dyn, !dyn, f32, i32, i32, f32, i64) attributes {llvm.emit_c_interface}

// A bf16 decoder's step: its bf16 cache and new keys go to the bf16 entry's
// kv2 form as they are.
// CHECK-LABEL: func.func @step_bf16
// CHECK-SAME: (%[[Q:.*]]: memref<1x4x1x8xf32>, %[[PK:.*]]: memref<1x2x5x8xbf16>, %[[PV:.*]]: memref<1x2x5x8xbf16>, %[[NK:.*]]: memref<1x2x1x8xbf16>, %[[NV:.*]]: memref<1x2x1x8xbf16>
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK-DAG: %[[CPK:.*]] = memref.cast %[[PK]] : memref<1x2x5x8xbf16> to memref<?x?x?x?xbf16
// CHECK-DAG: %[[CNK:.*]] = memref.cast %[[NK]]
// CHECK-DAG: %[[CPV:.*]] = memref.cast %[[PV]]
// CHECK-DAG: %[[CNV:.*]] = memref.cast %[[NV]]
// CHECK: call @tfc_uk_attention_kv2_f32_bf16(%{{.*}}, %[[CPK]], %[[CNK]], %[[CPV]], %[[CNV]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
// CHECK-NOT: memref.dealloc
// CHECK: return
func.func @step_bf16(%q: memref<1x4x1x8xf32>, %pk: memref<1x2x5x8xbf16>, %pv: memref<1x2x5x8xbf16>, %nk: memref<1x2x1x8xbf16>, %nv: memref<1x2x1x8xbf16>, %mask: memref<1x1x1x6xf32>, %out: memref<1x4x1x8xf32>) {
  %scale = arith.constant 0.35 : f32
  %nocap = arith.constant 0.0 : f32
  %nowin = arith.constant 0 : i64
  %one = arith.constant 1 : i32
  %flags = arith.constant 3 : i32
  %k = memref.alloc() {alignment = 64 : i64} : memref<1x2x6x8xbf16>
  %v = memref.alloc() {alignment = 64 : i64} : memref<1x2x6x8xbf16>
  %k0 = memref.subview %k[0, 0, 0, 0] [1, 2, 5, 8] [1, 1, 1, 1] : memref<1x2x6x8xbf16> to memref<1x2x5x8xbf16, strided<[96, 48, 8, 1]>>
  memref.copy %pk, %k0 : memref<1x2x5x8xbf16> to memref<1x2x5x8xbf16, strided<[96, 48, 8, 1]>>
  %k1 = memref.subview %k[0, 0, 5, 0] [1, 2, 1, 8] [1, 1, 1, 1] : memref<1x2x6x8xbf16> to memref<1x2x1x8xbf16, strided<[96, 48, 8, 1], offset: 40>>
  memref.copy %nk, %k1 : memref<1x2x1x8xbf16> to memref<1x2x1x8xbf16, strided<[96, 48, 8, 1], offset: 40>>
  %v0 = memref.subview %v[0, 0, 0, 0] [1, 2, 5, 8] [1, 1, 1, 1] : memref<1x2x6x8xbf16> to memref<1x2x5x8xbf16, strided<[96, 48, 8, 1]>>
  memref.copy %pv, %v0 : memref<1x2x5x8xbf16> to memref<1x2x5x8xbf16, strided<[96, 48, 8, 1]>>
  %v1 = memref.subview %v[0, 0, 5, 0] [1, 2, 1, 8] [1, 1, 1, 1] : memref<1x2x6x8xbf16> to memref<1x2x1x8xbf16, strided<[96, 48, 8, 1], offset: 40>>
  memref.copy %nv, %v1 : memref<1x2x1x8xbf16> to memref<1x2x1x8xbf16, strided<[96, 48, 8, 1], offset: 40>>
  %cq = memref.cast %q : memref<1x4x1x8xf32> to !dyn
  %ck = memref.cast %k : memref<1x2x6x8xbf16> to !dyn16
  %cv = memref.cast %v : memref<1x2x6x8xbf16> to !dyn16
  %cm = memref.cast %mask : memref<1x1x1x6xf32> to !dyn
  %co = memref.cast %out : memref<1x4x1x8xf32> to !dyn
  call @tfc_uk_attention_f32_bf16(%cq, %ck, %cv, %cm, %co, %scale, %flags, %one, %nocap, %nowin) : (!dyn, !dyn16, !dyn16, !dyn, !dyn, f32, i32, i32, f32, i64) -> ()
  memref.dealloc %k : memref<1x2x6x8xbf16>
  memref.dealloc %v : memref<1x2x6x8xbf16>
  return
}

// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[Q:.*]]: memref<1x4x1x8xf32>, %[[PK:.*]]: memref<1x2x5x8xf32>, %[[PV:.*]]: memref<1x2x5x8xf32>, %[[NK:.*]]: memref<1x2x1x8xf32>, %[[NV:.*]]: memref<1x2x1x8xf32>
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK-DAG: %[[CPK:.*]] = memref.cast %[[PK]]
// CHECK-DAG: %[[CNK:.*]] = memref.cast %[[NK]]
// CHECK-DAG: %[[CPV:.*]] = memref.cast %[[PV]]
// CHECK-DAG: %[[CNV:.*]] = memref.cast %[[NV]]
// CHECK: call @tfc_uk_attention_kv2_f32(%{{.*}}, %[[CPK]], %[[CNK]], %[[CPV]], %[[CNV]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
// CHECK-NOT: memref.dealloc
// CHECK: return
func.func @step(%q: memref<1x4x1x8xf32>, %pk: memref<1x2x5x8xf32>, %pv: memref<1x2x5x8xf32>, %nk: memref<1x2x1x8xf32>, %nv: memref<1x2x1x8xf32>, %mask: memref<1x1x1x6xf32>, %out: memref<1x4x1x8xf32>) {
  %scale = arith.constant 0.35 : f32
  %nocap = arith.constant 0.0 : f32
  %nowin = arith.constant 0 : i64
  %one = arith.constant 1 : i32
  %k = memref.alloc() {alignment = 64 : i64} : memref<1x2x6x8xf32>
  %v = memref.alloc() {alignment = 64 : i64} : memref<1x2x6x8xf32>
  %k0 = memref.subview %k[0, 0, 0, 0] [1, 2, 5, 8] [1, 1, 1, 1] : memref<1x2x6x8xf32> to memref<1x2x5x8xf32, strided<[96, 48, 8, 1]>>
  memref.copy %pk, %k0 : memref<1x2x5x8xf32> to memref<1x2x5x8xf32, strided<[96, 48, 8, 1]>>
  %k1 = memref.subview %k[0, 0, 5, 0] [1, 2, 1, 8] [1, 1, 1, 1] : memref<1x2x6x8xf32> to memref<1x2x1x8xf32, strided<[96, 48, 8, 1], offset: 40>>
  memref.copy %nk, %k1 : memref<1x2x1x8xf32> to memref<1x2x1x8xf32, strided<[96, 48, 8, 1], offset: 40>>
  %v0 = memref.subview %v[0, 0, 0, 0] [1, 2, 5, 8] [1, 1, 1, 1] : memref<1x2x6x8xf32> to memref<1x2x5x8xf32, strided<[96, 48, 8, 1]>>
  memref.copy %pv, %v0 : memref<1x2x5x8xf32> to memref<1x2x5x8xf32, strided<[96, 48, 8, 1]>>
  %v1 = memref.subview %v[0, 0, 5, 0] [1, 2, 1, 8] [1, 1, 1, 1] : memref<1x2x6x8xf32> to memref<1x2x1x8xf32, strided<[96, 48, 8, 1], offset: 40>>
  memref.copy %nv, %v1 : memref<1x2x1x8xf32> to memref<1x2x1x8xf32, strided<[96, 48, 8, 1], offset: 40>>
  %cq = memref.cast %q : memref<1x4x1x8xf32> to !dyn
  %ck = memref.cast %k : memref<1x2x6x8xf32> to !dyn
  %cv = memref.cast %v : memref<1x2x6x8xf32> to !dyn
  %cm = memref.cast %mask : memref<1x1x1x6xf32> to !dyn
  %co = memref.cast %out : memref<1x4x1x8xf32> to !dyn
  call @tfc_uk_attention_f32(%cq, %ck, %cv, %cm, %co, %scale, %one, %one, %nocap, %nowin) : (!dyn, !dyn, !dyn, !dyn, !dyn, f32, i32, i32, f32, i64) -> ()
  memref.dealloc %k : memref<1x2x6x8xf32>
  memref.dealloc %v : memref<1x2x6x8xf32>
  return
}

// Two layers fill the same buffers in turn (bufferization reuses them):
// both calls read their own sources, and the buffers go.
// CHECK-LABEL: func.func @two_layers
// CHECK-SAME: %[[PK0:[^:]*]]: memref<1x2x3x4xf32>, %[[PK1:[^:]*]]: memref<1x2x3x4xf32>, %[[NK0:[^:]*]]: memref<1x2x1x4xf32>, %[[NK1:[^:]*]]: memref<1x2x1x4xf32>
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK: %[[A0:.*]] = memref.cast %[[PK0]]
// CHECK: %[[B0:.*]] = memref.cast %[[NK0]]
// CHECK: call @tfc_uk_attention_kv2_f32(%{{.*}}, %[[A0]], %[[B0]],
// CHECK: %[[A1:.*]] = memref.cast %[[PK1]]
// CHECK: %[[B1:.*]] = memref.cast %[[NK1]]
// CHECK: call @tfc_uk_attention_kv2_f32(%{{.*}}, %[[A1]], %[[B1]],
// CHECK-NOT: memref.dealloc
// CHECK: return
func.func @two_layers(%q: memref<1x2x1x4xf32>, %pk0: memref<1x2x3x4xf32>, %pk1: memref<1x2x3x4xf32>, %nk0: memref<1x2x1x4xf32>, %nk1: memref<1x2x1x4xf32>, %out0: memref<1x2x1x4xf32>, %out1: memref<1x2x1x4xf32>) {
  %scale = arith.constant 0.5 : f32
  %nocap = arith.constant 0.0 : f32
  %nowin = arith.constant 0 : i64
  %zero = arith.constant 0 : i32
  %k = memref.alloc() : memref<1x2x4x4xf32>
  %ck = memref.cast %k : memref<1x2x4x4xf32> to !dyn
  %cq = memref.cast %q : memref<1x2x1x4xf32> to !dyn
  %co0 = memref.cast %out0 : memref<1x2x1x4xf32> to !dyn
  %co1 = memref.cast %out1 : memref<1x2x1x4xf32> to !dyn
  %a0 = memref.subview %k[0, 0, 0, 0] [1, 2, 3, 4] [1, 1, 1, 1] : memref<1x2x4x4xf32> to memref<1x2x3x4xf32, strided<[32, 16, 4, 1]>>
  memref.copy %pk0, %a0 : memref<1x2x3x4xf32> to memref<1x2x3x4xf32, strided<[32, 16, 4, 1]>>
  %b0 = memref.subview %k[0, 0, 3, 0] [1, 2, 1, 4] [1, 1, 1, 1] : memref<1x2x4x4xf32> to memref<1x2x1x4xf32, strided<[32, 16, 4, 1], offset: 12>>
  memref.copy %nk0, %b0 : memref<1x2x1x4xf32> to memref<1x2x1x4xf32, strided<[32, 16, 4, 1], offset: 12>>
  call @tfc_uk_attention_f32(%cq, %ck, %ck, %cq, %co0, %scale, %zero, %zero, %nocap, %nowin) : (!dyn, !dyn, !dyn, !dyn, !dyn, f32, i32, i32, f32, i64) -> ()
  %a1 = memref.subview %k[0, 0, 0, 0] [1, 2, 3, 4] [1, 1, 1, 1] : memref<1x2x4x4xf32> to memref<1x2x3x4xf32, strided<[32, 16, 4, 1]>>
  memref.copy %pk1, %a1 : memref<1x2x3x4xf32> to memref<1x2x3x4xf32, strided<[32, 16, 4, 1]>>
  %b1 = memref.subview %k[0, 0, 3, 0] [1, 2, 1, 4] [1, 1, 1, 1] : memref<1x2x4x4xf32> to memref<1x2x1x4xf32, strided<[32, 16, 4, 1], offset: 12>>
  memref.copy %nk1, %b1 : memref<1x2x1x4xf32> to memref<1x2x1x4xf32, strided<[32, 16, 4, 1], offset: 12>>
  call @tfc_uk_attention_f32(%cq, %ck, %ck, %cq, %co1, %scale, %zero, %zero, %nocap, %nowin) : (!dyn, !dyn, !dyn, !dyn, !dyn, f32, i32, i32, f32, i64) -> ()
  memref.dealloc %k : memref<1x2x4x4xf32>
  return
}

// The concatenation is the step's result (present): it stays.
// CHECK-LABEL: func.func @returned
// CHECK: memref.copy
// CHECK: memref.copy
// CHECK: call @tfc_uk_attention_f32
func.func @returned(%q: memref<1x2x1x4xf32>, %pk: memref<1x2x3x4xf32>, %nk: memref<1x2x1x4xf32>, %k: memref<1x2x4x4xf32>, %out: memref<1x2x1x4xf32>) {
  %scale = arith.constant 0.5 : f32
  %nocap = arith.constant 0.0 : f32
  %nowin = arith.constant 0 : i64
  %zero = arith.constant 0 : i32
  %a = memref.subview %k[0, 0, 0, 0] [1, 2, 3, 4] [1, 1, 1, 1] : memref<1x2x4x4xf32> to memref<1x2x3x4xf32, strided<[32, 16, 4, 1]>>
  memref.copy %pk, %a : memref<1x2x3x4xf32> to memref<1x2x3x4xf32, strided<[32, 16, 4, 1]>>
  %b = memref.subview %k[0, 0, 3, 0] [1, 2, 1, 4] [1, 1, 1, 1] : memref<1x2x4x4xf32> to memref<1x2x1x4xf32, strided<[32, 16, 4, 1], offset: 12>>
  memref.copy %nk, %b : memref<1x2x1x4xf32> to memref<1x2x1x4xf32, strided<[32, 16, 4, 1], offset: 12>>
  %cq = memref.cast %q : memref<1x2x1x4xf32> to !dyn
  %ck = memref.cast %k : memref<1x2x4x4xf32> to !dyn
  %co = memref.cast %out : memref<1x2x1x4xf32> to !dyn
  call @tfc_uk_attention_f32(%cq, %ck, %ck, %cq, %co, %scale, %zero, %zero, %nocap, %nowin) : (!dyn, !dyn, !dyn, !dyn, !dyn, f32, i32, i32, f32, i64) -> ()
  return
}

// A source written between its copy and the call: the copy holds what the
// call must read, so it stays.
// CHECK-LABEL: func.func @source_changes
// CHECK: memref.copy
// CHECK: memref.copy
// CHECK: linalg.fill
// CHECK: call @tfc_uk_attention_f32
func.func @source_changes(%q: memref<1x2x1x4xf32>, %pk: memref<1x2x3x4xf32>, %nk: memref<1x2x1x4xf32>, %out: memref<1x2x1x4xf32>) {
  %scale = arith.constant 0.5 : f32
  %nocap = arith.constant 0.0 : f32
  %nowin = arith.constant 0 : i64
  %zero = arith.constant 0 : i32
  %f = arith.constant 0.0 : f32
  %k = memref.alloc() : memref<1x2x4x4xf32>
  %a = memref.subview %k[0, 0, 0, 0] [1, 2, 3, 4] [1, 1, 1, 1] : memref<1x2x4x4xf32> to memref<1x2x3x4xf32, strided<[32, 16, 4, 1]>>
  memref.copy %pk, %a : memref<1x2x3x4xf32> to memref<1x2x3x4xf32, strided<[32, 16, 4, 1]>>
  %b = memref.subview %k[0, 0, 3, 0] [1, 2, 1, 4] [1, 1, 1, 1] : memref<1x2x4x4xf32> to memref<1x2x1x4xf32, strided<[32, 16, 4, 1], offset: 12>>
  memref.copy %nk, %b : memref<1x2x1x4xf32> to memref<1x2x1x4xf32, strided<[32, 16, 4, 1], offset: 12>>
  linalg.fill ins(%f : f32) outs(%nk : memref<1x2x1x4xf32>)
  %cq = memref.cast %q : memref<1x2x1x4xf32> to !dyn
  %ck = memref.cast %k : memref<1x2x4x4xf32> to !dyn
  %co = memref.cast %out : memref<1x2x1x4xf32> to !dyn
  call @tfc_uk_attention_f32(%cq, %ck, %ck, %cq, %co, %scale, %zero, %zero, %nocap, %nowin) : (!dyn, !dyn, !dyn, !dyn, !dyn, f32, i32, i32, f32, i64) -> ()
  memref.dealloc %k : memref<1x2x4x4xf32>
  return
}

// Something reads the concatenation after the call: it stays.
// CHECK-LABEL: func.func @read_after
// CHECK: memref.copy
// CHECK: memref.copy
// CHECK: call @tfc_uk_attention_f32
// CHECK: memref.copy
func.func @read_after(%q: memref<1x2x1x4xf32>, %pk: memref<1x2x3x4xf32>, %nk: memref<1x2x1x4xf32>, %out: memref<1x2x1x4xf32>, %keep: memref<1x2x4x4xf32>) {
  %scale = arith.constant 0.5 : f32
  %nocap = arith.constant 0.0 : f32
  %nowin = arith.constant 0 : i64
  %zero = arith.constant 0 : i32
  %k = memref.alloc() : memref<1x2x4x4xf32>
  %a = memref.subview %k[0, 0, 0, 0] [1, 2, 3, 4] [1, 1, 1, 1] : memref<1x2x4x4xf32> to memref<1x2x3x4xf32, strided<[32, 16, 4, 1]>>
  memref.copy %pk, %a : memref<1x2x3x4xf32> to memref<1x2x3x4xf32, strided<[32, 16, 4, 1]>>
  %b = memref.subview %k[0, 0, 3, 0] [1, 2, 1, 4] [1, 1, 1, 1] : memref<1x2x4x4xf32> to memref<1x2x1x4xf32, strided<[32, 16, 4, 1], offset: 12>>
  memref.copy %nk, %b : memref<1x2x1x4xf32> to memref<1x2x1x4xf32, strided<[32, 16, 4, 1], offset: 12>>
  %cq = memref.cast %q : memref<1x2x1x4xf32> to !dyn
  %ck = memref.cast %k : memref<1x2x4x4xf32> to !dyn
  %co = memref.cast %out : memref<1x2x1x4xf32> to !dyn
  call @tfc_uk_attention_f32(%cq, %ck, %ck, %cq, %co, %scale, %zero, %zero, %nocap, %nowin) : (!dyn, !dyn, !dyn, !dyn, !dyn, f32, i32, i32, f32, i64) -> ()
  memref.copy %k, %keep : memref<1x2x4x4xf32> to memref<1x2x4x4xf32>
  memref.dealloc %k : memref<1x2x4x4xf32>
  return
}

// Something reads the concatenation between its copies and the call: it
// stays.
// CHECK-LABEL: func.func @read_between
// CHECK: memref.copy
// CHECK: memref.copy
// CHECK: memref.copy
// CHECK: call @tfc_uk_attention_f32
func.func @read_between(%q: memref<1x2x1x4xf32>, %pk: memref<1x2x3x4xf32>, %nk: memref<1x2x1x4xf32>, %out: memref<1x2x1x4xf32>, %keep: memref<1x2x4x4xf32>) {
  %scale = arith.constant 0.5 : f32
  %nocap = arith.constant 0.0 : f32
  %nowin = arith.constant 0 : i64
  %zero = arith.constant 0 : i32
  %k = memref.alloc() : memref<1x2x4x4xf32>
  %a = memref.subview %k[0, 0, 0, 0] [1, 2, 3, 4] [1, 1, 1, 1] : memref<1x2x4x4xf32> to memref<1x2x3x4xf32, strided<[32, 16, 4, 1]>>
  memref.copy %pk, %a : memref<1x2x3x4xf32> to memref<1x2x3x4xf32, strided<[32, 16, 4, 1]>>
  %b = memref.subview %k[0, 0, 3, 0] [1, 2, 1, 4] [1, 1, 1, 1] : memref<1x2x4x4xf32> to memref<1x2x1x4xf32, strided<[32, 16, 4, 1], offset: 12>>
  memref.copy %nk, %b : memref<1x2x1x4xf32> to memref<1x2x1x4xf32, strided<[32, 16, 4, 1], offset: 12>>
  memref.copy %k, %keep : memref<1x2x4x4xf32> to memref<1x2x4x4xf32>
  %cq = memref.cast %q : memref<1x2x1x4xf32> to !dyn
  %ck = memref.cast %k : memref<1x2x4x4xf32> to !dyn
  %co = memref.cast %out : memref<1x2x1x4xf32> to !dyn
  call @tfc_uk_attention_f32(%cq, %ck, %ck, %cq, %co, %scale, %zero, %zero, %nocap, %nowin) : (!dyn, !dyn, !dyn, !dyn, !dyn, f32, i32, i32, f32, i64) -> ()
  memref.dealloc %k : memref<1x2x4x4xf32>
  return
}

// Keys split after 3, values after 2: one kernel split point cannot serve
// both, so they stay.
// CHECK-LABEL: func.func @different_splits
// CHECK: call @tfc_uk_attention_f32
func.func @different_splits(%q: memref<1x2x1x4xf32>, %pk: memref<1x2x3x4xf32>, %nk: memref<1x2x1x4xf32>, %pv: memref<1x2x2x4xf32>, %nv: memref<1x2x2x4xf32>, %out: memref<1x2x1x4xf32>) {
  %scale = arith.constant 0.5 : f32
  %nocap = arith.constant 0.0 : f32
  %nowin = arith.constant 0 : i64
  %zero = arith.constant 0 : i32
  %k = memref.alloc() : memref<1x2x4x4xf32>
  %v = memref.alloc() : memref<1x2x4x4xf32>
  %a = memref.subview %k[0, 0, 0, 0] [1, 2, 3, 4] [1, 1, 1, 1] : memref<1x2x4x4xf32> to memref<1x2x3x4xf32, strided<[32, 16, 4, 1]>>
  memref.copy %pk, %a : memref<1x2x3x4xf32> to memref<1x2x3x4xf32, strided<[32, 16, 4, 1]>>
  %b = memref.subview %k[0, 0, 3, 0] [1, 2, 1, 4] [1, 1, 1, 1] : memref<1x2x4x4xf32> to memref<1x2x1x4xf32, strided<[32, 16, 4, 1], offset: 12>>
  memref.copy %nk, %b : memref<1x2x1x4xf32> to memref<1x2x1x4xf32, strided<[32, 16, 4, 1], offset: 12>>
  %c = memref.subview %v[0, 0, 0, 0] [1, 2, 2, 4] [1, 1, 1, 1] : memref<1x2x4x4xf32> to memref<1x2x2x4xf32, strided<[32, 16, 4, 1]>>
  memref.copy %pv, %c : memref<1x2x2x4xf32> to memref<1x2x2x4xf32, strided<[32, 16, 4, 1]>>
  %d = memref.subview %v[0, 0, 2, 0] [1, 2, 2, 4] [1, 1, 1, 1] : memref<1x2x4x4xf32> to memref<1x2x2x4xf32, strided<[32, 16, 4, 1], offset: 8>>
  memref.copy %nv, %d : memref<1x2x2x4xf32> to memref<1x2x2x4xf32, strided<[32, 16, 4, 1], offset: 8>>
  %cq = memref.cast %q : memref<1x2x1x4xf32> to !dyn
  %ck = memref.cast %k : memref<1x2x4x4xf32> to !dyn
  %cv = memref.cast %v : memref<1x2x4x4xf32> to !dyn
  %co = memref.cast %out : memref<1x2x1x4xf32> to !dyn
  call @tfc_uk_attention_f32(%cq, %ck, %cv, %cq, %co, %scale, %zero, %zero, %nocap, %nowin) : (!dyn, !dyn, !dyn, !dyn, !dyn, f32, i32, i32, f32, i64) -> ()
  memref.dealloc %k : memref<1x2x4x4xf32>
  memref.dealloc %v : memref<1x2x4x4xf32>
  return
}

// Three parts: the kernel takes two.
// CHECK-LABEL: func.func @three_parts
// CHECK-COUNT-3: memref.copy
// CHECK: call @tfc_uk_attention_f32
func.func @three_parts(%q: memref<1x2x1x4xf32>, %x: memref<1x2x2x4xf32>, %y: memref<1x2x1x4xf32>, %z: memref<1x2x1x4xf32>, %out: memref<1x2x1x4xf32>) {
  %scale = arith.constant 0.5 : f32
  %nocap = arith.constant 0.0 : f32
  %nowin = arith.constant 0 : i64
  %zero = arith.constant 0 : i32
  %k = memref.alloc() : memref<1x2x4x4xf32>
  %a = memref.subview %k[0, 0, 0, 0] [1, 2, 2, 4] [1, 1, 1, 1] : memref<1x2x4x4xf32> to memref<1x2x2x4xf32, strided<[32, 16, 4, 1]>>
  memref.copy %x, %a : memref<1x2x2x4xf32> to memref<1x2x2x4xf32, strided<[32, 16, 4, 1]>>
  %b = memref.subview %k[0, 0, 2, 0] [1, 2, 1, 4] [1, 1, 1, 1] : memref<1x2x4x4xf32> to memref<1x2x1x4xf32, strided<[32, 16, 4, 1], offset: 8>>
  memref.copy %y, %b : memref<1x2x1x4xf32> to memref<1x2x1x4xf32, strided<[32, 16, 4, 1], offset: 8>>
  %c = memref.subview %k[0, 0, 3, 0] [1, 2, 1, 4] [1, 1, 1, 1] : memref<1x2x4x4xf32> to memref<1x2x1x4xf32, strided<[32, 16, 4, 1], offset: 12>>
  memref.copy %z, %c : memref<1x2x1x4xf32> to memref<1x2x1x4xf32, strided<[32, 16, 4, 1], offset: 12>>
  %cq = memref.cast %q : memref<1x2x1x4xf32> to !dyn
  %ck = memref.cast %k : memref<1x2x4x4xf32> to !dyn
  %co = memref.cast %out : memref<1x2x1x4xf32> to !dyn
  call @tfc_uk_attention_f32(%cq, %ck, %ck, %cq, %co, %scale, %zero, %zero, %nocap, %nowin) : (!dyn, !dyn, !dyn, !dyn, !dyn, f32, i32, i32, f32, i64) -> ()
  memref.dealloc %k : memref<1x2x4x4xf32>
  return
}
