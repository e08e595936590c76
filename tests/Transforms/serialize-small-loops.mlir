// RUN: tfc-opt %s --tfc-serialize-small-loops | FileCheck %s
//
// A parallel loop whose constant trip counts times its body's operations
// stay under 2^16 becomes nested scf.for loops (convert-scf-to-openmp then
// leaves it on the calling thread); more work, dynamic bounds or a call in
// the body keep it parallel.

// 768 iterations of 3 operations.
// CHECK-LABEL: func.func @small
// CHECK-NOT: scf.parallel
// CHECK: scf.for
func.func @small(%x: memref<768xf32>, %y: memref<768xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 768 : index
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %v = memref.load %x[%i] : memref<768xf32>
    %w = arith.addf %v, %v : f32
    memref.store %w, %y[%i] : memref<768xf32>
    scf.reduce
  }
  return
}

// 128 x 768 iterations: parallel.
// CHECK-LABEL: func.func @large
// CHECK: scf.parallel
func.func @large(%x: memref<128x768xf32>, %y: memref<128x768xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = arith.constant 128 : index
  %n = arith.constant 768 : index
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    scf.for %j = %c0 to %n step %c1 {
      %v = memref.load %x[%i, %j] : memref<128x768xf32>
      %w = arith.addf %v, %v : f32
      memref.store %w, %y[%i, %j] : memref<128x768xf32>
    }
    scf.reduce
  }
  return
}

// CHECK-LABEL: func.func @dynamic
// CHECK: scf.parallel
func.func @dynamic(%x: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %z, %x[%i] : memref<?xf32>
    scf.reduce
  }
  return
}

func.func private @work(index)
// CHECK-LABEL: func.func @calls
// CHECK: scf.parallel
func.func @calls() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    func.call @work(%i) : (index) -> ()
    scf.reduce
  }
  return
}
