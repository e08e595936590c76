//===- fuzz_onnx_import.cpp - libFuzzer target for the ONNX importer ------===//
//
// Each input is written as a model.onnx file and imported (batch 1, length
// 4). Any outcome but a crash is fine: a bad file must come back as an
// error message. Next to it lies weights.bin, kWeightsBinFloats floats 0, 1,
// 2, ..., for external data to name. The seed corpus is
// compiler/fuzz/corpus-onnx (small models of each operator group, exporter
// and error; make_onnx_corpus.py writes most of them).
//
//===----------------------------------------------------------------------===//

#include "tfc/Importer/Onnx.h"

#include "mlir/IR/MLIRContext.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <unistd.h>

static constexpr int kWeightsBinFloats = 1024;
static constexpr int kInputsPerContext = 1000;

static const std::string &modelPath() {
  static std::string path = [] {
    char tmpl[] = "/tmp/tfc-fuzz-onnx-XXXXXX";
    const char *dir = mkdtemp(tmpl);
    if (!dir)
      std::abort();
    FILE *f = std::fopen((std::string(dir) + "/weights.bin").c_str(), "wb");
    if (!f)
      std::abort();
    for (int i = 0; i < kWeightsBinFloats; ++i) {
      float value = float(i);
      std::fwrite(&value, sizeof value, 1, f);
    }
    std::fclose(f);
    return std::string(dir) + "/model.onnx";
  }();
  return path;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // A context keeps every type and attribute made in it: a fresh one every
  // kInputsPerContext inputs keeps long runs under -rss_limit_mb.
  static std::unique_ptr<mlir::MLIRContext> context;
  static int inputs = 0;
  if (inputs++ % kInputsPerContext == 0)
    context = std::make_unique<mlir::MLIRContext>();
  FILE *f = std::fopen(modelPath().c_str(), "wb");
  if (!f)
    std::abort();
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  tfc::OnnxImportOptions options;
  options.batch = 1;
  options.seqLen = 4;
  std::string error;
  (void)tfc::importOnnx(*context, modelPath(), options, error);
  return 0;
}
