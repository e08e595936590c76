//===- InlineAllocaScopes.cpp - Drop alloca scopes that allocate nothing --===//

#include "tfc/Transforms/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;

namespace tfc {
#define GEN_PASS_DEF_INLINEALLOCASCOPES
#include "tfc/Transforms/Passes.h.inc"
} // namespace tfc

namespace tfc {
namespace {

struct InlineAllocaScopesPass
    : impl::InlineAllocaScopesBase<InlineAllocaScopesPass> {
  void runOnOperation() override {
    SmallVector<memref::AllocaScopeOp> scopes;
    getOperation()->walk([&](memref::AllocaScopeOp scope) {
      // Allocas directly in this scope (not in a nested one) need it.
      WalkResult r = scope.getBodyRegion().walk([&](memref::AllocaOp alloca) {
        return alloca->getParentOfType<memref::AllocaScopeOp>() == scope
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      });
      if (!r.wasInterrupted())
        scopes.push_back(scope);
    });
    IRRewriter rewriter(&getContext());
    for (memref::AllocaScopeOp scope : scopes) {
      Block *body = &scope.getBodyRegion().front();
      auto ret = cast<memref::AllocaScopeReturnOp>(body->getTerminator());
      SmallVector<Value> results(ret.getResults());
      rewriter.eraseOp(ret);
      rewriter.inlineBlockBefore(body, scope);
      rewriter.replaceOp(scope, results);
    }
  }
};

} // namespace
} // namespace tfc
