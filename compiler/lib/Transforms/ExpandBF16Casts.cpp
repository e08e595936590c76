//===- ExpandBF16Casts.cpp - f32 <-> bf16 casts as integer arithmetic -----===//

#include "tfc/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

using namespace mlir;

namespace tfc {
#define GEN_PASS_DEF_EXPANDBF16CASTS
#include "tfc/Transforms/Passes.h.inc"
} // namespace tfc

namespace tfc {
namespace {

struct ExpandBF16CastsPass : impl::ExpandBF16CastsBase<ExpandBF16CastsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    arith::populateExpandBFloat16Patterns(patterns);
    // Without folding: arith-emulate-unsupported-floats marks the casts it
    // puts around each bf16 op `contract`, and extf(truncf(x)) of two such
    // casts folds to x, which would drop the rounding of a bf16 result that
    // the next op of a fused loop reads (a bias added before a residual
    // add) where a stored one keeps it.
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

} // namespace
} // namespace tfc
