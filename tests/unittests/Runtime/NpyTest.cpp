//===- NpyTest.cpp - .npy reading and writing -----------------------------===//

#include "tfc/runtime/npy.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace tfc;
using tfc::testing::TempDir;

namespace {

/// A .npy v1.0 image with `dict` as its header.
std::string npyImage(const std::string &dict, const std::string &data,
                     int major = 1) {
  std::string header = dict;
  size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64)
    header += ' ';
  header += '\n';
  std::string image = "\x93NUMPY";
  image += char(major);
  image += char(0);
  for (size_t i = 0; i < prefix - 8; ++i)
    image += char((header.size() >> (8 * i)) & 0xff);
  return image + header + data;
}

bool parses(const std::string &image, std::string &error) {
  NpyArray array;
  return parseNpy(reinterpret_cast<const uint8_t *>(image.data()), image.size(),
                  array, error);
}

class NpyRoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(NpyRoundTrip, EveryShape) {
  DType dtype = GetParam();
  TempDir dir;
  for (const std::vector<int64_t> &shape :
       std::vector<std::vector<int64_t>>{{}, {5}, {2, 3}, {3, 1, 2}, {0, 4}}) {
    size_t nbytes = *tensorBytes(shape, dtypeSize(dtype));
    std::vector<uint8_t> data(nbytes);
    for (size_t i = 0; i < nbytes; ++i)
      data[i] = uint8_t(i * 37 + 11);
    if (dtype == DType::Bool)
      for (uint8_t &byte : data)
        byte &= 1;
    std::string path = dir.path("a.npy");
    std::string error;
    ASSERT_TRUE(writeNpy(path, dtype, shape, data.data(), error)) << error;
    NpyArray array;
    ASSERT_TRUE(readNpy(path, array, error)) << error;
    // bf16 travels as its bits ('<u2').
    EXPECT_EQ(array.dtype, dtype == DType::BF16 ? DType::U16 : dtype);
    EXPECT_EQ(array.shape, shape);
    ASSERT_EQ(array.data.size(), nbytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(array.data.data()) % 64, 0u);
    if (nbytes)
      EXPECT_EQ(std::memcmp(array.data.data(), data.data(), nbytes), 0);
    // numpy aligns the data to 64 bytes; so do we.
    NpyHeader header;
    std::string image = tfc::testing::readFile(path);
    ASSERT_TRUE(parseNpyHeader(reinterpret_cast<const uint8_t *>(image.data()),
                               image.size(), header, error));
    EXPECT_EQ(header.dataOffset % 64, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, NpyRoundTrip,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16,
                                           DType::I64, DType::I32, DType::Bool,
                                           DType::F64, DType::I8, DType::U8,
                                           DType::I16, DType::U16, DType::U32,
                                           DType::U64),
                         [](const ::testing::TestParamInfo<DType> &info) {
                           return std::string(dtypeName(info.param));
                         });

TEST(Npy, ReadsWhatNumpyWrites) {
  // np.save of np.arange(6, dtype='<i4').reshape(2, 3).
  std::string data;
  for (int32_t i = 0; i < 6; ++i)
    data.append(reinterpret_cast<const char *>(&i), 4);
  std::string image = npyImage(
      "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }", data);
  NpyArray array;
  std::string error;
  ASSERT_TRUE(parseNpy(reinterpret_cast<const uint8_t *>(image.data()),
                       image.size(), array, error))
      << error;
  EXPECT_EQ(array.dtype, DType::I32);
  EXPECT_EQ(array.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(reinterpret_cast<const int32_t *>(array.data.data())[5], 5);
}

TEST(Npy, VersionTwoAndOneDimensionalFortran) {
  std::string error;
  EXPECT_TRUE(parses(npyImage("{'descr': '<f4', 'fortran_order': False, "
                              "'shape': (1,), }",
                              std::string(4, '\0'), 2),
                     error))
      << error;
  // A 1-D array is the same in either order.
  EXPECT_TRUE(parses(npyImage("{'descr': '<f4', 'fortran_order': True, "
                              "'shape': (1,), }",
                              std::string(4, '\0')),
                     error))
      << error;
}

struct BadCase {
  const char *name;
  std::string image;
  const char *message;
};

TEST(Npy, RejectsBadFiles) {
  const std::string dict23 =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  const std::string data24(24, '\0');
  std::string badVersion = npyImage(dict23, data24);
  badVersion[6] = 9;
  std::vector<BadCase> cases = {
      {"empty", "", "bad magic"},
      {"not npy", "hello world, this is text", "bad magic"},
      {"magic only", "\x93NUMPY", "bad magic"},
      {"version", badVersion, "unsupported .npy version 9.0"},
      {"truncated header", npyImage(dict23, data24).substr(0, 40),
       "truncated header"},
      {"truncated data", npyImage(dict23, data24.substr(0, 20)),
       "truncated data"},
      {"trailing data", npyImage(dict23, data24 + "xx"),
       "unexpected bytes after the data"},
      {"fortran",
       npyImage("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                data24),
       "fortran_order arrays are not supported"},
      {"big endian",
       npyImage("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }",
                data24),
       "big-endian"},
      {"unknown dtype",
       npyImage("{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }",
                data24),
       "unsupported dtype '<c8'"},
      {"structured",
       npyImage("{'descr': [('a', '<f4')], 'fortran_order': False, "
                "'shape': (6,), }",
                data24),
       "structured arrays are not supported"},
      {"missing shape",
       npyImage("{'descr': '<f4', 'fortran_order': False}", data24),
       "lacks 'shape'"},
      {"unknown key",
       npyImage("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), "
                "'extra': 1}",
                data24),
       "unexpected key 'extra'"},
      {"duplicate key",
       npyImage("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
                "'shape': (2, 3)}",
                data24),
       "duplicate key 'descr'"},
      {"negative dim",
       npyImage("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3)}",
                data24),
       "non-negative integers"},
      {"huge shape",
       npyImage("{'descr': '<f4', 'fortran_order': False, "
                "'shape': (4294967296, 4294967296)}",
                data24),
       "too large"},
      {"dim overflow",
       npyImage("{'descr': '<f4', 'fortran_order': False, "
                "'shape': (99999999999999999999,)}",
                data24),
       "too large"},
      {"not a dict", npyImage("['descr']", data24), "not a dict"},
      {"unterminated", npyImage("{'descr': '<f4", data24),
       "'descr' must be a string"},
  };
  for (const BadCase &c : cases) {
    std::string error;
    EXPECT_FALSE(parses(c.image, error)) << c.name;
    EXPECT_NE(error.find(c.message), std::string::npos)
        << c.name << ": " << error;
  }
}

TEST(Npy, ErrorsNameTheFile) {
  TempDir dir;
  std::string path = dir.write("bad.npy", "not npy at all");
  NpyArray array;
  std::string error;
  EXPECT_FALSE(readNpy(path, array, error));
  EXPECT_EQ(error, path + ": not a .npy file (bad magic)");
  EXPECT_FALSE(readNpy(dir.path("missing.npy"), array, error));
  EXPECT_NE(error.find("missing.npy: cannot open"), std::string::npos) << error;
}

} // namespace
