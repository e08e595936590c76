//===- Passes.td - tfc conversion passes -------------------*- tablegen -*-===//

#ifndef TFC_CONVERSION_PASSES_TD
#define TFC_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertTransformerToCPU : Pass<"convert-transformer-to-cpu", "mlir::ModuleOp"> {
  let summary = "Prepare transformer ops for tfc's CPU micro-kernels";
  let description = [{
    Prepares `transformer.attention`, `transformer.softmax`,
    `transformer.layer_norm` and `transformer.rms_norm` for the CPU
    micro-kernels that tfc-compile links into every model
    (`compiler/ukernels/`): a flash attention with an online softmax that
    never forms the score matrix, and one-pass-per-row softmax and
    normalisations. Operands become f32 (f16 and bf16 are widened around the
    op, but an f16 attention's keys and values stay 16-bit for the kernel's
    `_f32_f16` entry, and a bf16 attention keeps Q, K, V and its result
    bf16 for the `_bf16` entry, as does a bf16 layer_norm its operands and
    result for the `_bf16` kernel; an f16/bf16 rms_norm rounds the kernel's
    normalised rows to its type and multiplies by gamma there, as its
    definition says), the attention mask f32 and rank 4, softmax and the
    norms work on `[rows, n]` over the last
    dimension (an inner softmax dimension is transposed there and back). The
    kernels are declared in the module with `llvm.emit_c_interface`.

    One-shot bufferization then turns each op into a call that reads its
    operands' buffers in place and writes a fresh 64-byte aligned buffer
    (`registerKernelCallBufferization`). The collectives of a
    tensor-parallel model (`all_reduce`, `all_gather`) become calls of the
    runtime's in the same way, on f32 rows, and `parallel_rank` a call of
    its `tfc_parallel_rank`.

    Before:
    ```mlir
    %y = transformer.softmax %x {dimension = 0 : i64}
        : tensor<8x4xf16> -> tensor<8x4xf16>
    ```
    After:
    ```mlir
    %0 = tosa.cast %x : (tensor<8x4xf16>) -> tensor<8x4xf32>
    %1 = tosa.transpose %0 {perms = array<i32: 1, 0>} : ... -> tensor<4x8xf32>
    %2 = transformer.softmax %1 {dimension = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %3 = tosa.transpose %2 {perms = array<i32: 1, 0>} : ... -> tensor<8x4xf32>
    %y = tosa.cast %3 : (tensor<8x4xf32>) -> tensor<8x4xf16>
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::func::FuncDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::tensor::TensorDialect",
    "::mlir::tosa::TosaDialect"
  ];
}

def LinalgMatmulToCPU : Pass<"convert-linalg-matmul-to-cpu", "mlir::ModuleOp"> {
  let summary = "Lower matmuls with f32 results on buffers to tfc's packed GEMM kernel";
  let description = [{
    Replaces `linalg.matmul` and `linalg.batch_matmul` with an f32 result
    (and their default indexing maps) by calls into the packed GEMM
    micro-kernel linked into every model (compiler/ukernels/matmul.cpp): B
    is packed into two-vector panels, 256-deep slices of which stay in L1
    while 6-row blocks of C stay in registers. An f16 or bf16 B goes to the
    kernel's `_f32_f16` / `_f32_bf16` variant as it is: the kernel packs it
    in 16-bit panels, a weight (`tfc.role = "weight"`) once for the life of
    the process, and widens them as it loads them; an f16 A, or a bf16 A
    times a B of another type, is widened into an f32 temporary. A bf16 A
    times a bf16 B goes to the `_bf16_bf16` variant as it is (the kernel
    reads its values as the bf16 pairs of its bf16 dot products). The op's
    accumulate semantics (C += A . B) are kept. Runs after bufferization.

    With `quantize-weights=int8`, weight B operands are quantized to int8
    as the kernel packs them (`TFC_UK_QUANTIZE_I8`: a scale per output
    column, max|column| / 127, values rounded to nearest): a weight-only
    quantization that streams a quarter of f32's bytes (half of bf16's) in
    the memory-bound products of decoding. Activations, sums and results
    stay f32. `quantize-weights=int4` quantizes them to int4 in groups of
    128 rows of a column, each with its own scale (`TFC_UK_QUANTIZE_I4`):
    an eighth of f32's bytes.

    With `quantize-activations=int8` as well, the A operands of those
    products are quantized too, each row in blocks of 128 values with a
    scale each (`TFC_UK_QUANTIZE_A8`), and the kernel computes exact
    integer dot products (AVX2 `vpmaddubsw`), scaling each block's sums:
    what ONNX Runtime's MatMulNBits does at accuracy level 4.

    Before:
    ```mlir
    linalg.batch_matmul ins(%a, %b : memref<1x128x384xf32>, memref<1x384x384xf32>)
                        outs(%c : memref<1x128x384xf32>)
    ```
    After:
    ```mlir
    %a1 = memref.cast %a : memref<1x128x384xf32> to memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
    ...
    call @tfc_uk_batch_matmul_f32(%a1, %b1, %c1) : (...) -> ()
    ```
  }];
  let options = [
    Option<"quantizeWeights", "quantize-weights", "::tfc::QuantizeWeights",
           /*default=*/"::tfc::QuantizeWeights::None",
           "Quantize weight operands as they are packed: none, int8 or "
           "int4", [{::tfc::quantizeWeightsValues()}]>,
    Option<"quantizeActivations", "quantize-activations",
           "::tfc::QuantizeActivations",
           /*default=*/"::tfc::QuantizeActivations::None",
           "With quantize-weights: quantize those products' activations "
           "too: none or int8", [{::tfc::quantizeActivationsValues()}]>
  ];
  let dependentDialects = [
    "::mlir::func::FuncDialect",
    "::mlir::memref::MemRefDialect"
  ];
}

//===----------------------------------------------------------------------===//
// GPU (NVPTX)
//===----------------------------------------------------------------------===//

def ParallelLoopsToGPU : Pass<"tfc-parallel-loops-to-gpu", "mlir::func::FuncOp"> {
  let summary = "Turn every host-level parallel loop nest into a GPU launch";
  let description = [{
    After `convert-linalg-to-parallel-loops`, each top-level `scf.parallel`
    of a host function becomes one `gpu.launch` of 1-D blocks of
    `block-size` threads: the iteration space is linearised (the innermost
    dimension fastest, so neighbouring threads touch neighbouring elements)
    and every thread runs the loop body for one point; reductions inside the
    body stay sequential `scf.for` loops per thread. `memref.copy` between
    buffers becomes such a loop first, so that no host code touches device
    memory. A loop nest with reductions on `scf.parallel` itself is
    rejected.

    Upstream `gpu-map-parallel-loops` maps the first three dimensions of a
    single parallel loop to the grid with one thread per block; this pass
    fills whole blocks instead.
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "Threads per block">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect"
  ];
}

def ConvertTransformerToNVPTX : Pass<"convert-transformer-to-nvptx", "mlir::ModuleOp"> {
  let summary = "Lower fused attention, softmax and the norms to one GPU kernel each";
  let description = [{
    Replaces every `transformer.attention` with static shapes by a launch of
    a kernel built for its shapes in the `gpu.module @tfc_fused`: a block
    per (batch x head, tile of queries), K and V tiles staged through shared
    memory, the online softmax in registers, the output written once; the
    score matrix never exists. f16 and bf16 run on tensor cores
    (`nvvm.mma.sync` m16n8k16 with f32 accumulation, 64 queries per block of
    4 warps); f32 uses FMA (one thread per query row), so that f32 results
    keep f32 accuracy. Causal blocks stop at their last visible key.

    `transformer.softmax` over the last dimension, `transformer.layer_norm`
    and `transformer.rms_norm` become one kernel each: a warp per row, lanes
    striding the row, f32 statistics combined with shuffles, the result
    written once.

    A tensor-parallel model's `transformer.all_reduce` (static shapes)
    becomes a host call of the runtime's `tfc_device_all_reduce_f32` on its
    operand's device buffer as f32 rows and a fresh one for the sum (NCCL);
    `transformer.all_gather` a call of `tfc_device_all_gather_f32` into a
    fresh buffer of the ranks' rows one after another, transposed to the
    result's; `transformer.parallel_rank` a fresh device buffer that a call
    of `tfc_device_parallel_rank` sets. The GPU pipeline runs the pass for
    these in unfused builds too.

    Runs before bufferization: operands are read in place
    (`bufferization.to_buffer`), each result is a fresh buffer. What the
    kernels do not cover (dynamic shapes; odd head dimensions in f16/bf16;
    a softmax over an inner dimension) is left to `transformer-decompose`.
  }];
  let options = [
    Option<"ldmatrix", "ldmatrix", "bool", /*default=*/"false",
           "f16/bf16 attention reads its K and V fragments with ldmatrix "
           "(V stays row-major in shared memory and is loaded transposed)">,
    Option<"asyncCopy", "async-copy", "bool", /*default=*/"false",
           "f16/bf16 attention copies its K and V tiles to shared memory "
           "with cp.async, double-buffered (and reads fragments with "
           "ldmatrix); head dimensions that are not multiples of 8 keep "
           "the register-staged tiles">,
    Option<"wgmma", "wgmma", "bool", /*default=*/"false",
           "f16/bf16 attention on Hopper's wgmma (needs a gpu.module target "
           "of sm_90a): the async-copy kernel with Q·Kᵀ and P·V as "
           "warpgroup MMAs; head dimensions that are not multiples of 8 or "
           "exceed 128 keep the mma.sync kernels">,
    Option<"wgmmaWarpgroups", "wgmma-warpgroups", "int64_t",
           /*default=*/"1",
           "with wgmma: warpgroups per block, 1 (64 query rows) or 2 (128 "
           "rows sharing each K and V tile)">,
    Option<"tma", "tma", "bool", /*default=*/"false",
           "with wgmma: K and V tiles copied by TMA (cp.async.bulk.tensor, "
           "one thread per block, completion on mbarriers) into 128-byte "
           "swizzled shared memory instead of cp.async; the host code makes "
           "the tensor maps (the runtime's tfc_gpu_tensor_map)">,
    Option<"tmaProducer", "tma-producer", "bool", /*default=*/"false",
           "with tma and wgmma-warpgroups=2: a third warpgroup per block "
           "issues the copies and hands its registers to the two consumer "
           "warpgroups (setmaxnreg 24 / 240); other builds ignore it">,
    Option<"decodeKernel", "decode-kernel", "bool", /*default=*/"true",
           "attention with at most 8 query rows per KV head (decode) runs "
           "the split-KV decode kernel: a block per (batch x KV head, chunk "
           "of keys) and a kernel that combines the chunks">,
    Option<"warpRows", "warp-rows", "int64_t", /*default=*/"16",
           "f16/bf16 attention: query rows per warp, 16 (blocks of 64 rows) "
           "or 32 (blocks of 128; K and V fragments serve two mma each)">,
    Option<"decodeBlocksPerSM", "decode-blocks-per-sm", "int64_t",
           /*default=*/"4",
           "decode kernel: the blocks its chunks of keys aim at, per SM of "
           "an H200 (132 SMs; 1 to 16)">,
    Option<"decodeStages", "decode-stages", "int64_t", /*default=*/"2",
           "decode kernel: cp.async stages of K and V tiles per block, 2 to "
           "4 (stages - 1 tiles in flight while one is computed)">,
    Option<"decodeMma", "decode-mma", "bool", /*default=*/"false",
           "decode kernel, f16/bf16 with head dimensions that are multiples "
           "of 16: Q·Kᵀ and P·V on tensor cores (mma.sync m16n8k16, the "
           "query rows of a KV head as M, 16 keys per warp)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::func::FuncDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::nvgpu::NVGPUDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tosa::TosaDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def ConvertLinalgMatmulToNVPTX : Pass<"convert-linalg-matmul-to-nvptx", "mlir::ModuleOp"> {
  let summary = "Run f16/bf16 matmuls on tensor cores";
  let description = [{
    Replaces `linalg.matmul` and `linalg.batch_matmul` on f16 or bf16
    buffers (static shapes, identity layouts, f32 or same-type accumulator,
    even K and N) in host code by a launch of a GEMM kernel built for the
    shapes in `gpu.module @tfc_matmul`: a block of 4 warps per 64x64 tile of
    C, K in slices of 32 staged through shared memory (the next slice
    prefetched into registers), `nvvm.mma.sync` m16n8k16 with f32
    accumulation. f32 matmuls get an FMA GEMM (64x64 tiles of C per block
    of 256 threads, 4x4 per thread, K in slices of 16 through shared
    memory), which keeps f32 accuracy. The op's semantics (C += A·B) are
    kept. Other matmuls (odd K or N in f16/bf16, transposed maps) stay
    loop nests. Runs after bufferization.

    With `wgmma` (needs a gpu.module target of sm_90a; K and N multiples of
    8): a warpgroup per 64 rows x min(N, 128) columns of C (two per block
    sharing B where M > 64 and N reaches 128), K in slices of 64 copied by
    cp.async into three stages of wgmma's core matrices, one chain of wgmma
    m64nNk16 per slice with A and B read from shared memory, in flight
    while the next slices are copied.

    With `wgmma` and `tma`: thread 0 copies each slice by TMA
    (`cp.async.bulk.tensor`: A's rows of the block x 64 of K, B 64 of K x
    64 columns per box, out-of-bounds zero-filled) into three 128-byte
    swizzled stages, each with a full mbarrier (thread 0's arrival and the
    bytes) and an empty one (an arrival per warp once its chain that read
    the stage has retired; thread 0 waits for it before the refill). The
    host code gets the tensor maps of A and B from the runtime
    (`tfc_gpu_tensor_map`) and passes their device addresses after the
    buffers.
  }];
  let options = [
    Option<"wgmma", "wgmma", "bool", /*default=*/"false",
           "f16/bf16 matmuls on Hopper's wgmma (sm_90a)">,
    Option<"tma", "tma", "bool", /*default=*/"false",
           "with wgmma: A and B tiles copied by TMA (cp.async.bulk.tensor, "
           "one thread per block, completion on mbarriers) into 128-byte "
           "swizzled shared memory instead of cp.async; the host code makes "
           "the tensor maps (runtime: tfc_gpu_tensor_map)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::nvgpu::NVGPUDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect"
  ];
}

#endif // TFC_CONVERSION_PASSES_TD
