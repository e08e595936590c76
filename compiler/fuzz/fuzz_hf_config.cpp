//===- fuzz_hf_config.cpp - libFuzzer target for the Hugging Face importer
//-===//
//
// Each input is written as config.json into a copy of a small BERT model
// directory (TFC_FUZZ_MODEL_DIR, made by tests/Importer/Inputs/
// make_fake_bert.py) and imported. Any outcome but a crash is fine: bad
// configs must come back as an error message.
//
//===----------------------------------------------------------------------===//

#include "tfc/Importer/HuggingFace.h"

#include "mlir/IR/MLIRContext.h"

#include <cstdio>
#include <cstdlib>
#include <string>

static std::string workDir() {
  static std::string dir = [] {
    const char *model = std::getenv("TFC_FUZZ_MODEL_DIR");
    if (!model) {
      std::fprintf(stderr, "set TFC_FUZZ_MODEL_DIR to a fake BERT directory\n");
      std::abort();
    }
    char tmpl[] = "/tmp/tfc-fuzz-hf-XXXXXX";
    std::string d = mkdtemp(tmpl);
    std::string cmd = "cp -r '" + std::string(model) + "'/. '" + d + "'";
    if (std::system(cmd.c_str()) != 0)
      std::abort();
    return d;
  }();
  return dir;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::MLIRContext context;
  std::string dir = workDir();
  FILE *f = std::fopen((dir + "/config.json").c_str(), "wb");
  if (!f)
    std::abort();
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  tfc::ImportOptions options;
  options.batch = 1;
  options.seqLen = 4;
  std::string error;
  (void)tfc::importHuggingFace(context, dir, options, error);
  return 0;
}
