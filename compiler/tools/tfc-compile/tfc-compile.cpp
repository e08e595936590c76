//===- tfc-compile.cpp - Compile a model to a native library --------------===//
//
//   tfc-compile model.mlir -o model.so [--target=cpu|nvptx]
//               [--gpu-arch=sm_90|sm_90a|sm_80] [--no-fusion]
//               [--emit=mlir|llvm|obj|so|ptx] [--dump-ir-after=PASS]
//               [--threads=N] [--entry=NAME]
//   tfc-compile --hf DIR --batch B --seq-len S [--dtype=f16] [--kv-cache]
//               [--past-len P] -o model.so [...]
//
// Parses, fuses (unless --no-fusion), lowers for the host CPU or for NVIDIA
// GPUs (kernels as cubin made by ptxas, host code for the CPU) and links a
// shared library with the manifest that tfc-run reads.
//
//===----------------------------------------------------------------------===//

#include "tfc/Conversion/Passes.h"
#include "tfc/Dialect/Transformer/IR/Transformer.h"
#include "tfc/Dialect/Transformer/Transforms/Passes.h"
#include "tfc/Importer/HuggingFace.h"
#include "tfc/Importer/ImportFlags.h"
#include "tfc/Importer/Onnx.h"
#include "tfc/Pipelines/CPU.h"
#include "tfc/Pipelines/GPU.h"
#include "tfc/Support/InputLimits.h"
#include "tfc/Target/Manifest.h"
#include "tfc/Target/ModelLibrary.h"
#include "tfc/Target/PTX.h"
#include "tfc/Transforms/Passes.h"
#include "tfc/runtime/files.h"

#include "InputChecks.h"
#include "Variants.h"
#include "VerifyFusion.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>

#ifndef TFC_LINKER
#define TFC_LINKER "clang++"
#endif

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory category("tfc-compile options");

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.mlir>"),
                                      cl::cat(category));
static cl::opt<std::string>
    hfDir("hf",
          cl::desc("Import a Hugging Face model directory (config.json + "
                   "model.safetensors) instead of reading MLIR"),
          cl::value_desc("dir"), cl::cat(category));

static tfc::ImportFlags importFlags(category, "With --hf: ");

static cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                       cl::value_desc("path"), cl::Required,
                                       cl::cat(category));
static cl::opt<std::string> target("target",
                                   cl::desc("Target: cpu (the host) or nvptx "
                                            "(NVIDIA GPUs)"),
                                   cl::init("cpu"), cl::cat(category));
static cl::opt<std::string>
    gpuArch("gpu-arch",
            cl::desc("GPU architecture with --target=nvptx: sm_90a (default: "
                     "Hopper, wgmma and TMA kernels), sm_90 (its PTX also "
                     "runs on newer GPUs), sm_80, ..."),
            cl::init("sm_90a"), cl::cat(category));
static cl::opt<bool> allowExternalCalls(
    "allow-external-calls",
    cl::desc("Let an MLIR input declare and call functions it does not "
             "define (C functions of the process that runs the model); "
             "refused by default: a model graph calls none"),
    cl::init(false), cl::cat(category));
static cl::opt<bool> noFusion("no-fusion",
                              cl::desc("Build the unfused graph: decompose "
                                       "every transformer op to primitives"),
                              cl::cat(category));

static cl::opt<tfc::QuantizeWeights> quantizeWeights(
    "quantize-weights",
    cl::desc("With --target=cpu: quantize the matmuls' weights as the "
             "kernels pack them: none (default), int8 (weight-only: a "
             "scale per output column, max|column| / 127, values rounded to "
             "nearest; activations, sums and results stay f32; decoding "
             "streams a quarter of the f32 weights' bytes) or int4 (a scale "
             "per output column and 128 input rows, max|group| / 7: an "
             "eighth)"),
    cl::init(tfc::QuantizeWeights::None), tfc::quantizeWeightsValues(),
    cl::cat(category));

static cl::opt<tfc::QuantizeActivations> quantizeActivations(
    "quantize-activations",
    cl::desc("With --quantize-weights: quantize those matmuls' activations "
             "too: none (default) or int8 (each row in blocks of 128 values, "
             "a scale max|block| / 127 each; the kernels compute exact "
             "integer dot products and scale each block's sums)"),
    cl::init(tfc::QuantizeActivations::None), tfc::quantizeActivationsValues(),
    cl::cat(category));

static cl::opt<bool> gpuLdmatrix(
    "gpu-ldmatrix",
    cl::desc("With --target=nvptx and mma.sync attention (not sm_90a's "
             "wgmma): f16/bf16 attention reads its K and V fragments with "
             "ldmatrix (implied by --gpu-async-copy)"),
    cl::cat(category));

static cl::opt<bool> gpuAsyncCopy(
    "gpu-async-copy",
    cl::desc("With --target=nvptx and mma.sync attention (not sm_90a's "
             "wgmma): f16/bf16 attention copies its K and V tiles to shared "
             "memory with cp.async into two stages, and reads fragments with "
             "ldmatrix (default true; false: tiles staged through "
             "registers)"),
    cl::cat(category));

static cl::opt<bool> gpuWgmma(
    "gpu-wgmma",
    cl::desc("With --target=nvptx --gpu-arch=sm_90a: f16/bf16 attention "
             "computes Q·Kᵀ and P·V, and f16/bf16 matmuls their products, "
             "with Hopper's warpgroup MMA (wgmma) (default true on sm_90a; "
             "false: mma.sync)"),
    cl::cat(category));

static cl::opt<int64_t> gpuWgmmaWarpgroups(
    "gpu-wgmma-warpgroups",
    cl::desc("With --gpu-wgmma: warpgroups per attention block, 1 (64 "
             "query rows) or 2 (default: 128 rows; each K and V tile copied "
             "to shared memory serves both)"),
    cl::init(2), cl::cat(category));

static cl::opt<bool> gpuTma(
    "gpu-tma",
    cl::desc("With --gpu-wgmma: the tiles of attention (K, V) and of "
             "matmuls (A, B) go to shared memory by TMA "
             "(cp.async.bulk.tensor from one thread, mbarriers, 128-byte "
             "swizzle) instead of cp.async; the runtime makes the tensor "
             "maps (default true with --gpu-wgmma)"),
    cl::cat(category));

static cl::opt<bool> gpuTmaProducer(
    "gpu-tma-producer",
    cl::desc("With --gpu-tma --gpu-wgmma-warpgroups=2: attention blocks get "
             "a third warpgroup that issues the TMA copies and hands its "
             "registers to the two computing warpgroups (setmaxnreg; "
             "FlashAttention-3's warp specialisation; as fast as without on "
             "the H200)"),
    cl::cat(category));

static cl::opt<bool> gpuDecodeKernel(
    "gpu-decode-kernel",
    cl::desc("With --target=nvptx: attention with at most 8 query rows per "
             "KV head (decode, grouped-query heads) runs the split-KV "
             "decode kernel (default true; false: the tiled kernels)"),
    cl::init(true), cl::cat(category));

static cl::opt<int64_t> gpuWarpRows(
    "gpu-warp-rows",
    cl::desc("With --target=nvptx and mma.sync attention (not sm_90a's "
             "wgmma): query rows per warp of f16/bf16 attention, 16 (blocks "
             "of 64 rows) or 32 (default: blocks of 128; each K and V "
             "fragment serves two mma.sync)"),
    cl::init(32), cl::cat(category));

static cl::opt<int64_t> gpuDecodeBlocksPerSM(
    "gpu-decode-blocks-per-sm",
    cl::desc("With --target=nvptx: the blocks the decode kernel's chunks of "
             "keys aim at, per SM of an H200 (132 SMs), 1 to 16 (default 4)"),
    cl::init(4), cl::cat(category));

static cl::opt<int64_t> gpuDecodeStages(
    "gpu-decode-stages",
    cl::desc("With --target=nvptx: the decode kernel's cp.async stages of K "
             "and V tiles, 2 to 4 (default 2)"),
    cl::init(2), cl::cat(category));

static cl::opt<bool> gpuDecodeMma(
    "gpu-decode-mma",
    cl::desc("With --target=nvptx: the decode kernel's products on tensor "
             "cores (mma.sync; f16/bf16 with head dimensions that are "
             "multiples of 16; others keep the CUDA cores)"),
    cl::cat(category));

static cl::opt<tfc::GpuBinaryFormat> gpuBinary(
    "gpu-binary",
    cl::desc("With --target=nvptx, what a model library embeds: cubin "
             "(default; made here by ptxas) or ptx (compiled by the CUDA "
             "driver when the model is loaded: runs on GPUs newer than "
             "--gpu-arch, and on the PTX interpreter of the tests)"),
    cl::init(tfc::GpuBinaryFormat::Bin),
    cl::values(clEnumValN(tfc::GpuBinaryFormat::Bin, "cubin", "a cubin"),
               clEnumValN(tfc::GpuBinaryFormat::Isa, "ptx", "PTX")),
    cl::cat(category));

/// The flag of tfc-compile that sets `option` of the NVPTX pipeline.
static std::string gpuFlag(StringRef option) {
  if (option == "chip")
    return "--gpu-arch";
  if (option == "format")
    return "--gpu-binary";
  return ("--gpu-" + option).str();
}

/// The GPU kernels of this build: --gpu-arch's defaults
/// (tfc::applyKernelDefaults, the fastest in the H200 device check), then
/// what the flags say. wgmma decides the others' defaults: without it (the
/// flag false, or another chip) attention gets mma.sync with cp.async
/// stages and 32 rows per warp.
static void gpuKernels(tfc::NVPTXPipelineOptions &k) {
  k.chip = gpuArch.getValue();
  tfc::applyKernelDefaults(k, gpuWgmma.getNumOccurrences()
                                  ? std::optional<bool>(gpuWgmma)
                                  : std::nullopt);
  auto given = [](auto &flag, auto &field) {
    if (flag.getNumOccurrences())
      field = flag.getValue();
  };
  given(gpuLdmatrix, k.ldmatrix);
  given(gpuAsyncCopy, k.asyncCopy);
  given(gpuWgmmaWarpgroups, k.wgmmaWarpgroups);
  given(gpuTma, k.tma);
  given(gpuTmaProducer, k.tmaProducer);
  given(gpuDecodeKernel, k.decodeKernel);
  given(gpuWarpRows, k.warpRows);
  given(gpuDecodeBlocksPerSM, k.decodeBlocksPerSM);
  given(gpuDecodeStages, k.decodeStages);
  given(gpuDecodeMma, k.decodeMma);
}

enum class Emit { MLIR, LLVM, Obj, SO, PTX };
static cl::opt<Emit>
    emit("emit", cl::desc("What to write"), cl::init(Emit::SO),
         cl::values(clEnumValN(Emit::MLIR, "mlir", "the fused graph IR"),
                    clEnumValN(Emit::LLVM, "llvm", "optimised LLVM IR"),
                    clEnumValN(Emit::Obj, "obj", "an object file"),
                    clEnumValN(Emit::SO, "so", "a model library (default)"),
                    clEnumValN(Emit::PTX, "ptx",
                               "the kernels' PTX (--target=nvptx)")),
         cl::cat(category));
static cl::opt<std::string>
    dumpIRAfter("dump-ir-after",
                cl::desc("Print the IR to stderr after every pass with this "
                         "argument name (e.g. transformer-fuse)"),
                cl::value_desc("pass"), cl::cat(category));
static cl::opt<int> threads("model-threads",
                            cl::desc("Default number of threads of the model "
                                     "(0: the OpenMP default)"),
                            cl::init(0), cl::cat(category));
static cl::opt<bool> verifyFusion(
    "verify-fusion",
    cl::desc("Also build the graph unfused, run both builds on the same "
             "random inputs and weights, and fail if they differ"),
    cl::cat(category));
static cl::opt<unsigned>
    verifySeed("verify-seed", cl::desc("Seed of --verify-fusion's inputs"),
               cl::init(1), cl::cat(category));
static cl::opt<std::string> entry("entry",
                                  cl::desc("Function to compile (default: the "
                                           "only public one)"),
                                  cl::cat(category));

static int fail(const llvm::Twine &message) {
  llvm::errs() << "tfc-compile: error: " << message << "\n";
  return 1;
}

/// Counts the transformer ops of `root` (a module, or one function of it).
static std::string fusionSummary(Operation *root) {
  int attention = 0, softmax = 0, layerNorm = 0, rmsNorm = 0;
  root->walk([&](Operation *op) {
    if (isa<tfc::transformer::AttentionOp>(op))
      ++attention;
    else if (isa<tfc::transformer::SoftmaxOp>(op))
      ++softmax;
    else if (isa<tfc::transformer::LayerNormOp>(op))
      ++layerNorm;
    else if (isa<tfc::transformer::RmsNormOp>(op))
      ++rmsNorm;
  });
  return "fused " + std::to_string(attention) + " attention, " +
         std::to_string(softmax) + " softmax, " + std::to_string(layerNorm) +
         " layer_norm, " + std::to_string(rmsNorm) + " rms_norm";
}

/// Every pass argument that ran, in order, and whether --dump-ir-after
/// matched one of them.
static std::vector<std::string> passesRun;
static bool irDumped = false;

static void configure(PassManager &pm) {
  if (failed(applyPassManagerCLOptions(pm)))
    return;
  if (dumpIRAfter.empty())
    return;
  // IR printing needs the passes to run on one thread.
  pm.getContext()->disableMultithreading();
  std::string name = dumpIRAfter;
  pm.enableIRPrinting(
      /*shouldPrintBeforePass=*/[](Pass *, Operation *) { return false; },
      /*shouldPrintAfterPass=*/
      [name](Pass *pass, Operation *) {
        if (!llvm::is_contained(passesRun, pass->getArgument()))
          passesRun.push_back(pass->getArgument().str());
        bool match = pass->getArgument() == name;
        irDumped |= match;
        return match;
      },
      /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false);
}

/// The micro-kernel archive next to this executable: <bin>/../lib.
static std::string ukernelArchive(const char *argv0) {
  std::string exe =
      llvm::sys::fs::getMainExecutable(argv0, (void *)&ukernelArchive);
  llvm::SmallString<256> path(llvm::sys::path::parent_path(exe));
  llvm::sys::path::append(path, "..", "lib", "libtfc_ukernels.a");
  return std::string(path);
}

/// Fuses (or decomposes), lowers and emits `module`; returns the exit code.
/// `builds`: a module of several batch-size or sequence-length builds
/// (importVariants), emitted as one library with a variant per build.
static int compileModule(ModuleOp module, const std::string &inputName,
                         bool fuse, Emit kind, const std::string &outputPath,
                         const char *argv0, bool quiet,
                         const tfc::VariantBuilds *builds = nullptr) {
  MLIRContext *context = module.getContext();
  if (failed(tfc::checkNoRecursion(module)) ||
      failed(tfc::checkMatmulShapes(module)))
    return 1;
  // Graph level: fusion (or decomposition, for the unfused build).
  PassManager graph(context);
  configure(graph);
  tfc::buildGraphPipeline(graph, fuse);
  if (failed(graph.run(module)))
    return fail("graph optimisation of " + inputName + " failed");
  FailureOr<tfc::Manifest> manifest =
      tfc::extractManifest(module, builds ? builds->entry : entry);
  if (failed(manifest))
    return 1;
  // abi.h's order: by batch size, then by length.
  std::vector<tfc::ModelVariant> variants;
  for (int64_t batch : builds ? builds->batches : std::vector<int64_t>())
    for (int64_t length : builds->lengths) {
      FailureOr<tfc::Manifest> m = tfc::extractManifest(
          module, builds->entryOf(manifest->entry, batch, length));
      if (failed(m))
        return 1;
      variants.push_back({batch, length, std::move(*m)});
    }
  if (fuse && !quiet)
    llvm::errs() << "tfc-compile: "
                 << fusionSummary(module.lookupSymbol(manifest->entry))
                 << (builds ? builds->summary() : "") << "\n";

  std::string error;
  if (kind == Emit::MLIR) {
    auto out = openOutputFile(outputPath, &error);
    if (!out)
      return fail(error);
    module.print(out->os());
    out->os().flush();
    if (out->os().has_error()) {
      // Reported here, not by the stream's destructor (a fatal error).
      std::string reason = out->os().error().message();
      out->os().clear_error();
      return fail("cannot write " + outputPath + ": " + reason);
    }
    out->keep();
    return 0;
  }

  bool gpu = target == "nvptx";
  if (gpu)
    manifest->target = "nvptx";
  // The lowering after the graph step, a pass manager each time it is asked
  // for (each variant of a library runs its own).
  auto lowering = [&]() -> std::unique_ptr<PassManager> {
    auto pm = std::make_unique<PassManager>(context);
    configure(*pm);
    if (gpu) {
      tfc::NVPTXPipelineOptions options;
      gpuKernels(options);
      options.fuse = fuse;
      options.format =
          kind == Emit::PTX ? tfc::GpuBinaryFormat::Isa : gpuBinary;
      tfc::buildNVPTXLoweringPipeline(*pm, options);
    } else {
      tfc::CPUPipelineOptions options;
      options.fuse = fuse;
      options.quantizeWeights = quantizeWeights;
      options.quantizeActivations = quantizeActivations;
      tfc::buildCPULoweringPipeline(*pm, options);
    }
    return pm;
  };
  std::string loweringFailed = "lowering " + inputName + " for " +
                               (gpu ? "NVPTX (" + gpuArch + ")" : "the CPU") +
                               " failed";

  tfc::LibraryOptions emitOptions;
  emitOptions.outputPath = outputPath;
  emitOptions.kind = kind == Emit::LLVM  ? tfc::LibraryEmitKind::LLVMIR
                     : kind == Emit::Obj ? tfc::LibraryEmitKind::Object
                                         : tfc::LibraryEmitKind::SharedLibrary;
  emitOptions.linkMicroKernels = !gpu;
  emitOptions.ukernelArchive = ukernelArchive(argv0);
  emitOptions.linker = TFC_LINKER;
  emitOptions.defaultThreads = threads;

  // A library of several variants lowers them in parallel, a module each
  // (--dump-ir-after prints one module: it keeps them together).
  if (!variants.empty() && kind == Emit::SO && dumpIRAfter.empty()) {
    std::vector<OwningOpRef<ModuleOp>> parts =
        tfc::splitVariants(module, variants);
    // A pass manager per variant, built here (a pass's options register
    // as it is made); the dialects the passes make are loaded before the
    // threads start.
    std::vector<std::unique_ptr<PassManager>> managers;
    for (size_t i = 0; i < parts.size(); ++i)
      managers.push_back(lowering());
    DialectRegistry dialects;
    managers.front()->getDependentDialects(dialects);
    context->appendDialectRegistry(dialects);
    for (StringRef name : dialects.getDialectNames())
      context->getOrLoadDialect(name);
    std::vector<char> partFailed(parts.size(), 0);
    {
      llvm::DefaultThreadPool pool(llvm::hardware_concurrency());
      for (size_t i = 0; i < parts.size(); ++i)
        pool.async(
            [&, i] { partFailed[i] = failed(managers[i]->run(*parts[i])); });
      pool.wait();
    }
    if (llvm::is_contained(partFailed, 1))
      return fail(loweringFailed);
    if (failed(tfc::emitVariantLibrary(
            llvm::to_vector(llvm::map_range(
                parts, [](OwningOpRef<ModuleOp> &m) { return m.get(); })),
            *manifest, emitOptions, error, variants)))
      return fail(error);
    return 0;
  }

  std::unique_ptr<PassManager> lower = lowering();
  if (failed(lower->run(module)))
    return fail(loweringFailed);
  if (kind == Emit::PTX) {
    if (failed(tfc::writePTX(module, outputPath, error)))
      return fail(error);
    return 0;
  }

  if (failed(tfc::emitModelLibrary(module, *manifest, emitOptions, error,
                                   variants)))
    return fail(error);
  return 0;
}

/// Why the builds of several batch sizes or lengths that `builds` asks for
/// cannot be made with the other flags; empty where they can (or where it
/// asks for one build).
static std::string checkSeveralBuilds(const tfc::VariantBuilds &builds) {
  if (builds.empty())
    return "";
  // The flag that asks for several builds, as the user wrote it.
  bool lengths = builds.lengths.size() > 1;
  std::string flag = lengths ? "--seq-len" : "--batch";
  std::string sizes = lengths ? "lengths" : "batch sizes";
  if (target != "cpu")
    return flag + ": several " + sizes +
           " build a CPU model; --target=nvptx takes one";
  if (verifyFusion)
    return flag + ": --verify-fusion checks one build; give one " +
           (lengths ? "length" : "batch size");
  if (!entry.empty())
    return "--entry: a model of several " + flag + " " + sizes +
           " has one function per build; drop --entry";
  return "";
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  registerAllPasses();
  tfc::transformer::registerTransformerPasses();
  tfc::registerTFCConversionPasses();
  tfc::registerTFCTransformsPasses();
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  cl::HideUnrelatedOptions(category);
  // libLLVM already owns an option named "threads": accept the documented
  // --threads=N by renaming it before parsing.
  std::vector<std::string> renamed;
  renamed.reserve(argc);
  std::vector<char *> args(argv, argv + argc);
  for (char *&arg : args) {
    llvm::StringRef a(arg);
    if (a.consume_front("--threads") || a.consume_front("-threads")) {
      if (a.empty() || a.starts_with("=")) {
        renamed.push_back(("--model-threads" + a).str());
        arg = renamed.back().data();
      }
    }
  }
  argv = args.data();
  cl::ParseCommandLineOptions(argc, argv,
                              "tfc-compile: compile a model to a native "
                              "library\n");

  if (target != "cpu" && target != "nvptx")
    return fail("unknown --target '" + target + "' (supported: cpu, nvptx)");
  std::string error;
  if (quantizeWeights.getNumOccurrences() && target != "cpu")
    return fail("--quantize-weights needs --target=cpu");
  tfc::CPUPipelineOptions cpu;
  cpu.quantizeWeights = quantizeWeights;
  cpu.quantizeActivations = quantizeActivations;
  if (failed(cpu.verify(error, "--")))
    return fail(error);
  if (target == "nvptx") {
    tfc::NVPTXPipelineOptions k;
    gpuKernels(k);
    if (failed(k.verify(error, gpuFlag)))
      return fail(error);
    if (verifyFusion)
      return fail("--verify-fusion runs both builds on this machine and "
                  "needs --target=cpu");
    if (k.wgmma && ((gpuLdmatrix.getNumOccurrences() && gpuLdmatrix) ||
                    (gpuAsyncCopy.getNumOccurrences() && gpuAsyncCopy)))
      return fail(
          std::string(gpuLdmatrix ? "--gpu-ldmatrix" : "--gpu-async-copy") +
          " chooses how the mma.sync attention kernel reads its "
          "tiles; this build's attention runs on wgmma (sm_90a's "
          "default): add --gpu-wgmma=false");
    if (k.wgmma && gpuWarpRows.getNumOccurrences() && gpuWarpRows != 16)
      return fail("--gpu-warp-rows chooses the mma.sync attention kernel's "
                  "rows per warp; this build's attention runs on wgmma, 16 "
                  "rows per warp (a warpgroup of 4 warps owns 64 rows): add "
                  "--gpu-wgmma=false or drop --gpu-warp-rows");
    if (gpuWgmmaWarpgroups.getNumOccurrences() && !k.wgmma)
      return fail("--gpu-wgmma-warpgroups needs --gpu-wgmma");
  } else if (emit == Emit::PTX) {
    return fail("--emit=ptx needs --target=nvptx");
  } else if (gpuBinary.getNumOccurrences()) {
    return fail("--gpu-binary needs --target=nvptx");
  } else if (gpuLdmatrix) {
    return fail("--gpu-ldmatrix needs --target=nvptx");
  } else if (gpuAsyncCopy) {
    return fail("--gpu-async-copy needs --target=nvptx");
  } else if (gpuWgmma) {
    return fail("--gpu-wgmma needs --target=nvptx");
  } else if (gpuTma) {
    return fail("--gpu-tma needs --target=nvptx");
  } else if (gpuTmaProducer) {
    return fail("--gpu-tma-producer needs --target=nvptx");
  } else if (gpuWarpRows.getNumOccurrences()) {
    return fail("--gpu-warp-rows needs --target=nvptx");
  } else if (gpuDecodeKernel.getNumOccurrences()) {
    return fail("--gpu-decode-kernel needs --target=nvptx");
  } else if (gpuDecodeBlocksPerSM.getNumOccurrences()) {
    return fail("--gpu-decode-blocks-per-sm needs --target=nvptx");
  } else if (gpuDecodeStages.getNumOccurrences()) {
    return fail("--gpu-decode-stages needs --target=nvptx");
  } else if (gpuDecodeMma.getNumOccurrences()) {
    return fail("--gpu-decode-mma needs --target=nvptx");
  }

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registry.insert<tfc::transformer::TransformerDialect>();
  // gpu-module-to-binary translates each gpu.module to LLVM IR.
  registerAllToLLVMIRTranslations(registry);
  tfc::registerKernelCallBufferization(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();

  if (hfDir.empty() == inputFile.empty())
    return fail("give exactly one of <model.mlir>, <model.onnx> and --hf DIR");
  if (std::string why = tfc::checkOutputPath(outputFile, inputFile, hfDir);
      !why.empty())
    return fail(why);
  bool onnx = StringRef(inputFile).ends_with(".onnx");
  if (hfDir.empty() && !onnx)
    if (std::vector<std::string> flags = importFlags.given(); !flags.empty())
      return fail(flags.front() + " needs --hf (it sets up the Hugging Face "
                                  "import; an MLIR graph has its own shapes, "
                                  "types, inputs and results)");
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module;
  std::string inputName = inputFile;
  tfc::VariantBuilds builds;
  if (!hfDir.empty() || onnx) {
    // Each import checks the sizes; the flags parse here.
    FailureOr<std::vector<int64_t>> batches = importFlags.batches(error);
    FailureOr<std::vector<int64_t>> lengths = importFlags.seqLens(error);
    if (failed(batches) || failed(lengths))
      return fail(error);
    builds.batches = *batches;
    builds.lengths = *lengths;
    if (std::string why = checkSeveralBuilds(builds); !why.empty())
      return fail(why);
  }
  if (!hfDir.empty()) {
    inputName = hfDir;
    FailureOr<tfc::ImportOptions> importOptions = importFlags.options(error);
    if (failed(importOptions))
      return fail(error);
    importOptions->quantizeActivations =
        quantizeActivations != tfc::QuantizeActivations::None;
    if (verifyFusion && importOptions->tensorParallel > 1)
      return fail("--verify-fusion runs both builds in this process, and a "
                  "--tensor-parallel=" +
                  std::to_string(importOptions->tensorParallel) +
                  " build runs under mpirun: verify the 1-rank build");
    auto importBuild = [&](int64_t batch, int64_t length) {
      tfc::ImportOptions options = *importOptions;
      options.batch = batch;
      options.seqLen = length;
      return tfc::importHuggingFace(context, hfDir, options, error);
    };
    module = tfc::importVariants(hfDir, builds, importBuild, error);
    if (!module)
      return fail(error);
  } else if (onnx) {
    FailureOr<tfc::OnnxImportOptions> options = importFlags.onnxOptions(error);
    if (failed(options))
      return fail(error);
    if (!builds.empty() && !options->inputShapes.empty())
      return fail(
          std::string(builds.lengths.size() > 1 ? "--seq-len" : "--batch") +
          ": several sizes build from --batch and --seq-len; "
          "--input-shape fixes one shape (give one size, or drop "
          "--input-shape)");
    auto importBuild = [&](int64_t batch, int64_t length) {
      tfc::OnnxImportOptions o = *options;
      o.batch = batch;
      if (o.seqLen)
        o.seqLen = length;
      return tfc::importOnnx(context, inputFile, o, error);
    };
    module = tfc::importVariants(inputFile, builds, importBuild, error);
    if (!module)
      return fail(error);
  } else {
    std::unique_ptr<llvm::MemoryBuffer> input =
        openInputFile(inputFile, &error);
    if (!input)
      return fail(error);
    if (std::string deep = tfc::checkNesting(input->getBuffer(), inputFile);
        !deep.empty())
      return fail(deep);
    sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
    module = parseSourceFile<ModuleOp>(sourceMgr, &context);
    if (!module)
      return 1;
    if (!allowExternalCalls && failed(tfc::checkNoExternalCode(*module)))
      return 1;
    // A split module (tfc-import --tensor-parallel=N): the import checks
    // each rank's part of the inputs against the activations' blocks.
    if (auto ranks =
            (*module)->getAttrOfType<IntegerAttr>("tfc.tensor_parallel")) {
      std::string split =
          inputFile + " is split across " + std::to_string(ranks.getInt()) +
          " ranks (--tensor-parallel=" + std::to_string(ranks.getInt()) + ")";
      if (verifyFusion)
        return fail("--verify-fusion runs both builds in this process, and " +
                    split +
                    ", which run under mpirun: verify the 1-rank "
                    "build");
      if (quantizeActivations != tfc::QuantizeActivations::None)
        return fail("--quantize-activations: " + split +
                    ": quantize it at the import, tfc-compile --hf DIR "
                    "--tensor-parallel=N --quantize-activations=..., which "
                    "checks each rank's part against the blocks");
    }
  }

  OwningOpRef<ModuleOp> original;
  if (verifyFusion)
    original = module->clone();
  if (int rc = compileModule(*module, inputName, !noFusion, emit, outputFile,
                             argv[0], /*quiet=*/false,
                             builds.empty() ? nullptr : &builds))
    return rc;
  if (!dumpIRAfter.empty() && !irDumped)
    return fail("--dump-ir-after=" + dumpIRAfter +
                ": no pass of that name ran; the passes that ran: " +
                llvm::join(passesRun, ", "));
  if (!verifyFusion)
    return 0;

  // Both builds of the graph as given, run on the same random inputs.
  llvm::SmallString<128> dir;
  if (llvm::sys::fs::createUniqueDirectory("tfc-verify", dir))
    return fail("cannot create a temporary directory");
  std::string fusedLib = (dir + "/fused.so").str();
  std::string unfusedLib = (dir + "/unfused.so").str();
  OwningOpRef<ModuleOp> copy = original->clone();
  int rc = compileModule(*copy, inputName, true, Emit::SO, fusedLib, argv[0],
                         /*quiet=*/true);
  if (!rc)
    rc = compileModule(*original, inputName, false, Emit::SO, unfusedLib,
                       argv[0], /*quiet=*/true);
  if (!rc) {
    std::string report;
    bool same = tfc::verifyFusedAgainstUnfused(fusedLib, unfusedLib, verifySeed,
                                               report);
    llvm::errs() << "tfc-compile: " << report << "\n";
    rc = same ? 0 : 1;
  }
  llvm::sys::fs::remove_directories(dir);
  return rc;
}
