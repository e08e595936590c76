//===- CorpusTest.cpp - Fuzzer findings and seeds stay handled ------------===//
//
// Every file under corpus/safetensors and corpus/npy (seeds and inputs that
// once crashed the fuzzers) must parse or be rejected with a message; the
// seeds (seed-*) must parse.
//
//===----------------------------------------------------------------------===//

#include "tfc/runtime/npy.h"
#include "tfc/runtime/safetensors.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace fs = std::filesystem;

namespace {

std::vector<std::string> corpusFiles(const std::string &kind) {
  std::vector<std::string> files;
  fs::path dir = fs::path(TFC_CORPUS_DIR) / kind;
  std::error_code ec;
  for (const auto &entry : fs::directory_iterator(dir, ec))
    if (entry.is_regular_file())
      files.push_back(entry.path().string());
  return files;
}

bool isSeed(const std::string &path) {
  return fs::path(path).filename().string().rfind("seed-", 0) == 0;
}

TEST(Corpus, Safetensors) {
  std::vector<std::string> files = corpusFiles("safetensors");
  EXPECT_FALSE(files.empty());
  for (const std::string &path : files) {
    std::string bytes = tfc::testing::readFile(path);
    std::vector<tfc::SafetensorsTensor> tensors;
    std::string error;
    bool ok =
        tfc::parseSafetensors(reinterpret_cast<const uint8_t *>(bytes.data()),
                              bytes.size(), tensors, error);
    EXPECT_TRUE(ok || !error.empty()) << path;
    if (isSeed(path))
      EXPECT_TRUE(ok) << path << ": " << error;
  }
}

TEST(Corpus, Npy) {
  std::vector<std::string> files = corpusFiles("npy");
  EXPECT_FALSE(files.empty());
  for (const std::string &path : files) {
    std::string bytes = tfc::testing::readFile(path);
    tfc::NpyArray array;
    std::string error;
    bool ok = tfc::parseNpy(reinterpret_cast<const uint8_t *>(bytes.data()),
                            bytes.size(), array, error);
    EXPECT_TRUE(ok || !error.empty()) << path;
    if (isSeed(path))
      EXPECT_TRUE(ok) << path << ": " << error;
  }
}

} // namespace
