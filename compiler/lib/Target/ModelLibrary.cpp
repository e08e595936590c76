//===- ModelLibrary.cpp - Emit a model library ----------------------------===//
//
// LLVM dialect -> LLVM IR -> ABI entry points + manifest -> -O3 for the host
// CPU -> object -> shared library (CPU models: linked with the
// micro-kernels and OpenMP; GPU models: the cubin is already embedded).
//
//===----------------------------------------------------------------------===//

#include "tfc/Target/ModelLibrary.h"
#include "tfc/runtime/abi.h"
#include "tfc/ukernels/symbols.h"

#include "RunEntry.h"
#include "WeightFile.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/Analysis/CGSCCPassManager.h"
#include "llvm/Analysis/LoopAnalysisManager.h"
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/StandardInstrumentations.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"

using namespace mlir;

namespace tfc {

namespace {

std::unique_ptr<llvm::TargetMachine> hostTargetMachine(std::string &error) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getProcessTriple());
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  llvm::SubtargetFeatures features;
  for (const auto &[name, enabled] : llvm::sys::getHostCPUFeatures())
    features.AddFeature(name, enabled);
  llvm::TargetOptions options;
  // Constructors (GPU models load their module in one) go to .init_array,
  // which the dynamic loader runs; .ctors it ignores.
  options.UseInitArray = true;
  return std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      triple, llvm::sys::getHostCPUName(), features.getString(), options,
      llvm::Reloc::PIC_, std::nullopt, llvm::CodeGenOptLevel::Aggressive));
}

llvm::Constant *cString(llvm::Module &mod, llvm::StringRef s) {
  llvm::IRBuilder<> b(mod.getContext());
  auto *init = llvm::ConstantDataArray::getString(mod.getContext(), s);
  auto *gv = new llvm::GlobalVariable(mod, init->getType(), true,
                                      llvm::GlobalValue::PrivateLinkage, init,
                                      ".tfc.str");
  return gv;
}

/// Adds manifests as constant data (tfc_manifest of abi.h).
class ManifestData {
public:
  explicit ManifestData(llvm::Module &mod) : mod(mod), ctx(mod.getContext()) {
    ptr = llvm::PointerType::getUnqual(ctx);
    i32 = llvm::Type::getInt32Ty(ctx);
    descType = llvm::StructType::create(ctx, {ptr, i32, i32, i32, ptr, ptr},
                                        "tfc_tensor_desc");
    manifestType = llvm::StructType::create(
        ctx, {i32, i32, ptr, ptr, i32, i32, ptr, ptr}, "tfc_manifest");
  }

  /// A private constant holding `m`.
  llvm::GlobalVariable *add(const Manifest &m);

private:
  llvm::Module &mod;
  llvm::LLVMContext &ctx;
  llvm::Type *ptr, *i32;
  llvm::StructType *descType, *manifestType;
};

llvm::GlobalVariable *ManifestData::add(const Manifest &m) {
  auto descs = [&](const std::vector<TensorSpec> &specs) -> llvm::Constant * {
    std::vector<llvm::Constant *> elems;
    for (const TensorSpec &s : specs) {
      auto *shapeInit = llvm::ConstantDataArray::get(ctx, s.shape);
      auto *shape = new llvm::GlobalVariable(mod, shapeInit->getType(), true,
                                             llvm::GlobalValue::PrivateLinkage,
                                             shapeInit, ".tfc.shape");
      llvm::Constant *bounds =
          llvm::ConstantPointerNull::get(llvm::PointerType::getUnqual(ctx));
      if (s.bounds) {
        auto *boundsInit = llvm::ConstantDataArray::get(
            ctx, llvm::ArrayRef<int64_t>{s.bounds->first, s.bounds->second});
        bounds = new llvm::GlobalVariable(mod, boundsInit->getType(), true,
                                          llvm::GlobalValue::PrivateLinkage,
                                          boundsInit, ".tfc.bounds");
      }
      elems.push_back(llvm::ConstantStruct::get(
          descType, {cString(mod, s.name), llvm::ConstantInt::get(i32, s.dtype),
                     llvm::ConstantInt::get(i32, s.role),
                     llvm::ConstantInt::get(i32, int32_t(s.shape.size())),
                     shape, bounds}));
    }
    auto *arrType = llvm::ArrayType::get(descType, elems.size());
    return new llvm::GlobalVariable(
        mod, arrType, true, llvm::GlobalValue::PrivateLinkage,
        llvm::ConstantArray::get(arrType, elems), ".tfc.descs");
  };
  auto *init = llvm::ConstantStruct::get(
      manifestType,
      {llvm::ConstantInt::get(i32, TFC_MANIFEST_MAGIC),
       llvm::ConstantInt::get(i32, TFC_ABI_VERSION), cString(mod, m.entry),
       cString(mod, m.target), llvm::ConstantInt::get(i32, m.args.size()),
       llvm::ConstantInt::get(i32, m.results.size()), descs(m.args),
       descs(m.results)});
  return new llvm::GlobalVariable(mod, manifestType, true,
                                  llvm::GlobalValue::PrivateLinkage, init,
                                  ".tfc.manifest");
}

/// tfc_manifest_hash (abi.h) of `m`, over a tfc_manifest built of it.
uint64_t manifestHash(const Manifest &m) {
  auto descs = [](const std::vector<TensorSpec> &specs) {
    std::vector<tfc_tensor_desc> out;
    for (const TensorSpec &s : specs)
      out.push_back({s.name.c_str(), s.dtype, s.role, int32_t(s.shape.size()),
                     s.shape.data(), s.bounds ? &s.bounds->first : nullptr});
    return out;
  };
  std::vector<tfc_tensor_desc> args = descs(m.args), results = descs(m.results);
  tfc_manifest c{TFC_MANIFEST_MAGIC,   TFC_ABI_VERSION,
                 m.entry.c_str(),      m.target.c_str(),
                 int32_t(args.size()), int32_t(results.size()),
                 args.data(),          results.data()};
  return tfc_manifest_hash(&c);
}

/// Adds `tfc_model_manifest()`, returning `manifest`, and
/// `tfc_model_manifest_hash`, the hash of `m` (its contents) that the
/// runtime checks it against; and where the weights lie in the model's own
/// file, `tfc_model_weight_file()`.
void addManifestEntry(llvm::Module &mod, llvm::GlobalVariable *manifest,
                      const Manifest &m) {
  llvm::LLVMContext &ctx = mod.getContext();
  new llvm::GlobalVariable(
      mod, llvm::Type::getInt64Ty(ctx), /*isConstant=*/true,
      llvm::GlobalValue::ExternalLinkage,
      llvm::ConstantInt::get(llvm::Type::getInt64Ty(ctx), manifestHash(m)),
      "tfc_model_manifest_hash");
  auto *fn = llvm::Function::Create(
      llvm::FunctionType::get(llvm::PointerType::getUnqual(ctx), false),
      llvm::Function::ExternalLinkage, "tfc_model_manifest", mod);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  b.CreateRet(manifest);
  if (m.weightFile)
    addWeightFile(mod, *m.weightFile);
  if (m.tensorParallel > 1)
    addTensorParallel(mod, m);
}

/// The run function of a variant other than the last ("tfc.run_b1_s16").
std::string variantRunName(const ModelVariant &v) {
  return "tfc.run_b" + std::to_string(v.batch) + "_s" +
         std::to_string(v.length);
}

/// Adds `int32_t tfc_model_variants(const tfc_model_variant **)` over a
/// table of {batch, length, manifest, run} (abi.h, "Variants"): a manifest
/// per variant, the last (largest) one's `largest` (tfc_model_manifest's),
/// and the run function `runOf` gives for each (null on failure, with
/// `error` set).
bool addVariants(
    llvm::Module &mod, ManifestData &data,
    llvm::ArrayRef<ModelVariant> variants, llvm::GlobalVariable *largest,
    llvm::function_ref<llvm::Function *(const ModelVariant &, bool last)> runOf,
    std::string &error) {
  llvm::LLVMContext &ctx = mod.getContext();
  llvm::Type *ptr = llvm::PointerType::getUnqual(ctx);
  llvm::Type *i32 = llvm::Type::getInt32Ty(ctx);
  llvm::Type *i64 = llvm::Type::getInt64Ty(ctx);
  auto *variantType =
      llvm::StructType::create(ctx, {i64, i64, ptr, ptr}, "tfc_model_variant");
  std::vector<llvm::Constant *> rows;
  for (auto [i, v] : llvm::enumerate(variants)) {
    bool last = i + 1 == variants.size();
    llvm::Constant *manifest = last ? largest : data.add(v.manifest);
    llvm::Function *run = runOf(v, last);
    if (!run)
      return false;
    rows.push_back(llvm::ConstantStruct::get(
        variantType, {llvm::ConstantInt::get(i64, v.batch),
                      llvm::ConstantInt::get(i64, v.length), manifest, run}));
  }
  auto *tableType = llvm::ArrayType::get(variantType, rows.size());
  auto *table = new llvm::GlobalVariable(
      mod, tableType, true, llvm::GlobalValue::PrivateLinkage,
      llvm::ConstantArray::get(tableType, rows), ".tfc.variants");
  auto *fn = llvm::Function::Create(llvm::FunctionType::get(i32, {ptr}, false),
                                    llvm::Function::ExternalLinkage,
                                    "tfc_model_variants", mod);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  b.CreateStore(table, fn->getArg(0));
  b.CreateRet(llvm::ConstantInt::get(i32, rows.size()));
  return true;
}

/// A load-time constructor calling omp_set_num_threads(threads).
void addDefaultThreads(llvm::Module &mod, int threads) {
  llvm::LLVMContext &ctx = mod.getContext();
  llvm::Type *i32 = llvm::Type::getInt32Ty(ctx);
  auto *voidTy = llvm::Type::getVoidTy(ctx);
  llvm::FunctionCallee setThreads = mod.getOrInsertFunction(
      "omp_set_num_threads", llvm::FunctionType::get(voidTy, {i32}, false));
  auto *ctor = llvm::Function::Create(llvm::FunctionType::get(voidTy, false),
                                      llvm::Function::InternalLinkage,
                                      "tfc.set_default_threads", mod);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", ctor));
  b.CreateCall(setThreads, {llvm::ConstantInt::get(i32, threads)});
  b.CreateRetVoid();
  llvm::appendToGlobalCtors(mod, ctor, 65535);
}

/// The ABI entry points that call a micro-kernel function of the same
/// arguments: `tfc_model_weights_changed()`, which the runtime calls after
/// binding weights (it drops what the micro-kernels derived from the old
/// ones), and the packed weights' three (abi.h, "Packed weights").
struct Forwarder {
  const char *exported, *target;
};
constexpr Forwarder kForwarders[] = {
    {"tfc_model_weights_changed", TFC_UK_FORGET_PACKED_WEIGHTS_NAME},
    {"tfc_model_packed_format", TFC_UK_PACKED_FORMAT_NAME},
    {"tfc_model_packed_weights", TFC_UK_PACKED_WEIGHTS_NAME},
    {"tfc_model_adopt_packed_weight", TFC_UK_ADOPT_PACKED_WEIGHT_NAME},
};

void addMicroKernelEntryPoints(llvm::Module &mod) {
  llvm::LLVMContext &ctx = mod.getContext();
  llvm::Type *ptr = llvm::PointerType::getUnqual(ctx);
  llvm::Type *i32 = llvm::Type::getInt32Ty(ctx);
  llvm::FunctionType *types[] = {
      llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), false),
      llvm::FunctionType::get(ptr, false),
      llvm::FunctionType::get(i32, {ptr, i32}, false),
      llvm::FunctionType::get(i32, {ptr}, false),
  };
  static_assert(std::size(kForwarders) == std::size(types));
  for (auto [forwarder, type] : llvm::zip_equal(kForwarders, types)) {
    llvm::FunctionCallee target =
        mod.getOrInsertFunction(forwarder.target, type);
    auto *fn = llvm::Function::Create(type, llvm::Function::ExternalLinkage,
                                      forwarder.exported, mod);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
    llvm::SmallVector<llvm::Value *> args;
    for (llvm::Argument &arg : fn->args())
      args.push_back(&arg);
    llvm::CallInst *call = b.CreateCall(target, args);
    if (type->getReturnType()->isVoidTy())
      b.CreateRetVoid();
    else
      b.CreateRet(call);
  }
}

/// Everything but the ABI symbols and external declarations becomes
/// internal: a model's `main` must never interpose the host program's.
void internalize(llvm::Module &mod) {
  for (llvm::Function &f : mod) {
    if (f.isDeclaration() || f.getName() == "tfc_model_run" ||
        f.getName() == "tfc_model_manifest" ||
        llvm::any_of(kForwarders, [&](const Forwarder &forwarder) {
          return f.getName() == forwarder.exported;
        }))
      continue;
    f.setLinkage(llvm::GlobalValue::InternalLinkage);
  }
}

/// O3 without LLVM's loop unrolling. The hot loops are the micro-kernels
/// (compiled ahead, unrolled by hand); the generated code around them is
/// elementwise glue, already vector code. Fully unrolled, the small static
/// loops of small shapes made basic blocks of tens of thousands of
/// instructions whose scheduling is quadratic: a 2-layer decoder of width
/// 48 took 4.2 s to compile, 0.55 s without; MiniLM (batch 8 x 128) 3.5 s
/// against 2.0 s, run times the same or shorter
/// (docs/performance/reports/2026-12-02-compile-time.md).
void optimize(llvm::Module &mod, llvm::TargetMachine &tm) {
  // The generated loops are vectorised at full width, as the micro-kernels
  // are (-mprefer-vector-width=512): LLVM's tuning of the Intel cores with
  // AVX-512 prefers 256 bits, which halved the lanes of the GELU loops of a
  // bf16 MiniLM (batch 8: 61.3 -> 58.7 ms,
  // docs/performance/reports/2026-12-03-xeon-amx.md). Where the host
  // has no AVX-512 the widest legal vectors are used as before.
  for (llvm::Function &f : mod)
    if (!f.isDeclaration() && !f.hasFnAttribute("prefer-vector-width"))
      f.addFnAttr("prefer-vector-width", "512");
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopUnrolling = false;
  // The standard instrumentation: LLVM's --time-passes, --print-after and
  // the like apply to this pipeline too.
  llvm::PassInstrumentationCallbacks pic;
  llvm::StandardInstrumentations si(mod.getContext(), false);
  si.registerCallbacks(pic, &mam);
  llvm::PassBuilder pb(&tm, tuning, std::nullopt, &pic);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm =
      pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(mod, mam);
}

/// Verifies `mod` (false and `error` when it is invalid) and optimises it.
bool verifyAndOptimize(llvm::Module &mod, llvm::TargetMachine &tm,
                       std::string &error) {
  std::string verifyMessage;
  llvm::raw_string_ostream vos(verifyMessage);
  if (llvm::verifyModule(mod, &vos)) {
    error = "invalid LLVM IR: " + verifyMessage;
    return false;
  }
  optimize(mod, tm);
  return true;
}

/// Flushes `out`: false with `error` naming `path` when the writes failed
/// (a full disk), which the stream would otherwise report as a fatal error.
bool closeChecked(llvm::ToolOutputFile &out, llvm::StringRef path,
                  std::string &error) {
  out.os().flush();
  if (!out.os().has_error())
    return true;
  error = "cannot write " + path.str() + ": " + out.os().error().message();
  out.os().clear_error();
  return false;
}

bool writeObject(llvm::Module &mod, llvm::TargetMachine &tm,
                 llvm::StringRef path, std::string &error) {
  std::error_code ec;
  llvm::ToolOutputFile out(path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    error = "cannot write " + path.str() + ": " + ec.message();
    return false;
  }
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, out.os(), nullptr,
                             llvm::CodeGenFileType::ObjectFile)) {
    error = "the host target cannot emit object files";
    return false;
  }
  pm.run(mod);
  if (!closeChecked(out, path, error))
    return false;
  out.keep();
  return true;
}

bool link(llvm::ArrayRef<std::string> objects, const LibraryOptions &options,
          std::string &error) {
  llvm::ErrorOr<std::string> linker =
      llvm::sys::findProgramByName(options.linker);
  if (!linker) {
    error = "linker '" + options.linker + "' not found";
    return false;
  }
  llvm::SmallString<128> ompDir(llvm::sys::path::parent_path(*linker));
  llvm::sys::path::remove_filename(ompDir);
  llvm::sys::path::append(ompDir, "lib");
  std::string rpath = "-Wl,-rpath," + std::string(ompDir);
  llvm::SmallVector<llvm::StringRef> args = {*linker, "-shared", "-fuse-ld=lld",
                                             "-o", options.outputPath};
  args.append(objects.begin(), objects.end());
  if (options.linkMicroKernels)
    // compiler-rt's builtins: where the CPU has no instruction for an
    // operation (f32 -> bf16 without AVX512-BF16), LLVM calls a builtin
    // (__truncsfbf2) that GCC 12's libgcc lacks; linked in statically.
    args.append({"-fopenmp", options.ukernelArchive, rpath,
                 "-rtlib=compiler-rt", "-Wl,--exclude-libs,ALL"});
  else
    // The mgpu* functions come from the runtime that loads the model; the
    // library needs nothing else but libc (--as-needed drops the C++
    // libraries the driver adds).
    args.append({"-Wl,-z,undefs", "-Wl,--as-needed"});
  // The linker's messages go to a file: its first error becomes this
  // one line (a full disk, a path it cannot write).
  llvm::SmallString<128> log;
  if (llvm::sys::fs::createTemporaryFile("tfc-link", "log", log))
    log.clear();
  llvm::FileRemover removeLog(log);
  std::optional<llvm::StringRef> redirects[] = {
      std::nullopt, std::nullopt,
      log.empty() ? std::optional<llvm::StringRef>() : llvm::StringRef(log)};
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(*linker, args, std::nullopt, redirects, 0,
                                     0, &message);
  if (rc != 0) {
    std::string why = message.empty() ? "exit " + std::to_string(rc) : message;
    if (auto text = llvm::MemoryBuffer::getFile(log)) {
      llvm::SmallVector<llvm::StringRef> lines;
      (*text)->getBuffer().split(lines, '\n', -1, false);
      auto first = llvm::find_if(lines, [](llvm::StringRef l) {
        return l.contains("error") || l.contains("ERROR");
      });
      if (first != lines.end())
        why = first->trim().str();
    }
    error = "linking " + options.outputPath + " failed: " + why;
    return false;
  }
  return true;
}

/// Temporary object files, removed at destruction.
class TemporaryObjects {
public:
  ~TemporaryObjects() {
    for (const std::string &path : paths)
      llvm::sys::fs::remove(path);
  }
  /// A new temporary file; empty (and `error`) when none can be made.
  std::string create(std::string &error) {
    llvm::SmallString<128> path;
    if (std::error_code ec =
            llvm::sys::fs::createTemporaryFile("tfc-model", "o", path)) {
      error = "cannot create a temporary object file: " + ec.message();
      return "";
    }
    paths.push_back(std::string(path));
    return paths.back();
  }
  std::vector<std::string> paths;
};

/// Verifies and optimises `mod` and writes it as `options` asks, linking an
/// object with `extraObjects` into a shared library.
LogicalResult finish(llvm::Module &mod, llvm::TargetMachine &tm,
                     const LibraryOptions &options, std::string &error,
                     llvm::ArrayRef<std::string> extraObjects = {}) {
  if (!verifyAndOptimize(mod, tm, error))
    return failure();

  if (options.kind == LibraryEmitKind::LLVMIR) {
    std::error_code ec;
    llvm::ToolOutputFile out(options.outputPath, ec, llvm::sys::fs::OF_Text);
    if (ec) {
      error = "cannot write " + options.outputPath + ": " + ec.message();
      return failure();
    }
    mod.print(out.os(), nullptr);
    if (!closeChecked(out, options.outputPath, error))
      return failure();
    out.keep();
    return success();
  }
  if (options.kind == LibraryEmitKind::Object)
    return success(writeObject(mod, tm, options.outputPath, error));

  TemporaryObjects temporaries;
  std::string object = temporaries.create(error);
  if (object.empty() || !writeObject(mod, tm, object, error))
    return failure();
  std::vector<std::string> objects = {object};
  objects.insert(objects.end(), extraObjects.begin(), extraObjects.end());
  return success(link(objects, options, error));
}

/// The library of a model built for several shapes, its variants compiled in
/// parallel: each variant's module (splitVariants') is translated to an LLVM
/// module of its own (here: translation reads the shared MLIR context),
/// which a thread optimises and compiles to an object defining its run
/// function; the variants share nothing but the micro-kernels they call. A
/// last module holds the manifests and the ABI entry points, and the linker
/// joins them.
LogicalResult emitVariantsInParallel(llvm::ArrayRef<ModuleOp> modules,
                                     const Manifest &manifest,
                                     const LibraryOptions &options,
                                     std::string &error,
                                     llvm::ArrayRef<ModelVariant> variants) {
  struct Part {
    const ModelVariant *variant;
    std::string run; // its run function
    std::unique_ptr<llvm::LLVMContext> context;
    std::unique_ptr<llvm::Module> module;
    std::string object, error;
  };
  std::vector<Part> parts(variants.size());
  TemporaryObjects temporaries;
  for (auto [i, v] : llvm::enumerate(variants)) {
    Part &part = parts[i];
    part.variant = &variants[i];
    bool last = i + 1 == variants.size();
    part.run = last ? "tfc_model_run" : variantRunName(v);
    part.context = std::make_unique<llvm::LLVMContext>();
    part.module =
        translateModuleToLLVMIR(modules[i], *part.context, "tfc_model");
    if (!part.module) {
      error = "translation to LLVM IR failed";
      return failure();
    }
    part.object = temporaries.create(error);
    if (part.object.empty())
      return failure();
  }

  // (Registers the native target before the threads make theirs.)
  std::unique_ptr<llvm::TargetMachine> tm = hostTargetMachine(error);
  if (!tm)
    return failure();
  // The largest variants take longest: they start first.
  {
    llvm::DefaultThreadPool pool(llvm::hardware_concurrency());
    for (Part &part : llvm::reverse(parts))
      pool.async([&part] {
        std::unique_ptr<llvm::TargetMachine> tm = hostTargetMachine(part.error);
        if (!tm)
          return;
        llvm::Module &mod = *part.module;
        mod.setTargetTriple(tm->getTargetTriple());
        mod.setDataLayout(tm->createDataLayout());
        internalize(mod);
        llvm::Function *run =
            addRunEntry(mod, part.variant->manifest, part.run, part.error);
        if (!run)
          return;
        // Only the library's own objects call it.
        if (part.run != "tfc_model_run")
          run->setVisibility(llvm::GlobalValue::HiddenVisibility);
        if (!verifyAndOptimize(mod, *tm, part.error))
          return;
        writeObject(mod, *tm, part.object, part.error);
        part.module.reset();
      });
    pool.wait();
  }
  std::vector<std::string> objects;
  for (Part &part : parts) {
    if (!part.error.empty()) {
      error = part.error;
      return failure();
    }
    objects.push_back(part.object);
  }

  llvm::LLVMContext llvmContext;
  llvm::Module mod("tfc_model", llvmContext);
  mod.setTargetTriple(tm->getTargetTriple());
  mod.setDataLayout(tm->createDataLayout());
  ManifestData manifests(mod);
  llvm::GlobalVariable *manifestData = manifests.add(manifest);
  addManifestEntry(mod, manifestData, manifest);
  addWeightAlignment(mod, manifest, modules, variants);
  auto *runType = llvm::FunctionType::get(
      llvm::Type::getVoidTy(llvmContext),
      {llvm::PointerType::getUnqual(llvmContext)}, false);
  auto declareRun = [&](const ModelVariant &v, bool last) {
    auto *run =
        llvm::Function::Create(runType, llvm::Function::ExternalLinkage,
                               last ? "tfc_model_run" : variantRunName(v), mod);
    if (!last)
      run->setVisibility(llvm::GlobalValue::HiddenVisibility);
    return run;
  };
  if (!addVariants(mod, manifests, variants, manifestData, declareRun, error))
    return failure();
  if (options.linkMicroKernels)
    addMicroKernelEntryPoints(mod);
  if (options.defaultThreads > 0 && options.linkMicroKernels)
    addDefaultThreads(mod, options.defaultThreads);
  return finish(mod, *tm, options, error, objects);
}

} // namespace

/// Makes `context` able to translate every dialect to LLVM IR.
static void registerTranslations(MLIRContext *context) {
  DialectRegistry registry;
  registerAllToLLVMIRTranslations(registry);
  context->appendDialectRegistry(registry);
}

std::vector<OwningOpRef<ModuleOp>>
splitVariants(ModuleOp module, llvm::ArrayRef<ModelVariant> variants) {
  llvm::SmallVector<llvm::StringRef> entries;
  for (const ModelVariant &v : variants)
    entries.push_back(v.manifest.entry);
  std::vector<OwningOpRef<ModuleOp>> modules;
  for (const ModelVariant &v : variants) {
    // Everything but the other variants' functions.
    OwningOpRef<ModuleOp> own = ModuleOp::create(module.getLoc());
    (*own)->setAttrs(module->getAttrs());
    OpBuilder builder = OpBuilder::atBlockEnd(own->getBody());
    for (Operation &op : *module.getBody()) {
      auto symbol = dyn_cast<SymbolOpInterface>(op);
      if (symbol && symbol.getName() != v.manifest.entry &&
          llvm::is_contained(entries, symbol.getName()))
        continue;
      builder.clone(op);
    }
    modules.push_back(std::move(own));
  }
  return modules;
}

LogicalResult emitVariantLibrary(llvm::ArrayRef<ModuleOp> modules,
                                 const Manifest &manifest,
                                 const LibraryOptions &options,
                                 std::string &error,
                                 llvm::ArrayRef<ModelVariant> variants) {
  registerTranslations(modules.front()->getContext());
  return emitVariantsInParallel(modules, manifest, options, error, variants);
}

LogicalResult emitModelLibrary(ModuleOp module, const Manifest &manifest,
                               const LibraryOptions &options,
                               std::string &error,
                               llvm::ArrayRef<ModelVariant> variants) {
  registerTranslations(module->getContext());
  if (!variants.empty() && options.kind == LibraryEmitKind::SharedLibrary) {
    std::vector<OwningOpRef<ModuleOp>> own = splitVariants(module, variants);
    return emitVariantLibrary(
        llvm::to_vector(llvm::map_range(
            own, [](OwningOpRef<ModuleOp> &m) { return m.get(); })),
        manifest, options, error, variants);
  }

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> mod =
      translateModuleToLLVMIR(module, llvmContext, "tfc_model");
  if (!mod) {
    error = "translation to LLVM IR failed";
    return failure();
  }
  std::unique_ptr<llvm::TargetMachine> tm = hostTargetMachine(error);
  if (!tm)
    return failure();
  mod->setTargetTriple(tm->getTargetTriple());
  mod->setDataLayout(tm->createDataLayout());

  internalize(*mod);
  llvm::Function *run = addRunEntry(*mod, manifest, "tfc_model_run", error);
  if (!run)
    return failure();
  ManifestData manifests(*mod);
  llvm::GlobalVariable *manifestData = manifests.add(manifest);
  addManifestEntry(*mod, manifestData, manifest);
  addWeightAlignment(*mod, manifest, module, variants);
  // One module (LLVM IR or an object): every variant's run function in it.
  auto addRun = [&](const ModelVariant &v, bool last) -> llvm::Function * {
    if (last)
      return run;
    llvm::Function *f = addRunEntry(*mod, v.manifest, variantRunName(v), error);
    if (f)
      f->setLinkage(llvm::GlobalValue::InternalLinkage);
    return f;
  };
  if (!variants.empty() &&
      !addVariants(*mod, manifests, variants, manifestData, addRun, error))
    return failure();
  if (options.linkMicroKernels)
    addMicroKernelEntryPoints(*mod);
  if (options.defaultThreads > 0 && options.linkMicroKernels)
    addDefaultThreads(*mod, options.defaultThreads);
  return finish(*mod, *tm, options, error);
}

} // namespace tfc
