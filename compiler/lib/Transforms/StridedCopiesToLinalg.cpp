//===- StridedCopiesToLinalg.cpp - Strided memref.copy as linalg.copy -----===//

#include "tfc/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;

namespace tfc {
#define GEN_PASS_DEF_STRIDEDCOPIESTOLINALG
#include "tfc/Transforms/Passes.h.inc"
} // namespace tfc

namespace tfc {
namespace {

/// Whether memref-to-llvm lowers a copy from/to `type` to a memcpy.
static bool isContiguous(Type type) {
  auto m = cast<MemRefType>(type);
  return m.getLayout().isIdentity() ||
         (m.hasStaticShape() && m.getNumElements() > 0 &&
          memref::isStaticShapeAndContiguousRowMajor(m));
}

struct StridedCopiesToLinalgPass
    : impl::StridedCopiesToLinalgBase<StridedCopiesToLinalgPass> {
  void runOnOperation() override {
    SmallVector<memref::CopyOp> copies;
    getOperation()->walk([&](memref::CopyOp copy) {
      if (!isContiguous(copy.getSource().getType()) ||
          !isContiguous(copy.getTarget().getType()))
        copies.push_back(copy);
    });
    IRRewriter rewriter(&getContext());
    for (memref::CopyOp copy : copies) {
      rewriter.setInsertionPoint(copy);
      rewriter.replaceOpWithNewOp<linalg::CopyOp>(copy, copy.getSource(),
                                                  copy.getTarget());
    }
  }
};

} // namespace
} // namespace tfc
