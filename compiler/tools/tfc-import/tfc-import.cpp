//===- tfc-import.cpp - Hugging Face model directory -> TOSA MLIR ---------===//
//
//   tfc-import --hf DIR --batch B --seq-len S [--kv-cache] [--past-len P]
//              [--dtype=f16] [-o out.mlir]
//
// Prints the unfused graph of the model in DIR as MLIR text. Every bad input
// is reported as one line `tfc-import: error: ...` and exit status 1.
//
//===----------------------------------------------------------------------===//

#include "tfc/Importer/HuggingFace.h"

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
                                  cl::value_desc("dir"), cl::Required,
                                  cl::cat(category));
static cl::opt<int64_t> batch("batch", cl::desc("Batch size"), cl::init(1),
                              cl::cat(category));
static cl::opt<int64_t> seqLen("seq-len", cl::desc("Sequence length"),
                               cl::init(128), cl::cat(category));
static cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                       cl::value_desc("file"), cl::init("-"),
                                       cl::cat(category));
static cl::opt<tfc::ImportOutput> outputKind(
    "output", cl::desc("What @main returns"),
    cl::values(clEnumValN(tfc::ImportOutput::SentenceEmbedding, "embedding",
                          "pooled (and normalised) sentence embedding "
                          "[B, hidden] (the default for encoders)"),
               clEnumValN(tfc::ImportOutput::LastHiddenState, "hidden",
                          "last hidden state [B, S, hidden] (the default "
                          "for decoders)")),
    cl::init(tfc::ImportOutput::Default), cl::cat(category));
static cl::opt<bool> tokenTypeIds(
    "token-type-ids",
    cl::desc("Take token_type_ids as a third input (default: all zero)"),
    cl::init(false), cl::cat(category));

static cl::opt<std::string> dtype(
    "dtype",
    cl::desc("Element type the model computes in: f32 (default), f16 or "
             "bf16 (activations and weights in that type, matmuls "
             "accumulating in f32, LayerNorm and activations computed in f32, "
             "as PyTorch runs a half-precision model)"),
    cl::init("f32"), cl::cat(category));

static cl::opt<bool>
    kvCache("kv-cache",
            cl::desc("Decoders: also return every layer's keys and values "
                     "(present.L.key/value) after the hidden state"),
            cl::init(false), cl::cat(category));
static cl::opt<int64_t>
    pastLen("past-len",
            cl::desc("Decoders: take the keys and values of this many earlier "
                     "tokens as inputs (past_key_values.L.key/value; implies "
                     "--kv-cache): attention_mask covers past + new tokens, "
                     "positions start after the past"),
            cl::init(0), cl::cat(category));

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

  if (batch <= 0)
    return fail("--batch: expected a positive integer");
  if (seqLen <= 0)
    return fail("--seq-len: expected a positive integer");
  if (pastLen < 0)
    return fail("--past-len: expected a non-negative integer");

  mlir::DialectRegistry registry;
  registry.insert<mlir::func::FuncDialect, mlir::tosa::TosaDialect>();
  mlir::MLIRContext context(registry);

  tfc::ImportOptions options;
  std::string error;
  FailureOr<tfc::ComputeType> computeType =
      tfc::parseComputeType(dtype, "--dtype", error);
  if (failed(computeType))
    return fail(error);
  options.computeType = *computeType;
  options.batch = batch;
  options.seqLen = seqLen;
  options.output = outputKind;
  options.tokenTypeIds = tokenTypeIds;
  options.kvCache = kvCache || pastLen > 0;
  options.pastLen = pastLen;
  auto module = tfc::importHuggingFace(context, hfDir, options, error);
  if (failed(module))
    return fail(error);

  std::string openError;
  std::unique_ptr<ToolOutputFile> out =
      mlir::openOutputFile(outputFile, &openError);
  if (!out)
    return fail(openError);
  (*module)->print(out->os());
  out->os() << "\n";
  out->keep();
  return 0;
}
