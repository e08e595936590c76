//===- InputChecks.cpp - What tfc-compile refuses in an MLIR graph --------===//

#include "InputChecks.h"

#include "tfc/runtime/files.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <string>

using namespace mlir;

namespace tfc {

/// Fails, with an error at the op, when an MLIR input declares a function it
/// does not define (a C function of whatever process loads the model:
/// `func.func private @system(...)`, `llvm.func @system`) or holds LLVM
/// dialect code: compiling MLIR is compiling code, and a model graph
/// calls nothing outside itself. --allow-external-calls lets it through.
LogicalResult checkNoExternalCode(ModuleOp module) {
  WalkResult r = module.walk([](Operation *op) {
    auto fn = dyn_cast<func::FuncOp>(op);
    bool external = fn && fn.isExternal();
    bool llvm = op->getDialect() && op->getDialect()->getNamespace() == "llvm";
    if (!external && !llvm)
      return WalkResult::advance();
    InFlightDiagnostic d = op->emitError();
    if (external)
      d << "function '" << fn.getSymName() << "' is declared but not defined: ";
    else
      d << "'" << op->getName() << "' is LLVM dialect code: ";
    d << "a model graph calls nothing outside itself (compiling MLIR is "
         "compiling code); --allow-external-calls lets it through";
    return WalkResult::interrupt();
  });
  return failure(r.wasInterrupted());
}

/// Fails, with an error at the op, when a tosa.matmul's operands disagree
/// (TOSA's verifier lets them through, and the lowering would fail on
/// linalg.batch_matmul, an op the user never wrote): A [N, H, C] and B
/// [N, C, W] make C [N, H, W].
LogicalResult checkMatmulShapes(ModuleOp module) {
  WalkResult r = module.walk([](tosa::MatMulOp op) {
    auto a = dyn_cast<RankedTensorType>(op.getA().getType());
    auto b = dyn_cast<RankedTensorType>(op.getB().getType());
    auto c = dyn_cast<RankedTensorType>(op.getType());
    if (!a || !b || !c || a.getRank() != 3 || b.getRank() != 3 ||
        c.getRank() != 3)
      return WalkResult::advance();
    auto agree = [](int64_t x, int64_t y) {
      return ShapedType::isDynamic(x) || ShapedType::isDynamic(y) || x == y;
    };
    auto shape = [](RankedTensorType t) {
      std::string s;
      llvm::raw_string_ostream os(s);
      os << "[";
      llvm::interleaveComma(t.getShape(), os, [&](int64_t d) {
        if (ShapedType::isDynamic(d))
          os << "?";
        else
          os << d;
      });
      os << "]";
      return s;
    };
    std::string why;
    if (!agree(a.getDimSize(2), b.getDimSize(1)))
      why = "A's columns (" + std::to_string(a.getDimSize(2)) +
            ") must equal B's rows (" + std::to_string(b.getDimSize(1)) + ")";
    else if (!agree(a.getDimSize(0), b.getDimSize(0)))
      why = "the batches of A (" + std::to_string(a.getDimSize(0)) +
            ") and B (" + std::to_string(b.getDimSize(0)) + ") must agree";
    else if (!agree(c.getDimSize(0), a.getDimSize(0)) ||
             !agree(c.getDimSize(1), a.getDimSize(1)) ||
             !agree(c.getDimSize(2), b.getDimSize(2)))
      why = "the result must be [batch, A's rows, B's columns]";
    if (why.empty())
      return WalkResult::advance();
    op.emitError() << "tosa.matmul of A " << shape(a) << " and B " << shape(b)
                   << " into " << shape(c) << ": " << why;
    return WalkResult::interrupt();
  });
  return failure(r.wasInterrupted());
}

/// Fails, with an error at the call, when a function of `module` calls
/// itself, directly or through others: compiled code has no stack to
/// recurse on for tensors, and a model's graph never recurses.
LogicalResult checkNoRecursion(ModuleOp module) {
  // 0: not visited, 1: on the current path, 2: done.
  llvm::StringMap<int> state;
  std::function<LogicalResult(func::FuncOp)> visit =
      [&](func::FuncOp fn) -> LogicalResult {
    state[fn.getSymName()] = 1;
    WalkResult r = fn.walk([&](func::CallOp call) {
      auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
      if (!callee)
        return WalkResult::advance();
      int &s = state[callee.getSymName()];
      if (s == 1) {
        call.emitError() << "function '" << fn.getSymName() << "' calls '"
                         << callee.getSymName()
                         << "', which is on its own call path: recursion "
                            "cannot be compiled";
        return WalkResult::interrupt();
      }
      if (s == 0 && failed(visit(callee)))
        return WalkResult::interrupt();
      return WalkResult::advance();
    });
    state[fn.getSymName()] = 2;
    return failure(r.wasInterrupted());
  };
  for (auto fn : module.getOps<func::FuncOp>())
    if (state.lookup(fn.getSymName()) == 0 && failed(visit(fn)))
      return failure();
  return success();
}

/// Why -o cannot be written (empty when it can): no name, a directory that
/// does not exist, or a file the compile reads (the MLIR input, or a
/// .json or .safetensors file of the --hf directory): checked before the
/// compile, which writes -o at its end.
std::string checkOutputPath(const std::string &outputFile,
                            const std::string &inputFile,
                            const std::string &hfDir) {
  if (outputFile.empty())
    return "-o needs a file name";
  if (outputFile == "-")
    return "";
  llvm::StringRef parent = llvm::sys::path::parent_path(outputFile);
  if (!parent.empty() && !llvm::sys::fs::is_directory(parent))
    return "-o " + outputFile + ": directory " + parent.str() +
           " does not exist";
  std::vector<tfc::ToolFile> inputs;
  if (!inputFile.empty())
    inputs.push_back({"the input", inputFile});
  for (const std::string &dir : {hfDir, hfDir + "/1_Pooling"}) {
    if (hfDir.empty())
      break;
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end;
         it.increment(ec)) {
      llvm::StringRef name = it->path();
      if (name.ends_with(".json") || name.ends_with(".safetensors"))
        inputs.push_back({"--hf's file", name.str()});
    }
  }
  return tfc::checkOutputs(inputs, {{"-o", outputFile}});
}

} // namespace tfc
