//===- Passes.td - tfc transform passes --------------------*- tablegen -*-===//

#ifndef TFC_TRANSFORMS_PASSES_TD
#define TFC_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

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

#endif // TFC_TRANSFORMS_PASSES_TD
