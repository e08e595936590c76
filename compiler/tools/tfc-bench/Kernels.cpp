//===- Kernels.cpp - tfc-bench's kernels, built with MLIR's builders ------===//
//
// Each kernel is one function, `func.func @main`, over its inputs and then
// its weights: a transformer op (attention, softmax, layer_norm, rms_norm),
// or a linear layer of TOSA and linalg ops. The module is built with MLIR's
// builders (the TOSA ops with TosaBuilder), verified, and printed for
// tfc-compile.
//
//===----------------------------------------------------------------------===//

#include "Bench.h"

#include "tfc/Dialect/Transformer/IR/Transformer.h"
#include "tfc/Dialect/Transformer/Utils/TosaBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace tfc::bench {

namespace {

/// The query-key pairs attention computes: query i sees keys
/// j <= i + Skv - Sq when causal (S(S+1)/2 of the S^2 pairs for
/// Sq = Skv = S), every key otherwise; with a window only those with
/// j > i + Skv - Sq - window.
double attentionPairs(const Options &o, int64_t sq, int64_t skv) {
  if (!o.causal && o.window <= 0)
    return double(sq) * skv;
  double pairs = 0;
  for (int64_t i = 0; i < sq; ++i) {
    int64_t end =
        o.causal ? std::clamp<int64_t>(i + skv - sq + 1, 0, skv) : skv;
    // A window wider than every row is none (and may be near INT64_MAX: no
    // overflow here).
    int64_t window = std::min<int64_t>(o.window, sq + skv);
    int64_t begin = o.window > 0
                        ? std::clamp<int64_t>(i + skv - sq - window + 1, 0, skv)
                        : 0;
    pairs += double(std::max<int64_t>(0, end - begin));
  }
  return pairs;
}

/// C = A . W^T for A [M, K] and a weight W [N, K]: W transposed by
/// tosa.transpose, a linalg.matmul into a zero-filled f32 tensor (f32 sums
/// whatever the element type), the product cast back to A's element type.
Value linear(OpBuilder &b, Location loc, Value a, Value w) {
  TosaBuilder tosa(b, loc);
  Value wt = tosa.transpose(w, {1, 0});
  auto aType = cast<RankedTensorType>(a.getType());
  auto wtType = cast<RankedTensorType>(wt.getType());
  auto cType = RankedTensorType::get(
      {aType.getDimSize(0), wtType.getDimSize(1)}, b.getF32Type());
  Value empty =
      tensor::EmptyOp::create(b, loc, cType.getShape(), cType.getElementType());
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
  Value filled =
      linalg::FillOp::create(b, loc, ValueRange{zero}, ValueRange{empty})
          .getResult(0);
  Value c = linalg::MatmulOp::create(b, loc, TypeRange{cType},
                                     ValueRange{a, wt}, ValueRange{filled})
                .getResult(0);
  return tosa.cast(c, aType.getElementType());
}

/// The kernel of `o` on the arguments of @main.
Value kernelBody(OpBuilder &b, Location loc, const Options &o,
                 ValueRange args) {
  if (o.kernel == "attention") {
    FloatAttr softcap = o.softcap > 0
                            ? b.getF32FloatAttr(static_cast<float>(o.softcap))
                            : FloatAttr();
    IntegerAttr window =
        o.window > 0 ? b.getI64IntegerAttr(o.window) : IntegerAttr();
    return transformer::AttentionOp::create(b, loc, args[0], args[1], args[2],
                                            /*mask=*/Value(),
                                            /*scale=*/FloatAttr(), o.causal,
                                            softcap, window);
  }
  if (o.matmul())
    return linear(b, loc, args[0], args[1]);
  if (o.kernel == "softmax")
    return transformer::SoftmaxOp::create(b, loc, args[0],
                                          b.getI64IntegerAttr(1));
  // The norms with their default epsilon.
  if (o.kernel == "rms_norm")
    return transformer::RmsNormOp::create(b, loc, args[0], args[1],
                                          /*epsilon=*/FloatAttr());
  return transformer::LayerNormOp::create(b, loc, args[0], args[1], args[2],
                                          /*epsilon=*/FloatAttr());
}

/// The module of `k`, printed: @main takes k's inputs then its weights
/// (named and marked as weights, so that tfc-compile binds and packs them
/// as a model's) of o.dtype and returns its output.
std::string buildModule(const Options &o, const KernelSpec &k) {
  MLIRContext context(MLIRContext::Threading::DISABLED);
  context.loadDialect<arith::ArithDialect, func::FuncDialect,
                      linalg::LinalgDialect, tensor::TensorDialect,
                      tosa::TosaDialect, transformer::TransformerDialect>();
  OpBuilder b(&context);
  Location loc = b.getUnknownLoc();
  Type element = o.dtype == "f32"   ? b.getF32Type()
                 : o.dtype == "f16" ? b.getF16Type()
                                    : b.getBF16Type();
  auto tensor = [&](const std::vector<int64_t> &shape) -> Type {
    return RankedTensorType::get(shape, element);
  };
  SmallVector<Type> args;
  for (const std::vector<int64_t> &shape : k.inputs)
    args.push_back(tensor(shape));
  for (const std::vector<int64_t> &shape : k.weights)
    args.push_back(tensor(shape));

  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  auto main = func::FuncOp::create(b, loc, "main",
                                   b.getFunctionType(args, {tensor(k.output)}));
  if (!k.weights.empty())
    main.setArgAttrs(
        k.inputs.size(),
        b.getDictionaryAttr(
            {b.getNamedAttr("tfc.name", b.getStringAttr("w")),
             b.getNamedAttr("tfc.role", b.getStringAttr("weight"))}));
  Block *body = main.addEntryBlock();
  b.setInsertionPointToStart(body);
  Value result = kernelBody(b, loc, o, body->getArguments());
  func::ReturnOp::create(b, loc, result);
  if (failed(verify(*module)))
    die("the " + o.kernel + " kernel's MLIR does not verify");

  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  return text;
}

} // namespace

KernelSpec makeKernel(const Options &o, const std::vector<int64_t> &dims) {
  KernelSpec k;
  if (o.kernel == "attention") {
    // B x H x S x D, B x H x Sq x Skv x D (decode: Sq = 1), or
    // B x Hq x Hkv x Sq x Skv x D (grouped-query heads).
    size_t n = dims.size();
    int64_t b = dims[0], h = dims[1], hkv = n == 6 ? dims[2] : h,
            sq = dims[n - 3 + (n == 4)], skv = dims[n - 2], d = dims.back();
    std::vector<int64_t> q = {b, h, sq, d}, kv = {b, hkv, skv, d};
    k.inputs = {q, kv, kv};
    k.output = q;
    k.flops = 4.0 * b * h * d * attentionPairs(o, sq, skv);
  } else if (o.matmul()) {
    // C = A . W^T with f32 sums, rounded to the element type.
    int64_t m = dims[0], kk = dims[1], n = dims[2];
    k.inputs = {{m, kk}};
    k.weights = {{n, kk}};
    k.output = {m, n};
    k.flops = 2.0 * m * n * kk;
  } else {
    // Softmax of X [ROWS, N] along N; the norms' gamma (and beta) [N].
    int64_t rows = dims[0], n = dims[1];
    k.output = {rows, n};
    k.inputs = {k.output};
    if (o.kernel != "softmax")
      k.inputs.push_back({n});
    if (o.kernel == "layer_norm")
      k.inputs.push_back({n});
  }
  k.mlir = buildModule(o, k);
  return k;
}

} // namespace tfc::bench
