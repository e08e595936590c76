//===- WeightFile.cpp - Where a model's weights lie in its file -----------===//

#include "WeightFile.h"

#include "tfc/runtime/abi.h"

#include "mlir/IR/BuiltinAttributes.h"

#include "llvm/IR/Constants.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/IRBuilder.h"

namespace tfc {

namespace {

llvm::Constant *privateData(llvm::Module &mod, llvm::Constant *init,
                            llvm::StringRef name) {
  return new llvm::GlobalVariable(mod, init->getType(), /*isConstant=*/true,
                                  llvm::GlobalValue::PrivateLinkage, init,
                                  name);
}

/// A private constant string holding `bytes` (NUL-terminated).
llvm::Constant *bytesOf(llvm::Module &mod, llvm::StringRef bytes) {
  return privateData(
      mod, llvm::ConstantDataArray::getString(mod.getContext(), bytes),
      ".tfc.str");
}

/// Adds `const void *name(void)`, exported, returning `data`.
void addGetter(llvm::Module &mod, llvm::StringRef name, llvm::Constant *data) {
  llvm::LLVMContext &ctx = mod.getContext();
  auto *fn = llvm::Function::Create(
      llvm::FunctionType::get(llvm::PointerType::getUnqual(ctx), false),
      llvm::Function::ExternalLinkage, name, mod);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  b.CreateRet(data);
}

} // namespace

void addWeightFile(llvm::Module &mod, const WeightFile &file) {
  llvm::LLVMContext &ctx = mod.getContext();
  llvm::Type *ptr = llvm::PointerType::getUnqual(ctx);
  llvm::Type *i32 = llvm::Type::getInt32Ty(ctx);
  llvm::Type *i64 = llvm::Type::getInt64Ty(ctx);
  auto *rangeType =
      llvm::StructType::create(ctx, {ptr, i64, i64}, "tfc_file_range");
  auto *locationType = llvm::StructType::create(ctx, {rangeType, ptr, i32, i32},
                                                "tfc_weight_location");
  auto *foldedType =
      llvm::StructType::create(ctx, {ptr, rangeType, i64}, "tfc_folded_tensor");
  auto *fileType =
      llvm::StructType::create(ctx, {i32, ptr, i32, ptr}, "tfc_weight_file");
  auto range = [&](llvm::StringRef path, int64_t offset, int64_t nbytes) {
    return llvm::ConstantStruct::get(
        rangeType, {bytesOf(mod, path), llvm::ConstantInt::get(i64, offset),
                    llvm::ConstantInt::get(i64, nbytes)});
  };
  auto table = [&](llvm::StructType *type,
                   llvm::ArrayRef<llvm::Constant *> rows) -> llvm::Constant * {
    if (rows.empty())
      return llvm::ConstantPointerNull::get(llvm::PointerType::getUnqual(ctx));
    auto *arrayType = llvm::ArrayType::get(type, rows.size());
    return privateData(mod, llvm::ConstantArray::get(arrayType, rows),
                       ".tfc.weight_file");
  };
  std::vector<llvm::Constant *> weights, folded;
  for (const WeightLocation &w : file.weights)
    weights.push_back(llvm::ConstantStruct::get(
        locationType, {range(w.file, w.offset, w.nbytes), bytesOf(mod, w.check),
                       llvm::ConstantInt::get(i32, int32_t(w.check.size())),
                       llvm::ConstantInt::get(i32, w.dtype)}));
  for (const FoldedTensor &f : file.folded)
    folded.push_back(llvm::ConstantStruct::get(
        foldedType, {bytesOf(mod, f.name), range(f.file, f.offset, f.nbytes),
                     llvm::ConstantInt::get(i64, f.hash)}));
  llvm::Constant *init = llvm::ConstantStruct::get(
      fileType, {llvm::ConstantInt::get(i32, int32_t(weights.size())),
                 table(locationType, weights),
                 llvm::ConstantInt::get(i32, int32_t(folded.size())),
                 table(foldedType, folded)});
  addGetter(mod, "tfc_model_weight_file",
            privateData(mod, init, ".tfc.weight_file"));
}

void addTensorParallel(llvm::Module &mod, const Manifest &m) {
  llvm::LLVMContext &ctx = mod.getContext();
  llvm::Type *ptr = llvm::PointerType::getUnqual(ctx);
  llvm::Type *i32 = llvm::Type::getInt32Ty(ctx);
  llvm::Type *i64 = llvm::Type::getInt64Ty(ctx);
  auto *splitType =
      llvm::StructType::create(ctx, {i32, i32}, "tfc_tensor_split");
  auto *parallelType = llvm::StructType::create(ctx, {i32, ptr, ptr, ptr},
                                                "tfc_tensor_parallel");
  auto table = [&](const std::vector<TensorSpec> &specs) -> llvm::Constant * {
    if (specs.empty())
      return llvm::ConstantPointerNull::get(llvm::PointerType::getUnqual(ctx));
    std::vector<llvm::Constant *> rows;
    for (const TensorSpec &s : specs)
      rows.push_back(llvm::ConstantStruct::get(
          splitType, {llvm::ConstantInt::get(i32, s.splitAxis),
                      llvm::ConstantInt::get(i32, s.splitGroups)}));
    return privateData(mod,
                       llvm::ConstantArray::get(
                           llvm::ArrayType::get(splitType, rows.size()), rows),
                       ".tfc.tensor_parallel");
  };
  // The arguments' whole lengths along their split axes (arg_whole).
  llvm::Constant *wholes =
      llvm::ConstantPointerNull::get(llvm::PointerType::getUnqual(ctx));
  if (!m.args.empty()) {
    std::vector<llvm::Constant *> rows;
    for (const TensorSpec &s : m.args)
      rows.push_back(llvm::ConstantInt::get(i64, s.splitWhole));
    wholes = privateData(
        mod,
        llvm::ConstantArray::get(llvm::ArrayType::get(i64, rows.size()), rows),
        ".tfc.tensor_parallel");
  }
  llvm::Constant *data = privateData(
      mod,
      llvm::ConstantStruct::get(parallelType,
                                {llvm::ConstantInt::get(i32, m.tensorParallel),
                                 table(m.args), table(m.results), wholes}),
      ".tfc.tensor_parallel");
  addGetter(mod, "tfc_model_tensor_parallel", data);
}

void addWeightAlignment(llvm::Module &mod, const Manifest &m,
                        llvm::ArrayRef<mlir::ModuleOp> modules,
                        llvm::ArrayRef<ModelVariant> variants) {
  // Each function's weights that only the matmul kernel reads, from
  // whichever module holds the function.
  llvm::StringMap<llvm::ArrayRef<int64_t>> packedOnly;
  for (mlir::ModuleOp module : modules)
    if (auto functions =
            module->getAttrOfType<mlir::DictionaryAttr>(kPackedOnlyWeightsAttr))
      for (mlir::NamedAttribute f : functions)
        if (auto args = llvm::dyn_cast<mlir::DenseI64ArrayAttr>(f.getValue()))
          packedOnly[f.getName()] = args.asArrayRef();
  std::vector<const Manifest *> builds;
  for (const ModelVariant &v : variants)
    builds.push_back(&v.manifest);
  if (builds.empty())
    builds.push_back(&m);
  // An argument of the same weight in every build, which each build's
  // function reads only through the kernel.
  auto anyAddress = [&](size_t i) {
    return m.args[i].role == TFC_ROLE_WEIGHT &&
           llvm::all_of(builds, [&](const Manifest *b) {
             auto it = packedOnly.find(b->entry);
             return it != packedOnly.end() && i < b->args.size() &&
                    b->args[i].name == m.args[i].name &&
                    llvm::is_contained(it->second, int64_t(i));
           });
  };
  std::vector<int32_t> alignments;
  bool any = false;
  for (size_t i = 0; i < m.args.size(); ++i) {
    int32_t dtype = m.args[i].dtype;
    int32_t size = dtype == TFC_DTYPE_I64                             ? 8
                   : dtype == TFC_DTYPE_F32 || dtype == TFC_DTYPE_I32 ? 4
                   : dtype == TFC_DTYPE_BOOL                          ? 1
                                                                      : 2;
    bool unaligned = anyAddress(i);
    any |= unaligned;
    alignments.push_back(unaligned ? 1 : size);
  }
  if (!any)
    return;
  addGetter(mod, "tfc_model_weight_alignment",
            privateData(mod,
                        llvm::ConstantDataArray::get(
                            mod.getContext(), llvm::ArrayRef(alignments)),
                        ".tfc.weight_alignment"));
}

} // namespace tfc
