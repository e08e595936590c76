// Every buffer access of a GPU model's host function ends up inside a
// launch: loop nests as 1-D launches over their linearised iteration space
// (none when the space is empty), and what is left (rank-0 ops, reductions
// over every dimension) as single-thread launches.
//
// RUN: tfc-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(convert-linalg-to-parallel-loops,tfc-parallel-loops-to-gpu))" | FileCheck %s

// Static bounds: the trip counts (7, 5, 3; 105 in all, one block) are
// constants, so the kernel delinearises by constants.
// CHECK-LABEL: func.func @loop_nest
// CHECK-DAG: %[[C105:.*]] = arith.constant 105 : index
// CHECK-DAG: %[[C7:.*]] = arith.constant 7 : index
// CHECK-DAG: %[[C5:.*]] = arith.constant 5 : index
// CHECK: arith.cmpi ugt, %[[C105]]
// CHECK: scf.if
// CHECK: gpu.launch blocks(%{{.*}}) in (%{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) threads(%{{.*}}) in (%{{.*}} = %c256
// CHECK: arith.cmpi ult, %{{.*}}, %[[C105]]
// CHECK: arith.remui %{{.*}}, %[[C7]]
// CHECK: arith.divui %{{.*}}, %[[C7]]
// CHECK: arith.remui %{{.*}}, %[[C5]]
// CHECK: arith.divui %{{.*}}, %[[C5]]
// CHECK: memref.load
// CHECK: memref.store
func.func @loop_nest(%a: memref<3x5x7xf32>, %b: memref<3x5x7xf32>) {
  linalg.copy ins(%a : memref<3x5x7xf32>) outs(%b : memref<3x5x7xf32>)
  return
}

// -----

// CHECK-LABEL: func.func @rank0
// CHECK-NOT: memref.load
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %[[ONE:.*]], %{{.*}} = %[[ONE]], %{{.*}} = %[[ONE]]) threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %[[ONE]], %{{.*}} = %[[ONE]], %{{.*}} = %[[ONE]])
// CHECK: memref.load
// CHECK: arith.addf
// CHECK: memref.store
// CHECK: gpu.terminator
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @rank0(%a: memref<f32>, %b: memref<f32>, %c: memref<f32>) {
  linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}
      ins(%a, %b : memref<f32>, memref<f32>) outs(%c : memref<f32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// CHECK-LABEL: func.func @full_reduction
// CHECK: gpu.launch
// CHECK: scf.for
// CHECK: memref.load
// CHECK: memref.store
// CHECK: gpu.terminator
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @full_reduction(%a: memref<8xf32>, %c: memref<f32>) {
  linalg.reduce ins(%a : memref<8xf32>) outs(%c : memref<f32>) dimensions = [0]
    (%x: f32, %acc: f32) {
      %s = arith.addf %x, %acc : f32
      linalg.yield %s : f32
    }
  return
}

// -----

// Pure arithmetic inside a run that the host also needs stays on the host
// as a copy (nothing read from device memory flows back).
// RUN: tfc-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(tfc-parallel-loops-to-gpu))" | FileCheck %s --check-prefix=SHARED
// CHECK-LABEL: func.func @shared_index
// SHARED-LABEL: func.func @shared_index
// SHARED: %[[HOST:.*]] = arith.muli %arg2, %arg2
// SHARED: gpu.launch
// SHARED: memref.load %arg0[]
// SHARED: arith.muli %arg2, %arg2
// SHARED: memref.store
// SHARED: gpu.terminator
// SHARED: arith.index_cast %[[HOST]]
func.func @shared_index(%a: memref<f32>, %c: memref<f32>, %n: index) -> i64 {
  %x = memref.load %a[] : memref<f32>
  %m = arith.muli %n, %n : index
  memref.store %x, %c[] : memref<f32>
  %w = arith.index_cast %m : index to i64
  return %w : i64
}
