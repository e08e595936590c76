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
    (`registerCPUBufferizationModels`).

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
    "::mlir::tosa::TosaDialect"
  ];
}

def AttentionSplitKV : Pass<"tfc-attention-split-kv", "mlir::ModuleOp"> {
  let summary = "Attention reads a concatenation of two buffers where they are";
  let description = [{
    A decoder's step concatenates each layer's cached keys and values with
    those of its new tokens and hands the result to attention; when the
    concatenation is returned (`present`, the next step's past) the copy is
    the output, but when it is not (`--present=new`) copying the whole
    cache into a temporary buffer only for attention to read it costs as
    much as the attention. This pass finds calls of `tfc_uk_attention_f32`
    (or of its `_bf16` / `_f16` forms, 16-bit keys and values) whose keys
    and values are each a fresh buffer filled by exactly two
    copies along the key axis, with one split point for both, and that
    nothing else reads; the call becomes `tfc_uk_attention_kv2_f32` (`_bf16`,
    `_f16`) on the
    copies' sources, and the buffers and copies go. A source written
    between its copy and the call is a reason to keep the copy.

    Before:
    ```mlir
    %k = memref.alloc() : memref<1x4x128x64xf32>
    %k0 = memref.subview %k[0, 0, 0, 0] [1, 4, 127, 64] [1, 1, 1, 1] ...
    memref.copy %past_k, %k0 ...
    %k1 = memref.subview %k[0, 0, 127, 0] [1, 4, 1, 64] [1, 1, 1, 1] ...
    memref.copy %new_k, %k1 ...
    (the same for %v)
    call @tfc_uk_attention_f32(%q, %k, %v, %mask, %out, ...)
    memref.dealloc %k ...
    ```
    After:
    ```mlir
    call @tfc_uk_attention_kv2_f32(%q, %past_k, %new_k, %past_v, %new_v,
                                   %mask, %out, ...)
    ```
  }];
  let dependentDialects = [
    "::mlir::func::FuncDialect",
    "::mlir::memref::MemRefDialect"
  ];
}

def AttentionOperandViews : Pass<"tfc-attention-operand-views", "mlir::ModuleOp"> {
  let summary = "Attention reads and writes the heads where the projections keep them";
  let description = [{
    The graph splits each projection [B, S, H*D] into heads [B, S, H, D] and
    transposes them to the [B, H, S, D] that attention takes, and transposes
    attention's output back before the output projection: four copies a
    layer, each a pass over the activations and a parallel region. The
    attention kernels take strided operands, so this pass finds calls of
    `tfc_uk_attention_f32` (or its `_bf16` / `_f16` forms) whose Q, K or V
    is a fresh buffer that a `linalg.transpose` fills and nothing else
    uses, and gives the call a transposed view of the transpose's source
    instead (its source unchanged until the call); and whose output is a
    fresh buffer that a `linalg.transpose` copies out and nothing else
    reads, and makes the call write through a view of that copy's
    destination (nothing else touching it in between). The buffers and the
    copies go.

    Before:
    ```mlir
    %t = memref.alloc() : memref<4x12x16x32xf32>
    linalg.transpose ins(%heads : memref<4x16x12x32xf32>) outs(%t : ...)
        permutation = [0, 2, 1, 3]
    %ct = memref.cast %t : ... to memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
    call @tfc_uk_attention_f32(%ct, ...)
    ```
    After:
    ```mlir
    %v = memref.transpose %heads (d0, d1, d2, d3) -> (d0, d2, d1, d3) : ...
    %cv = memref.cast %v : ... to memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
    call @tfc_uk_attention_f32(%cv, ...)
    ```
  }];
  let dependentDialects = [
    "::mlir::func::FuncDialect",
    "::mlir::memref::MemRefDialect"
  ];
}

def MathApproximation : Pass<"tfc-math-approximation"> {
  let summary = "Replace math ops by vectorisable polynomial approximations";
  let description = [{
    Rewrites `math.exp`, `math.erf`, `math.tanh`, `math.log`, ... on f32
    (scalars and vectors) into polynomial approximations built from
    arithmetic (MLIR's `populateMathPolynomialApproximationPatterns`). LLVM
    has no intrinsic for `erf` (GELU), and its `exp` on vectors becomes one
    libm call per element; the polynomial forms vectorise and run about ten
    times faster on AVX-512 with a relative error of about 1e-7. An f32
    `math.erf` whose result reaches only roundings to f16 or bf16, through
    elementwise arithmetic (the GELU of a bf16 model), becomes one rational
    approximation on |x| <= 4 instead: 20 operations against MLIR's 50, 6.1
    units of f32's last place against 4, which the rounding hides.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def ExpandBF16Casts : Pass<"tfc-expand-bf16-casts"> {
  let summary = "Expand f32 <-> bf16 conversions into integer arithmetic";
  let description = [{
    Rewrites `arith.truncf` f32 -> bf16 (round to nearest even, NaN kept a
    NaN) and `arith.extf` bf16 -> f32 into shifts and adds on the bits
    (MLIR's `populateExpandBFloat16Patterns`). Without AVX512-BF16, LLVM
    lowers each truncation to a call of compiler-rt's `__truncsfbf2`, one
    element at a time, in the loops of a model computing in bf16; the
    integer forms vectorise. Nothing is folded on the way: every bf16
    result keeps its rounding, also where the next op of the same loop
    reads it (`arith-emulate-unsupported-floats` marks its casts
    `contract`, and `extf(truncf(x))` would fold to `x`).
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
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
    Option<"quantizeWeights", "quantize-weights", "std::string",
           /*default=*/"\"none\"",
           "Quantize weight operands as they are packed: none, int8 or "
           "int4">,
    Option<"quantizeActivations", "quantize-activations", "std::string",
           /*default=*/"\"none\"",
           "With quantize-weights: quantize those products' activations "
           "too: none or int8">
  ];
  let dependentDialects = [
    "::mlir::func::FuncDialect",
    "::mlir::memref::MemRefDialect"
  ];
}

def FuseElementwise : Pass<"tfc-fuse-elementwise"> {
  let summary = "Fuse elementwise linalg.generic producers into their consumers";
  let description = [{
    Upstream elementwise fusion restricted to what keeps matmuls recognisable:
    an elementwise `linalg.generic` producer is fused into a consumer
    `linalg.generic` (elementwise or a reduction), so bias, activation and
    residual chains and the exp/sum of a softmax become single loops. Unlike
    `linalg-fuse-elementwise-ops`, reshapes are not propagated through named
    ops, so `linalg.batch_matmul` stays a matmul that
    `convert-linalg-matmul-to-cpu` can hand to the GEMM kernel.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def StridedCopiesToLinalg : Pass<"tfc-strided-copies-to-linalg"> {
  let summary = "Rewrite memref.copy between strided buffers as linalg.copy";
  let description = [{
    `finalize-memref-to-llvm` lowers a `memref.copy` to a memcpy when both
    buffers are contiguous and otherwise to a call to `memrefCopy`, which
    lives in MLIR's runner library; tfc's runtime does not link MLIR, so a
    model that needs it would not load. Such copies come from writing into
    a strided view (a concatenation, an insert into a slice). This pass
    turns each one into `linalg.copy`, which becomes loops with the rest of
    the linalg ops; contiguous copies stay memcpys.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def EarlyDealloc : Pass<"tfc-early-dealloc", "mlir::func::FuncOp"> {
  let summary = "Drop unread temporaries, allocate the rest at their first "
                "use and free them after their last";
  let description = [{
    `buffer-deallocation-pipeline` frees a buffer at the end of the block
    that allocates it: in a model's one-block function, every temporary
    lives until the function returns, and the runtime's caching allocator
    can reuse none of them within a run (a 12-block LLaMA prefill of 128
    tokens took 158 fresh blocks, 85 MB, all page-faulted in the first
    run). This pass moves each unconditional `memref.dealloc` of a
    `memref.alloc` in the same block (or `gpu.dealloc` of a `gpu.alloc`,
    both synchronous: a GPU model's host code before `gpu-async-region`,
    whose launches run in order on one stream, so a freed device block is
    only reused by work queued after the last launch that reads it) up to
    just after the last operation
    of the block that uses the buffer or anything derived from it (any
    memref result of an operation that takes it: views, casts, loop
    results), so that later allocations of the run take the freed blocks.
    A buffer used by the block's terminator, or outside the block, stays.
    First it erases the temporaries nothing reads (every user fills,
    copies into, sets, stores to or frees it), with those users: the lowering of
    matmuls to kernel calls leaves the buffer of a weight's transpose that
    became a view, a weight-sized allocation per weight shape and run.
    Then it moves each allocation down to just before the first operation
    of its block that uses the buffer (bufferization may allocate a
    zero-initialised accumulator at the function's start), so that it can
    take a block freed by then.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def SerializeSmallLoops : Pass<"tfc-serialize-small-loops"> {
  let summary = "Run parallel loops with little work on one thread";
  let description = [{
    Rewrites an outermost `scf.parallel` (without results) whose constant
    trip counts times its body's operations (nested loops counted per
    iteration) stay under 2^16 into nested `scf.for` loops, so that
    `convert-scf-to-openmp` leaves it on the calling thread: forking and
    joining the threads costs a few microseconds, about what that much work
    takes on one core. A decode step's elementwise loops over one token's
    vectors are such loops. Loops with dynamic bounds or calls stay
    parallel.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect"];
}

def DistinctResults : Pass<"tfc-distinct-results", "mlir::func::FuncOp"> {
  let summary = "Give every result of a function a value of its own";
  let description = [{
    A function may return one value twice (`return %y, %y`), and CSE makes
    two identical computations one (two attentions of the same inputs).
    After bufferization each result is an out-parameter of its own, which
    `buffer-results-to-out-params` cannot fill from one buffer. This pass,
    run just before bufferization, replaces each repeat of a returned value
    by a copy of it (`bufferization.alloc_tensor() copy(%y)`), which
    bufferizes to a buffer of its own.
  }];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect"];
}

def InlineAllocaScopes : Pass<"tfc-inline-alloca-scopes"> {
  let summary = "Inline memref.alloca_scope regions that allocate nothing";
  let description = [{
    `convert-scf-to-openmp` wraps every parallel loop body in a
    `memref.alloca_scope` so that stack allocations are released per
    iteration. When the body allocates nothing on the stack the scope is
    useless, and it gets in the way: `convert-scf-to-cf` would turn an inner
    loop into several blocks inside it, which the scope's single-block region
    does not allow. This pass inlines such scopes into their parent.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
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

def GPUDeviceBuffers : Pass<"tfc-gpu-device-buffers", "mlir::func::FuncOp"> {
  let summary = "Allocate a GPU model's buffers in device memory";
  let description = [{
    Host functions of a GPU model only allocate, free and pass buffers to
    kernels, which can read device memory only: `memref.alloc` becomes
    `gpu.alloc` (served by the runtime's caching device allocator) and is
    freed (`gpu.dealloc`) before every return, and a constant global is
    copied into a device buffer (`gpu.alloc` + `gpu.memcpy`) where it is
    used. Runs after every loop nest became a `gpu.launch`, in place of
    upstream's buffer deallocation, which rejects kernel launches (their
    memory effects are unknown to it).
  }];
  let dependentDialects = [
    "::mlir::gpu::GPUDialect",
    "::mlir::memref::MemRefDialect"
  ];
}

def GPUMergeModules : Pass<"tfc-gpu-merge-modules", "mlir::ModuleOp"> {
  let summary = "Put every kernel of a module into one gpu.module";
  let description = [{
    `gpu-kernel-outlining` creates one `gpu.module` per kernel. Merging them
    into one module (`@tfc_kernels`) gives one PTX file and one cubin per
    model: one `cuModuleLoadData` at load time, and one file for
    `tfc-compile --emit=ptx` and `ptxas`. Launches are redirected; kernel
    names are kept unique.

    Kernels that are the same but for their names (a model's layers repeat
    the same shapes: all-MiniLM-L6-v2's six blocks give six copies of each
    kernel) are kept once, with their shared-memory tiles, and every launch
    goes to the one kept: fewer kernels for ptxas and a smaller cubin.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
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
