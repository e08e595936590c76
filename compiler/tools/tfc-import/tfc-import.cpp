//===- tfc-import.cpp - Model description -> TOSA MLIR --------------------===//
//
//   tfc-import --hf DIR --batch B --seq-len S [--kv-cache] [--past-len P]
//              [--dtype=f16] [-o out.mlir]
//   tfc-import model.onnx [--batch B] [--seq-len S]
//              [--input-shape NAME=DxD...] [-o out.mlir]
//   tfc-import --onnx-operators
//
// Prints the unfused graph of the model (a Hugging Face directory or an ONNX
// file; an ONNX model's weights as arguments that say where their bytes lie
// in the file) as MLIR text. Every bad input is reported as one line
// `tfc-import: error: ...` and exit status 1.
//
//===----------------------------------------------------------------------===//

#include "tfc/Importer/HuggingFace.h"
#include "tfc/Importer/ImportFlags.h"
#include "tfc/Importer/Onnx.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

static cl::OptionCategory category("tfc-import options");

static cl::opt<std::string> hfDir("hf",
                                  cl::desc("Hugging Face model directory "
                                           "(config.json, model.safetensors)"),
                                  cl::value_desc("dir"), cl::cat(category));
static cl::opt<bool> listOperators(
    "onnx-operators",
    cl::desc("Print the ONNX operators the importer translates, one a line, "
             "and exit"),
    cl::init(false), cl::cat(category));
static cl::opt<std::string> onnxFile(cl::Positional, cl::desc("[<model.onnx>]"),
                                     cl::cat(category));
static tfc::ImportFlags importFlags(category);
static cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                       cl::value_desc("file"), cl::init("-"),
                                       cl::cat(category));

static int print(mlir::ModuleOp module);

static int fail(const Twine &message) {
  errs() << "tfc-import: error: " << message << "\n";
  return 1;
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  cl::ParseCommandLineOptions(
      argc, argv,
      "tfc-import: Hugging Face model directory -> unfused TOSA graph\n");

  mlir::DialectRegistry registry;
  registry.insert<mlir::func::FuncDialect, mlir::tosa::TosaDialect>();
  mlir::MLIRContext context(registry);

  std::string error;
  if (listOperators) {
    for (const std::string &op : tfc::supportedOnnxOperators())
      outs() << op << "\n";
    return 0;
  }
  if (hfDir.empty() == onnxFile.empty())
    return fail("give exactly one of <model.onnx> and --hf DIR");
  mlir::OwningOpRef<mlir::ModuleOp> module;
  if (!onnxFile.empty()) {
    FailureOr<tfc::OnnxImportOptions> options = importFlags.onnxOptions(error);
    if (failed(options))
      return fail(error);
    if (importFlags.batches(error)->size() > 1)
      return fail("--batch: tfc-import writes the graph of one batch size; "
                  "several are for tfc-compile");
    auto imported = tfc::importOnnx(context, onnxFile, *options, error);
    if (failed(imported))
      return fail(error);
    module = std::move(*imported);
    return print(*module);
  }
  FailureOr<tfc::ImportOptions> options = importFlags.options(error);
  if (failed(options))
    return fail(error);
  if (importFlags.seqLens(error)->size() > 1)
    return fail("--seq-len: tfc-import writes the graph of one sequence "
                "length; several are for tfc-compile");
  if (importFlags.batches(error)->size() > 1)
    return fail("--batch: tfc-import writes the graph of one batch size; "
                "several are for tfc-compile");
  auto imported = tfc::importHuggingFace(context, hfDir, *options, error);
  if (failed(imported))
    return fail(error);
  return print(**imported);
}

static int print(mlir::ModuleOp module) {
  std::string openError;
  std::unique_ptr<ToolOutputFile> out =
      mlir::openOutputFile(outputFile, &openError);
  if (!out)
    return fail(openError);
  module->print(out->os());
  out->os() << "\n";
  out->keep();
  return 0;
}
