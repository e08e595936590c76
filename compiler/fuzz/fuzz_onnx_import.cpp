//===- fuzz_onnx_import.cpp - libFuzzer target for the ONNX importer ------===//
//
// Each input is written as a model.onnx file and imported (batch 1, length
// 4). Any outcome but a crash is fine: a bad file must come back as an
// error message. The seed corpus is compiler/fuzz/corpus-onnx (small models
// of each exporter and operator group).
//
//===----------------------------------------------------------------------===//

#include "tfc/Importer/Onnx.h"

#include "mlir/IR/MLIRContext.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

static const std::string &modelPath() {
  static std::string path = [] {
    char tmpl[] = "/tmp/tfc-fuzz-onnx-XXXXXX";
    const char *dir = mkdtemp(tmpl);
    if (!dir)
      std::abort();
    return std::string(dir) + "/model.onnx";
  }();
  return path;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::MLIRContext context;
  FILE *f = std::fopen(modelPath().c_str(), "wb");
  if (!f)
    std::abort();
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  tfc::OnnxImportOptions options;
  options.batch = 1;
  options.seqLen = 4;
  std::string error;
  (void)tfc::importOnnx(context, modelPath(), options, error);
  return 0;
}
