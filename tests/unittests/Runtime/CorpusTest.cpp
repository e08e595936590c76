//===- CorpusTest.cpp - Fuzzer findings and seeds stay handled ------------===//
//
// Every file under corpus/safetensors and corpus/npy (seeds and inputs that
// once crashed the fuzzers) must parse or be rejected with a message; the
// seeds (seed-*) must parse. What parses passes the fuzz targets' checks
// (runtime/fuzz): each tensor inside the image, its bytes readable; a .npy
// header that parses announces the data there is, and the file parses. The
// images are parsed from heap buffers of their exact size, so that under
// AddressSanitizer (scripts/sanitizers.sh) a read past the end shows.
//
//===----------------------------------------------------------------------===//

#include "tfc/runtime/npy.h"
#include "tfc/runtime/safetensors.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>

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

/// The bytes of `path` in a heap block of their size.
std::unique_ptr<uint8_t[]> readExact(const std::string &path, size_t &size) {
  std::string bytes = tfc::testing::readFile(path);
  size = bytes.size();
  std::unique_ptr<uint8_t[]> image(new uint8_t[size ? size : 1]);
  std::memcpy(image.get(), bytes.data(), size);
  return image;
}

TEST(Corpus, Safetensors) {
  std::vector<std::string> files = corpusFiles("safetensors");
  EXPECT_FALSE(files.empty());
  for (const std::string &path : files) {
    size_t size;
    std::unique_ptr<uint8_t[]> image = readExact(path, size);
    const uint8_t *data = image.get();
    std::vector<tfc::SafetensorsTensor> tensors;
    std::string error;
    bool ok = tfc::parseSafetensors(data, size, tensors, error);
    EXPECT_TRUE(ok || !error.empty()) << path;
    if (isSeed(path))
      EXPECT_TRUE(ok) << path << ": " << error;
    volatile uint8_t sink = 0;
    for (const tfc::SafetensorsTensor &tensor : tensors) {
      bool inside = tensor.data >= data && tensor.nbytes <= size &&
                    tensor.data + tensor.nbytes <= data + size;
      EXPECT_TRUE(inside) << path << ": tensor " << tensor.name;
      if (inside)
        for (size_t i = 0; i < tensor.nbytes; i += 61)
          sink = sink + tensor.data[i];
    }
  }
}

TEST(Corpus, Npy) {
  std::vector<std::string> files = corpusFiles("npy");
  EXPECT_FALSE(files.empty());
  for (const std::string &path : files) {
    size_t size;
    std::unique_ptr<uint8_t[]> image = readExact(path, size);
    tfc::NpyArray array;
    std::string error;
    bool ok = tfc::parseNpy(image.get(), size, array, error);
    EXPECT_TRUE(ok || !error.empty()) << path;
    if (isSeed(path))
      EXPECT_TRUE(ok) << path << ": " << error;
    tfc::NpyHeader header;
    if (tfc::parseNpyHeader(image.get(), size, header, error)) {
      EXPECT_TRUE(header.dataOffset <= size &&
                  header.nbytes == size - header.dataOffset)
          << path;
      EXPECT_TRUE(ok) << path << ": the header parses, the file not: " << error;
    }
  }
}

} // namespace
