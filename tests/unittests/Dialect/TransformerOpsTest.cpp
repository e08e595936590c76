//===- TransformerOpsTest.cpp - C++ API of the transformer ops ------------===//
//
// What IR cannot reach: builders with result type inference, the effective
// scale, and decomposeOperation's contract.
//
//===----------------------------------------------------------------------===//

#include "tfc/Dialect/Transformer/IR/Transformer.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace mlir;
using namespace tfc::transformer;

namespace {

class TransformerOpsTest : public ::testing::Test {
protected:
  TransformerOpsTest() : builder(&context) {
    context.loadDialect<TransformerDialect, func::FuncDialect,
                        tosa::TosaDialect>();
    module = ModuleOp::create(builder.getUnknownLoc());
    builder.setInsertionPointToEnd(module->getBody());
  }

  /// A function whose arguments have the given types; returns them.
  SmallVector<Value> makeArgs(ArrayRef<Type> types) {
    auto fn = func::FuncOp::create(builder, builder.getUnknownLoc(), "f",
                                   builder.getFunctionType(types, {}));
    Block *body = fn.addEntryBlock();
    builder.setInsertionPointToStart(body);
    return SmallVector<Value>(body->getArguments());
  }

  RankedTensorType tensor(ArrayRef<int64_t> shape, Type et = {}) {
    return RankedTensorType::get(shape, et ? et : builder.getF32Type());
  }

  MLIRContext context;
  OpBuilder builder;
  OwningOpRef<ModuleOp> module;
};

TEST_F(TransformerOpsTest, AttentionBuilderInfersResultType) {
  SmallVector<Value> args =
      makeArgs({tensor({2, 12, 77, 80}), tensor({2, 4, 200, 80}),
                tensor({2, 4, 200, 48})});
  auto op = AttentionOp::create(builder, builder.getUnknownLoc(), args[0],
                                args[1], args[2], /*mask=*/Value(),
                                /*scale=*/FloatAttr(), /*is_causal=*/false,
                                /*softcap=*/FloatAttr(),
                                /*window=*/IntegerAttr());
  EXPECT_EQ(op.getType(), tensor({2, 12, 77, 48}));
  EXPECT_TRUE(succeeded(verify(op)));
  EXPECT_NEAR(op.getEffectiveScale(), 1.0 / std::sqrt(80.0), 1e-12);
  EXPECT_EQ(op.getEffectiveWindow(), 0);
}

TEST_F(TransformerOpsTest, AttentionExplicitScaleAndCausal) {
  SmallVector<Value> args =
      makeArgs({tensor({1, 2, 5, 16}), tensor({1, 2, 9, 16}),
                tensor({1, 2, 9, 16}), tensor({5, 9})});
  auto op = AttentionOp::create(
      builder, builder.getUnknownLoc(), args[0], args[1], args[2], args[3],
      builder.getF32FloatAttr(0.5f), true, builder.getF32FloatAttr(30.0f),
      builder.getI64IntegerAttr(4));
  EXPECT_TRUE(succeeded(verify(op)));
  EXPECT_TRUE(op.getIsCausal());
  EXPECT_EQ(op.getEffectiveScale(), 0.5);
  EXPECT_EQ(op.getEffectiveSoftcap(), 30.0);
  EXPECT_EQ(op.getEffectiveWindow(), 4);
}

TEST_F(TransformerOpsTest, DecomposeProducesResultOfSameType) {
  SmallVector<Value> args =
      makeArgs({tensor({1, 6, 9, 16}), tensor({1, 2, 5, 16}),
                tensor({1, 2, 5, 4}), tensor({1, 1, 9, 5})});
  auto op = AttentionOp::create(builder, builder.getUnknownLoc(), args[0],
                                args[1], args[2], args[3], FloatAttr(), true,
                                FloatAttr(), builder.getI64IntegerAttr(3));
  auto aggregated = cast<linalg::AggregatedOpInterface>(op.getOperation());
  FailureOr<SmallVector<Value>> values = aggregated.decomposeOperation(builder);
  ASSERT_TRUE(succeeded(values));
  ASSERT_EQ(values->size(), 1u);
  EXPECT_EQ((*values)[0].getType(), op.getType());
}

TEST_F(TransformerOpsTest, DecomposeRefusesDynamicShapes) {
  SmallVector<Value> args =
      makeArgs({tensor({ShapedType::kDynamic, 8}), tensor({8}), tensor({8})});
  auto ln =
      LayerNormOp::create(builder, builder.getUnknownLoc(), args[0], args[1],
                          args[2], builder.getF32FloatAttr(1e-5f));
  auto sm = SoftmaxOp::create(builder, builder.getUnknownLoc(), args[0],
                              builder.getI64IntegerAttr(1));
  auto rms = RmsNormOp::create(builder, builder.getUnknownLoc(), args[0],
                               args[1], builder.getF32FloatAttr(1e-6f));
  EXPECT_TRUE(failed(cast<linalg::AggregatedOpInterface>(ln.getOperation())
                         .decomposeOperation(builder)));
  EXPECT_TRUE(failed(cast<linalg::AggregatedOpInterface>(rms.getOperation())
                         .decomposeOperation(builder)));
  EXPECT_TRUE(failed(cast<linalg::AggregatedOpInterface>(sm.getOperation())
                         .decomposeOperation(builder)));
}

TEST_F(TransformerOpsTest, ParsedModuleVerifies) {
  const char *ir = R"mlir(
    func.func @f(%x: tensor<3x7xbf16>, %g: tensor<7xbf16>, %b: tensor<7xbf16>)
        -> tensor<3x7xbf16> {
      %y = transformer.layer_norm %x, %g, %b {epsilon = 1.0e-6 : f32}
          : tensor<3x7xbf16>, tensor<7xbf16>, tensor<7xbf16> -> tensor<3x7xbf16>
      %z = transformer.softmax %y {dimension = 0 : i64}
          : tensor<3x7xbf16> -> tensor<3x7xbf16>
      %w = transformer.rms_norm %z, %g : tensor<3x7xbf16>, tensor<7xbf16>
          -> tensor<3x7xbf16>
      return %w : tensor<3x7xbf16>
    })mlir";
  OwningOpRef<ModuleOp> parsed = parseSourceString<ModuleOp>(ir, &context);
  ASSERT_TRUE(parsed);
  EXPECT_TRUE(succeeded(verify(*parsed)));
}

} // namespace
