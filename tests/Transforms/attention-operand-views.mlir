// Attention reads its heads through transposed views of the projections'
// [B, S, H, D] buffers, and writes its output through a transposed view of
// the buffer its [B, H, S, D] result was copied to: the transposes and
// their buffers go. A buffer that something else reads, a source written
// between its copy and the call, or a destination touched between the call
// and its copy keep their transposes.
// RUN: tfc-opt %s --split-input-file --tfc-attention-operand-views | FileCheck %s

!dyn = memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
!dyn16 = memref<?x?x?x?xbf16, strided<[?, ?, ?, ?], offset: ?>>
func.func private @tfc_uk_attention_f32(!dyn, !dyn, !dyn, !dyn, !dyn, f32, i32, i32, f32, i64) attributes {llvm.emit_c_interface}
func.func private @tfc_uk_attention_f32_bf16(!dyn, !dyn16, !dyn16, !dyn, !dyn, f32, i32, i32, f32, i64) attributes {llvm.emit_c_interface}

// Q, K, V and the output: four views, no copy. The output's destination
// moves before the call.
// CHECK-LABEL: func.func @layer
// CHECK-SAME: (%[[Q:[^:]*]]: memref<2x5x3x4xf32>, %[[K:[^:]*]]: memref<2x5x3x4xf32>, %[[V:[^:]*]]: memref<2x5x3x4xf32>
// CHECK-NOT: linalg.transpose
// CHECK-DAG: %[[TQ:.*]] = memref.transpose %[[Q]] (d0, d1, d2, d3) -> (d0, d2, d1, d3) : memref<2x5x3x4xf32> to memref<2x3x5x4xf32, strided<[60, 4, 12, 1]>>
// CHECK-DAG: %[[TK:.*]] = memref.transpose %[[K]] (d0, d1, d2, d3) -> (d0, d2, d1, d3)
// CHECK-DAG: %[[TV:.*]] = memref.transpose %[[V]] (d0, d1, d2, d3) -> (d0, d2, d1, d3)
// CHECK-DAG: %[[CQ:.*]] = memref.cast %[[TQ]]
// CHECK-DAG: %[[CK:.*]] = memref.cast %[[TK]]
// CHECK-DAG: %[[CV:.*]] = memref.cast %[[TV]]
// CHECK-DAG: %[[D:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x5x3x4xf32>
// CHECK-DAG: %[[TD:.*]] = memref.transpose %[[D]] (d0, d1, d2, d3) -> (d0, d2, d1, d3)
// CHECK-DAG: %[[CD:.*]] = memref.cast %[[TD]]
// CHECK: call @tfc_uk_attention_f32(%[[CQ]], %[[CK]], %[[CV]], %{{.*}}, %[[CD]],
// CHECK-NOT: linalg.transpose
// CHECK: memref.copy %[[D]], %{{.*}}
// CHECK-NOT: memref.dealloc
// CHECK: memref.dealloc %[[D]]
// CHECK-NEXT: return
func.func @layer(%q: memref<2x5x3x4xf32>, %k: memref<2x5x3x4xf32>, %v: memref<2x5x3x4xf32>, %mask: memref<2x1x1x5xf32>, %result: memref<2x5x3x4xf32>) {
  %scale = arith.constant 0.5 : f32
  %nocap = arith.constant 0.0 : f32
  %nowin = arith.constant 0 : i64
  %zero = arith.constant 0 : i32
  %flags = arith.constant 1 : i32
  %tq = memref.alloc() {alignment = 64 : i64} : memref<2x3x5x4xf32>
  linalg.transpose ins(%q : memref<2x5x3x4xf32>) outs(%tq : memref<2x3x5x4xf32>) permutation = [0, 2, 1, 3]
  %tk = memref.alloc() {alignment = 64 : i64} : memref<2x3x5x4xf32>
  linalg.transpose ins(%k : memref<2x5x3x4xf32>) outs(%tk : memref<2x3x5x4xf32>) permutation = [0, 2, 1, 3]
  %tv = memref.alloc() {alignment = 64 : i64} : memref<2x3x5x4xf32>
  linalg.transpose ins(%v : memref<2x5x3x4xf32>) outs(%tv : memref<2x3x5x4xf32>) permutation = [0, 2, 1, 3]
  %cq = memref.cast %tq : memref<2x3x5x4xf32> to !dyn
  %ck = memref.cast %tk : memref<2x3x5x4xf32> to !dyn
  %cv = memref.cast %tv : memref<2x3x5x4xf32> to !dyn
  %cm = memref.cast %mask : memref<2x1x1x5xf32> to !dyn
  %o = memref.alloc() {alignment = 64 : i64} : memref<2x3x5x4xf32>
  %co = memref.cast %o : memref<2x3x5x4xf32> to !dyn
  call @tfc_uk_attention_f32(%cq, %ck, %cv, %cm, %co, %scale, %flags, %zero, %nocap, %nowin) : (!dyn, !dyn, !dyn, !dyn, !dyn, f32, i32, i32, f32, i64) -> ()
  %d = memref.alloc() {alignment = 64 : i64} : memref<2x5x3x4xf32>
  linalg.transpose ins(%o : memref<2x3x5x4xf32>) outs(%d : memref<2x5x3x4xf32>) permutation = [0, 2, 1, 3]
  memref.copy %d, %result : memref<2x5x3x4xf32> to memref<2x5x3x4xf32>
  memref.dealloc %tq : memref<2x3x5x4xf32>
  memref.dealloc %tk : memref<2x3x5x4xf32>
  memref.dealloc %tv : memref<2x3x5x4xf32>
  memref.dealloc %o : memref<2x3x5x4xf32>
  memref.dealloc %d : memref<2x5x3x4xf32>
  return
}

// -----

!dyn = memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
func.func private @tfc_uk_attention_f32(!dyn, !dyn, !dyn, !dyn, !dyn, f32, i32, i32, f32, i64) attributes {llvm.emit_c_interface}

// Two layers share one buffer for V, filled whole by each layer's
// transpose: both calls read views and the buffer goes. The first layer's
// Q source is written after its copy, the second layer's transposed Q is
// read after its call, and both calls read one transposed K: those keep
// their copies.
// CHECK-LABEL: func.func @two_layers
// CHECK-SAME: (%[[Q:[^:]*]]: memref<1x4x2x8xf32>, %[[K:[^:]*]]: memref<1x4x2x8xf32>, %[[V0:[^:]*]]: memref<1x4x2x8xf32>, %[[V1:[^:]*]]: memref<1x4x2x8xf32>
// CHECK: %[[TQ:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x2x4x8xf32>
// CHECK-NEXT: %[[TK:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x2x4x8xf32>
// CHECK-NOT: memref.alloc
// CHECK: linalg.transpose ins(%[[Q]] : {{.*}}) outs(%[[TQ]] : {{.*}})
// CHECK-NEXT: linalg.fill ins(%{{.*}} : f32) outs(%[[Q]] : {{.*}})
// CHECK-NEXT: linalg.transpose ins(%[[K]] : {{.*}}) outs(%[[TK]] : {{.*}})
// CHECK-NEXT: memref.transpose %[[V0]]
// CHECK-NEXT: memref.cast
// CHECK-NEXT: call @tfc_uk_attention_f32
// CHECK-NEXT: linalg.transpose ins(%[[Q]] : {{.*}}) outs(%[[TQ]] : {{.*}})
// CHECK-NEXT: memref.transpose %[[V1]]
// CHECK-NEXT: memref.cast
// CHECK-NEXT: call @tfc_uk_attention_f32
// CHECK-NEXT: linalg.copy ins(%[[TQ]]
// CHECK-NEXT: memref.dealloc %[[TQ]]
// CHECK-NEXT: memref.dealloc %[[TK]]
// CHECK-NEXT: return
func.func @two_layers(%q: memref<1x4x2x8xf32>, %k: memref<1x4x2x8xf32>, %v0: memref<1x4x2x8xf32>, %v1: memref<1x4x2x8xf32>, %mask: memref<1x1x1x4xf32>, %o0: memref<1x2x4x8xf32>, %o1: memref<1x2x4x8xf32>, %seen: memref<1x2x4x8xf32>) {
  %scale = arith.constant 0.5 : f32
  %zerof = arith.constant 0.0 : f32
  %nowin = arith.constant 0 : i64
  %zero = arith.constant 0 : i32
  %flags = arith.constant 1 : i32
  %tq = memref.alloc() {alignment = 64 : i64} : memref<1x2x4x8xf32>
  %tk = memref.alloc() {alignment = 64 : i64} : memref<1x2x4x8xf32>
  %tv = memref.alloc() {alignment = 64 : i64} : memref<1x2x4x8xf32>
  %cq = memref.cast %tq : memref<1x2x4x8xf32> to !dyn
  %ck = memref.cast %tk : memref<1x2x4x8xf32> to !dyn
  %cv = memref.cast %tv : memref<1x2x4x8xf32> to !dyn
  %cm = memref.cast %mask : memref<1x1x1x4xf32> to !dyn
  %co0 = memref.cast %o0 : memref<1x2x4x8xf32> to !dyn
  %co1 = memref.cast %o1 : memref<1x2x4x8xf32> to !dyn
  linalg.transpose ins(%q : memref<1x4x2x8xf32>) outs(%tq : memref<1x2x4x8xf32>) permutation = [0, 2, 1, 3]
  linalg.fill ins(%zerof : f32) outs(%q : memref<1x4x2x8xf32>)
  linalg.transpose ins(%k : memref<1x4x2x8xf32>) outs(%tk : memref<1x2x4x8xf32>) permutation = [0, 2, 1, 3]
  linalg.transpose ins(%v0 : memref<1x4x2x8xf32>) outs(%tv : memref<1x2x4x8xf32>) permutation = [0, 2, 1, 3]
  call @tfc_uk_attention_f32(%cq, %ck, %cv, %cm, %co0, %scale, %flags, %zero, %zerof, %nowin) : (!dyn, !dyn, !dyn, !dyn, !dyn, f32, i32, i32, f32, i64) -> ()
  linalg.transpose ins(%q : memref<1x4x2x8xf32>) outs(%tq : memref<1x2x4x8xf32>) permutation = [0, 2, 1, 3]
  linalg.transpose ins(%v1 : memref<1x4x2x8xf32>) outs(%tv : memref<1x2x4x8xf32>) permutation = [0, 2, 1, 3]
  call @tfc_uk_attention_f32(%cq, %ck, %cv, %cm, %co1, %scale, %flags, %zero, %zerof, %nowin) : (!dyn, !dyn, !dyn, !dyn, !dyn, f32, i32, i32, f32, i64) -> ()
  linalg.copy ins(%tq : memref<1x2x4x8xf32>) outs(%seen : memref<1x2x4x8xf32>)
  memref.dealloc %tq : memref<1x2x4x8xf32>
  memref.dealloc %tk : memref<1x2x4x8xf32>
  memref.dealloc %tv : memref<1x2x4x8xf32>
  return
}

// -----

!dyn = memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
!dyn16 = memref<?x?x?x?xbf16, strided<[?, ?, ?, ?], offset: ?>>
func.func private @tfc_uk_attention_f32_bf16(!dyn, !dyn16, !dyn16, !dyn, !dyn, f32, i32, i32, f32, i64) attributes {llvm.emit_c_interface}

// bf16 keys and values: their views keep the element type. An output
// destination that something reads between the call and the copy keeps
// the copy.
// CHECK-LABEL: func.func @bf16
// CHECK-SAME: (%[[Q:[^:]*]]: memref<1x3x2x8xf32>, %[[K:[^:]*]]: memref<1x3x2x8xbf16>
// CHECK: %[[TK:.*]] = memref.transpose %[[K]] (d0, d1, d2, d3) -> (d0, d2, d1, d3) : memref<1x3x2x8xbf16> to memref<1x2x3x8xbf16, strided<[48, 8, 16, 1]>>
// CHECK: memref.cast %[[TK]] : memref<1x2x3x8xbf16, strided<[48, 8, 16, 1]>> to memref<?x?x?x?xbf16, strided<[?, ?, ?, ?], offset: ?>>
// CHECK: call @tfc_uk_attention_f32_bf16
// CHECK-NEXT: linalg.copy
// CHECK-NEXT: linalg.transpose ins(%{{.*}} : memref<1x2x3x8xf32>) outs(%{{.*}} : memref<1x3x2x8xf32>)
func.func @bf16(%q: memref<1x3x2x8xf32>, %k: memref<1x3x2x8xbf16>, %v: memref<1x3x2x8xbf16>, %mask: memref<1x1x1x3xf32>, %dest: memref<1x3x2x8xf32>, %peek: memref<1x3x2x8xf32>) {
  %scale = arith.constant 0.5 : f32
  %zerof = arith.constant 0.0 : f32
  %nowin = arith.constant 0 : i64
  %zero = arith.constant 0 : i32
  %flags = arith.constant 1 : i32
  %tq = memref.alloc() {alignment = 64 : i64} : memref<1x2x3x8xf32>
  linalg.transpose ins(%q : memref<1x3x2x8xf32>) outs(%tq : memref<1x2x3x8xf32>) permutation = [0, 2, 1, 3]
  %tk = memref.alloc() {alignment = 64 : i64} : memref<1x2x3x8xbf16>
  linalg.transpose ins(%k : memref<1x3x2x8xbf16>) outs(%tk : memref<1x2x3x8xbf16>) permutation = [0, 2, 1, 3]
  %tv = memref.alloc() {alignment = 64 : i64} : memref<1x2x3x8xbf16>
  linalg.transpose ins(%v : memref<1x3x2x8xbf16>) outs(%tv : memref<1x2x3x8xbf16>) permutation = [0, 2, 1, 3]
  %cq = memref.cast %tq : memref<1x2x3x8xf32> to !dyn
  %ck = memref.cast %tk : memref<1x2x3x8xbf16> to !dyn16
  %cv = memref.cast %tv : memref<1x2x3x8xbf16> to !dyn16
  %cm = memref.cast %mask : memref<1x1x1x3xf32> to !dyn
  %o = memref.alloc() {alignment = 64 : i64} : memref<1x2x3x8xf32>
  %co = memref.cast %o : memref<1x2x3x8xf32> to !dyn
  call @tfc_uk_attention_f32_bf16(%cq, %ck, %cv, %cm, %co, %scale, %flags, %zero, %zerof, %nowin) : (!dyn, !dyn16, !dyn16, !dyn, !dyn, f32, i32, i32, f32, i64) -> ()
  linalg.copy ins(%dest : memref<1x3x2x8xf32>) outs(%peek : memref<1x3x2x8xf32>)
  linalg.transpose ins(%o : memref<1x2x3x8xf32>) outs(%dest : memref<1x3x2x8xf32>) permutation = [0, 2, 1, 3]
  memref.dealloc %tq : memref<1x2x3x8xf32>
  memref.dealloc %tk : memref<1x2x3x8xbf16>
  memref.dealloc %tv : memref<1x2x3x8xbf16>
  memref.dealloc %o : memref<1x2x3x8xf32>
  return
}
