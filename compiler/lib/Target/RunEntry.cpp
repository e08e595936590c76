//===- RunEntry.cpp - A model library's run function ----------------------===//

#include "RunEntry.h"

#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/IR/Module.h"

namespace tfc {

namespace {

/// Makes `run` return at once where a temporary it allocates from the
/// runtime (_mlir_memref_to_llvm_alloc, _mlir_memref_to_llvm_aligned_alloc)
/// comes back null: the runtime, which noted the size that failed, then
/// fails the run with OUT_OF_MEMORY instead of the code writing through a
/// null pointer. (Temporaries allocated by functions `run` calls are not
/// checked; a model's are allocated in its entry.)
void returnOnFailedAllocations(llvm::Function &run) {
  std::vector<llvm::CallInst *> allocations;
  for (llvm::BasicBlock &bb : run)
    for (llvm::Instruction &i : bb)
      if (auto *call = llvm::dyn_cast<llvm::CallInst>(&i))
        if (llvm::Function *f = call->getCalledFunction())
          if (f->getName() == "_mlir_memref_to_llvm_alloc" ||
              f->getName() == "_mlir_memref_to_llvm_aligned_alloc")
            allocations.push_back(call);
  if (allocations.empty())
    return;
  llvm::LLVMContext &ctx = run.getContext();
  auto *failed = llvm::BasicBlock::Create(ctx, "allocation.failed", &run);
  llvm::IRBuilder<>(failed).CreateRetVoid();
  for (llvm::CallInst *call : allocations) {
    llvm::BasicBlock *bb = call->getParent();
    llvm::BasicBlock *rest =
        bb->splitBasicBlock(call->getNextNode(), "allocated");
    bb->getTerminator()->eraseFromParent();
    llvm::IRBuilder<> b(bb);
    b.CreateCondBr(b.CreateIsNull(call), failed, rest,
                   llvm::MDBuilder(ctx).createUnlikelyBranchWeights());
  }
}

} // namespace

/// (RunEntry.h)
llvm::Function *addRunEntry(llvm::Module &mod, const Manifest &manifest,
                            llvm::StringRef name, std::string &error) {
  llvm::Function *entry = mod.getFunction(manifest.entry);
  if (!entry) {
    error = "entry function @" + manifest.entry + " not found after lowering";
    return nullptr;
  }
  llvm::LLVMContext &ctx = mod.getContext();
  llvm::Type *ptr = llvm::PointerType::getUnqual(ctx);
  llvm::Type *i64 = llvm::Type::getInt64Ty(ctx);
  auto *fnType =
      llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr}, false);
  auto *run = llvm::Function::Create(fnType, llvm::Function::ExternalLinkage,
                                     name, mod);
  llvm::BasicBlock *prologue = llvm::BasicBlock::Create(ctx, "entry", run);
  llvm::IRBuilder<> b(prologue);
  std::vector<llvm::Value *> args;
  std::vector<const TensorSpec *> all;
  for (const TensorSpec &s : manifest.args)
    all.push_back(&s);
  for (const TensorSpec &s : manifest.results)
    all.push_back(&s);
  for (auto [i, spec] : llvm::enumerate(all)) {
    llvm::Value *slot = b.CreateConstInBoundsGEP1_64(ptr, run->getArg(0), i);
    llvm::Value *p = b.CreateLoad(ptr, slot);
    args.push_back(p); // allocated
    args.push_back(p); // aligned
    args.push_back(llvm::ConstantInt::get(i64, 0));
    for (int64_t d : spec->shape)
      args.push_back(llvm::ConstantInt::get(i64, d));
    int64_t stride = 1;
    std::vector<int64_t> strides(spec->shape.size());
    for (int64_t d = int64_t(spec->shape.size()) - 1; d >= 0; --d) {
      strides[d] = stride;
      stride *= spec->shape[d];
    }
    for (int64_t s : strides)
      args.push_back(llvm::ConstantInt::get(i64, s));
  }
  if (args.size() != entry->arg_size()) {
    error = "entry function @" + manifest.entry + " takes " +
            std::to_string(entry->arg_size()) +
            " lowered arguments, the manifest implies " +
            std::to_string(args.size());
    run->eraseFromParent();
    return nullptr;
  }
  bool movable = !entry->isDeclaration() && entry->use_empty() &&
                 entry->getReturnType()->isVoidTy() &&
                 llvm::none_of(entry->args(), [](const llvm::Argument &a) {
                   return a.hasNoAliasAttr();
                 });
  if (!movable) {
    b.CreateCall(entry, args);
    b.CreateRetVoid();
    return run;
  }
  for (auto [arg, value] : llvm::zip_equal(entry->args(), args))
    arg.replaceAllUsesWith(value);
  // The prologue's loads go to the top of the entry's first block, which
  // stays the first: its allocas stay static.
  llvm::BasicBlock *body = &entry->getEntryBlock();
  run->splice(run->end(), entry);
  body->splice(body->begin(), prologue);
  prologue->eraseFromParent();
  body->setName("entry");
  run->addFnAttrs(llvm::AttrBuilder(ctx, entry->getAttributes().getFnAttrs()));
  if (entry->hasPersonalityFn())
    run->setPersonalityFn(entry->getPersonalityFn());
  if (llvm::DISubprogram *sp = entry->getSubprogram()) {
    entry->setSubprogram(nullptr);
    run->setSubprogram(sp);
  }
  entry->eraseFromParent();
  returnOnFailedAllocations(*run);
  return run;
}

} // namespace tfc
