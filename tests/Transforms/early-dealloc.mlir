// RUN: tfc-opt %s --pass-pipeline='builtin.module(func.func(tfc-early-dealloc))' | FileCheck %s
//
// Each dealloc of a buffer allocated in the same block moves up to just
// after the last operation of the block that uses the buffer or a memref
// derived from it (views, casts, results of ops that take it), so that
// the next allocation can take the freed block; temporaries nothing reads
// are erased first (@unread). A GPU model's device buffers move the same
// way (@device). Allocations move down to their first use (@sink).

// The first buffer dies after its copy into the second, which dies after
// a view of it is read: each dealloc lands right after that last use,
// before the next allocation.
// CHECK-LABEL: func.func @chain
// CHECK:      %[[A:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: %[[B:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK-NEXT: memref.copy %[[A]], %[[B]]
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK-NEXT: %[[V:.*]] = memref.expand_shape %[[B]]
// CHECK-NEXT: %[[C:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK-NEXT: memref.copy %[[B]], %[[C]]
// CHECK-NEXT: memref.copy %[[V]], %[[OUT:.*]] :
// CHECK-NEXT: memref.dealloc %[[B]]
// CHECK-NEXT: memref.copy %[[C]]
// CHECK-NEXT: memref.dealloc %[[C]]
// CHECK-NEXT: return
func.func @chain(%out: memref<2x2x8xf32>, %out2: memref<4x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %a = memref.alloc() : memref<4x8xf32>
  linalg.fill ins(%zero : f32) outs(%a : memref<4x8xf32>)
  %b = memref.alloc() : memref<4x8xf32>
  memref.copy %a, %b : memref<4x8xf32> to memref<4x8xf32>
  %v = memref.expand_shape %b [[0, 1], [2]] output_shape [2, 2, 8]
      : memref<4x8xf32> into memref<2x2x8xf32>
  %c = memref.alloc() : memref<4x8xf32>
  memref.copy %b, %c : memref<4x8xf32> to memref<4x8xf32>
  memref.copy %v, %out : memref<2x2x8xf32> to memref<2x2x8xf32>
  memref.copy %c, %out2 : memref<4x8xf32> to memref<4x8xf32>
  memref.dealloc %a : memref<4x8xf32>
  memref.dealloc %b : memref<4x8xf32>
  memref.dealloc %c : memref<4x8xf32>
  return
}

// A use inside a loop keeps the buffer until the loop ends; a memref the
// loop makes from it (its result) keeps it until that is last used.
// CHECK-LABEL: func.func @loops
// CHECK:      %[[A:.*]] = memref.alloc()
// CHECK:      %[[R:.*]] = scf.for
// CHECK:      }
// CHECK-NEXT: memref.copy %[[R]]
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK-NEXT: return
func.func @loops(%out: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %one = arith.constant 1.0 : f32
  %a = memref.alloc() : memref<8xf32>
  %r = scf.for %i = %c0 to %c8 step %c1 iter_args(%m = %a) -> (memref<8xf32>) {
    memref.store %one, %m[%i] : memref<8xf32>
    scf.yield %m : memref<8xf32>
  }
  memref.copy %r, %out : memref<8xf32> to memref<8xf32>
  memref.dealloc %a : memref<8xf32>
  return
}

// A dealloc in another block than its buffer's allocation stays there, as
// does one of a buffer the function did not allocate.
// CHECK-LABEL: func.func @kept
// CHECK:      scf.if
// CHECK-NEXT: memref.dealloc %alloc
// CHECK-NEXT: }
// CHECK-NEXT: memref.store
// CHECK-NEXT: memref.dealloc %arg0
// CHECK-NEXT: return
func.func @kept(%x: memref<8xf32>, %cond: i1, %out: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %one = arith.constant 1.0 : f32
  %a = memref.alloc() : memref<8xf32>
  memref.store %one, %a[%c0] : memref<8xf32>
  memref.copy %a, %out : memref<8xf32> to memref<8xf32>
  scf.if %cond {
    memref.dealloc %a : memref<8xf32>
  }
  memref.store %one, %out[%c0] : memref<8xf32>
  memref.dealloc %x : memref<8xf32>
  return
}

// Temporaries nothing reads go, with their fills, copies, stores and
// frees: the accumulator a matmul's kernel call left unread, a transpose's
// buffer that became a view. A buffer read by anything stays.
// CHECK-LABEL: func.func @unread
// CHECK-NOT:  memref.alloc() : memref<4x8xf32>
// CHECK-NOT:  memref.alloc() : memref<8x4xf32>
// CHECK-NOT:  memref.alloc() : memref<2xf32>
// CHECK:      %[[R:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NEXT: linalg.fill {{.*}} outs(%[[R]]
// CHECK-NEXT: memref.copy %[[R]], %arg1
// CHECK-NEXT: memref.dealloc %[[R]]
// CHECK-NEXT: return
func.func @unread(%x: memref<4x8xf32>, %out: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %filled = memref.alloc() : memref<4x8xf32>
  linalg.fill ins(%zero : f32) outs(%filled : memref<4x8xf32>)
  %unused = memref.alloc() : memref<8x4xf32>
  %copied = memref.alloc() : memref<4x8xf32>
  memref.copy %x, %copied : memref<4x8xf32> to memref<4x8xf32>
  %stored = memref.alloc() : memref<2xf32>
  memref.store %zero, %stored[%c0] : memref<2xf32>
  %read = memref.alloc() : memref<8xf32>
  linalg.fill ins(%zero : f32) outs(%read : memref<8xf32>)
  memref.copy %read, %out : memref<8xf32> to memref<8xf32>
  memref.dealloc %filled : memref<4x8xf32>
  memref.dealloc %unused : memref<8x4xf32>
  memref.dealloc %copied : memref<4x8xf32>
  memref.dealloc %stored : memref<2xf32>
  memref.dealloc %read : memref<8xf32>
  return
}

// A GPU model's device buffers (synchronous gpu.alloc and gpu.dealloc, in
// host code before gpu-async-region): the first buffer is freed right after
// the launch that last reads it, before the second is allocated; the third
// is only written (a gpu.memset) and goes with its writes.
// CHECK-LABEL: func.func @device
// CHECK:      %[[A:.*]] = gpu.alloc () : memref<64xf32>
// CHECK-NEXT: gpu.launch
// CHECK:      gpu.terminator
// CHECK-NEXT: }
// CHECK-NEXT: gpu.dealloc %[[A]]
// CHECK-NEXT: %[[B:.*]] = gpu.alloc () : memref<64xf32>
// CHECK-NOT:  gpu.memset
// CHECK:      gpu.dealloc %[[B]]
// CHECK-NEXT: return
func.func @device(%x: memref<64xf32>, %out: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0.0 : f32
  %a = gpu.alloc () : memref<64xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%tx] : memref<64xf32>
    memref.store %v, %a[%tx] : memref<64xf32>
    %w = memref.load %a[%tx] : memref<64xf32>
    memref.store %w, %out[%tx] : memref<64xf32>
    gpu.terminator
  }
  %unread = gpu.alloc () : memref<64xf32>
  gpu.memset %unread, %zero : memref<64xf32>, f32
  %b = gpu.alloc () : memref<64xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %v = memref.load %out[%tx] : memref<64xf32>
    memref.store %v, %b[%tx] : memref<64xf32>
    %w = memref.load %b[%tx] : memref<64xf32>
    memref.store %w, %out[%tx] : memref<64xf32>
    gpu.terminator
  }
  gpu.dealloc %a : memref<64xf32>
  gpu.dealloc %unread : memref<64xf32>
  gpu.dealloc %b : memref<64xf32>
  return
}

// An allocation moves down to just before its first use in its block, where
// the block freed by the buffer before it can serve it.
// CHECK-LABEL: func.func @sink
// CHECK:      %[[A:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NEXT: linalg.fill {{.*}} outs(%[[A]]
// CHECK-NEXT: memref.copy %[[A]], %{{.*}}
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK-NEXT: %[[B:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NEXT: linalg.fill {{.*}} outs(%[[B]]
func.func @sink(%out: memref<8xf32>, %out2: memref<8xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %b = memref.alloc() : memref<8xf32>
  %a = memref.alloc() : memref<8xf32>
  linalg.fill ins(%zero : f32) outs(%a : memref<8xf32>)
  memref.copy %a, %out : memref<8xf32> to memref<8xf32>
  linalg.fill ins(%one : f32) outs(%b : memref<8xf32>)
  memref.copy %b, %out2 : memref<8xf32> to memref<8xf32>
  memref.dealloc %a : memref<8xf32>
  memref.dealloc %b : memref<8xf32>
  return
}
