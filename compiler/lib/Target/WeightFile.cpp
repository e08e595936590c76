//===- WeightFile.cpp - Where a model's weights lie in its file -----------===//

#include "WeightFile.h"

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
  llvm::Constant *data = privateData(mod, init, ".tfc.weight_file");
  auto *fn = llvm::Function::Create(llvm::FunctionType::get(ptr, false),
                                    llvm::Function::ExternalLinkage,
                                    "tfc_model_weight_file", mod);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  b.CreateRet(data);
}

} // namespace tfc
