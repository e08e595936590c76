//===- SafetensorsTest.cpp - Parsing good and bad safetensors files -------===//

#include "tfc/runtime/safetensors.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace tfc;
using tfc::testing::TempDir;

namespace {

/// A safetensors image: the length of `header`, `header`, `data`.
std::string image(const std::string &header, const std::string &data) {
  std::string bytes;
  uint64_t length = header.size();
  for (int i = 0; i < 8; ++i)
    bytes += char((length >> (8 * i)) & 0xff);
  return bytes + header + data;
}

bool parse(const std::string &bytes, std::vector<SafetensorsTensor> &tensors,
           std::string &error) {
  return parseSafetensors(reinterpret_cast<const uint8_t *>(bytes.data()),
                          bytes.size(), tensors, error);
}

TEST(Safetensors, ParsesGoodFile) {
  std::string data(24 + 4, '\0');
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = char(i);
  std::string bytes = image(
      R"({"__metadata__":{"format":"pt", "nested": [1, {"x": null}]},)"
      R"("w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[24,28]},)"
      R"("s":{"dtype":"I64","shape":[0],"data_offsets":[28,28]},)"
      R"("caf\u00e9":{"dtype":"BOOL","shape":[],"data_offsets":[28,29]}}  )",
      data + "\x01");
  std::vector<SafetensorsTensor> tensors;
  std::string error;
  ASSERT_TRUE(parse(bytes, tensors, error)) << error;
  ASSERT_EQ(tensors.size(), 4u);
  EXPECT_EQ(tensors[0].name, "w");
  EXPECT_EQ(tensors[0].dtype, DType::F32);
  EXPECT_EQ(tensors[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(tensors[0].nbytes, 24u);
  size_t dataStart = bytes.size() - data.size() - 1;
  EXPECT_EQ(tensors[0].fileOffset, dataStart);
  EXPECT_EQ(tensors[1].dtype, DType::BF16);
  EXPECT_EQ(tensors[1].data[0], 24);
  EXPECT_EQ(tensors[2].nbytes, 0u);
  EXPECT_EQ(tensors[3].name, "caf\xc3\xa9");
  EXPECT_TRUE(tensors[3].shape.empty());
  EXPECT_EQ(tensors[3].nbytes, 1u);
}

TEST(Safetensors, EveryDType) {
  const char *names[] = {"F64", "F32", "F16",  "BF16",    "I64",
                         "I32", "I16", "I8",   "U64",     "U32",
                         "U16", "U8",  "BOOL", "F8_E4M3", "F8_E5M2"};
  for (const char *name : names) {
    std::string header = std::string(R"({"t":{"dtype":")") + name +
                         R"(","shape":[3],"data_offsets":[0,)";
    std::vector<SafetensorsTensor> tensors;
    std::string error;
    bool found = false;
    for (size_t size : {1, 2, 4, 8}) {
      std::string bytes = image(header + std::to_string(3 * size) + "]}}",
                                std::string(3 * size, '\0'));
      if (parse(bytes, tensors, error)) {
        found = true;
        EXPECT_EQ(dtypeSize(tensors[0].dtype), size) << name;
        EXPECT_STREQ(safetensorsDTypeName(tensors[0].dtype), name);
      }
    }
    EXPECT_TRUE(found) << name;
  }
}

struct BadCase {
  const char *name;
  std::string bytes;
  const char *message;
};

std::string tensor(const std::string &name, const std::string &body) {
  return "\"" + name + "\":" + body;
}

TEST(Safetensors, RejectsBadFiles) {
  const std::string w24 =
      R"({"dtype":"F32","shape":[2,3],"data_offsets":[0,24]})";
  const std::string d24(24, '\0');
  std::string tooLong = image("{}", "");
  tooLong[0] = char(200);
  std::string hugeLength = image("{}", "");
  std::memset(&hugeLength[0], 0xff, 8);
  std::string deep = "{\"__metadata__\":";
  for (int i = 0; i < 100; ++i)
    deep += "[";
  for (int i = 0; i < 100; ++i)
    deep += "]";
  deep += "}";
  std::vector<BadCase> cases = {
      {"empty", "", "file too small"},
      {"short", "\x02\0\0", "file too small"},
      {"length past end", tooLong, "header length 200 exceeds the file size"},
      {"huge length", hugeLength, "exceeds the file size"},
      {"empty header", image("", ""), "too small for a JSON object"},
      {"not json", image("{\"w\":", d24), "invalid JSON header"},
      {"not an object", image("[1,2]", ""), "must be a JSON object"},
      {"trailing garbage", image("{} x", ""), "unexpected data after"},
      {"deep nesting", image(deep, ""), "nesting deeper than 64"},
      {"entry not object", image("{\"w\":[1]}", ""), "expected an object"},
      {"missing dtype",
       image(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", d24),
       "missing \"dtype\""},
      {"missing shape",
       image(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", d24),
       "missing \"shape\""},
      {"missing offsets", image(R"({"w":{"dtype":"F32","shape":[1]}})", d24),
       "missing \"data_offsets\""},
      {"unknown dtype",
       image(R"({"w":{"dtype":"F31","shape":[2,3],"data_offsets":[0,24]}})",
             d24),
       "unknown dtype 'F31'"},
      {"dtype not string",
       image(R"({"w":{"dtype":4,"shape":[2,3],"data_offsets":[0,24]}})", d24),
       "\"dtype\" must be a string"},
      {"size mismatch",
       image(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})",
             d24),
       "needs 24 bytes, data_offsets [0, 20] hold 20"},
      {"offsets past end",
       image(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[8,32]}})",
             d24),
       "exceed the data section (24 bytes)"},
      {"negative offset",
       image(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[-4,20]}})",
             d24),
       "data_offsets[0] is negative"},
      {"reversed offsets",
       image(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", d24),
       "are reversed"},
      {"float offset",
       image(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0.0,24]}})",
             d24),
       "is not an integer"},
      {"three offsets",
       image(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})",
             d24),
       "array of two integers"},
      {"huge offset",
       image(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,)"
             R"(999999999999999999999]}})",
             d24),
       "is too large"},
      {"negative dim",
       image(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", d24),
       "shape[0] is negative"},
      {"shape overflow",
       image(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,16],)"
             R"("data_offsets":[0,0]}})",
             d24),
       "is too large"},
      {"overlap",
       image(
           "{" +
               tensor("a",
                      R"({"dtype":"F32","shape":[3],"data_offsets":[0,12]})") +
               "," +
               tensor("b",
                      R"({"dtype":"F32","shape":[3],"data_offsets":[8,20]})") +
               "}",
           d24),
       "tensors 'a' and 'b' overlap"},
      {"duplicate name",
       image("{" + tensor("w", w24) + "," + tensor("w", w24) + "}", d24),
       "duplicate tensor name 'w'"},
      {"duplicate field",
       image(R"({"w":{"dtype":"F32","dtype":"F32","shape":[2,3],)"
             R"("data_offsets":[0,24]}})",
             d24),
       "duplicate \"dtype\""},
      {"lone surrogate",
       image(
           R"({"\ud800":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})",
           d24),
       "surrogate"},
      {"control char", image("{\"a\nb\":1}", d24), "control character"},
      {"bad escape", image(R"({"a\qb":1})", d24), "invalid escape"},
      {"nul in name",
       image(
           R"({"a\u0000":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})",
           d24),
       "NUL"},
      {"bad literal", image(R"({"__metadata__":nul})", d24), "invalid literal"},
      {"bad number", image(R"({"__metadata__":-})", d24), "invalid number"},
  };
  for (const BadCase &c : cases) {
    std::vector<SafetensorsTensor> tensors;
    std::string error;
    EXPECT_FALSE(parse(c.bytes, tensors, error)) << c.name;
    EXPECT_NE(error.find(c.message), std::string::npos)
        << c.name << ": " << error;
  }
}

TEST(Safetensors, GapsAndEmptyTensorsAreFine) {
  std::string bytes =
      image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},)"
            R"("e":{"dtype":"F32","shape":[0],"data_offsets":[10,10]},)"
            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
            std::string(16, '\0'));
  std::vector<SafetensorsTensor> tensors;
  std::string error;
  EXPECT_TRUE(parse(bytes, tensors, error)) << error;
}

TEST(Safetensors, WriteOpenFind) {
  TempDir dir;
  std::string path = dir.path("w.safetensors");
  float w[6] = {1, 2, 3, 4, 5, 6};
  int64_t ids[2] = {7, -8};
  std::string error;
  ASSERT_TRUE(writeSafetensors(
      path, {{"w", DType::F32, {2, 3}, w}, {"quote\"d", DType::I64, {2}, ids}},
      error))
      << error;
  std::unique_ptr<SafetensorsFile> file = SafetensorsFile::open(path, error);
  ASSERT_TRUE(file) << error;
  EXPECT_EQ(file->path(), path);
  ASSERT_EQ(file->tensors().size(), 2u);
  const SafetensorsTensor *t = file->find("quote\"d");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->dtype, DType::I64);
  EXPECT_EQ(std::memcmp(t->data, ids, sizeof(ids)), 0);
  EXPECT_EQ(file->find("w")->fileOffset % 8, 0u);
  EXPECT_EQ(std::memcmp(file->find("w")->data, w, sizeof(w)), 0);
  EXPECT_EQ(file->find("missing"), nullptr);
}

TEST(Safetensors, ErrorsNameTheFile) {
  TempDir dir;
  std::string path = dir.write("bad.safetensors", image("{\"w\":3}", ""));
  std::string error;
  EXPECT_FALSE(SafetensorsFile::open(path, error));
  EXPECT_EQ(error, path + ": tensor 'w': expected an object, got a number");
  EXPECT_FALSE(SafetensorsFile::open(dir.path("missing.safetensors"), error));
  EXPECT_NE(error.find("missing.safetensors: cannot open"), std::string::npos);
}

} // namespace
