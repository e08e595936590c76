//===- ModelTest.cpp - Loading, binding and running models ----------------===//

#include "tfc/runtime/api.h"
#include "tfc/runtime/safetensors.h"

#include "Status.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

using tfc::testing::fixture;
using tfc::testing::TempDir;

namespace {

using tfc::testing::Outcome;
using tfc::testing::outcome;

class AddModel : public ::testing::Test {
protected:
  void SetUp() override {
    tfc_status status = tfc_model_load(fixture("add_model.so").c_str(), &model);
    ASSERT_EQ(status, nullptr) << tfc_status_message(status);
  }
  void TearDown() override { tfc_model_destroy(model); }

  /// Binds y = a + b * w's inputs and output.
  void bindInputsAndOutput(float *a, float *b, float *y) {
    EXPECT_OK(tfc_model_bind_input(model, 0, a));
    EXPECT_OK(tfc_model_bind_input(model, 1, b));
    EXPECT_OK(tfc_model_bind_output(model, 0, y));
  }

  /// w.safetensors with the weight `w` starting `start` bytes into the file.
  std::string writeWeights(TempDir &dir, size_t start, const float *w) {
    std::string header =
        R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})";
    header.append(start - 8 - header.size(), ' ');
    std::string bytes;
    for (int i = 0; i < 8; ++i)
      bytes += char((uint64_t(header.size()) >> (8 * i)) & 0xff);
    bytes += header;
    bytes.append(reinterpret_cast<const char *>(w), 24);
    return dir.write("w" + std::to_string(start) + ".safetensors", bytes);
  }

  tfc_model *model = nullptr;
};

TEST_F(AddModel, Signature) {
  const tfc_manifest *manifest = tfc_model_manifest_of(model);
  ASSERT_NE(manifest, nullptr);
  EXPECT_STREQ(manifest->entry, "add");
  EXPECT_STREQ(manifest->target, "cpu");
  EXPECT_EQ(tfc_model_num_inputs(model), 2);
  EXPECT_EQ(tfc_model_num_weights(model), 1);
  EXPECT_EQ(tfc_model_num_outputs(model), 1);
  EXPECT_STREQ(tfc_model_input(model, 0)->name, "a");
  EXPECT_STREQ(tfc_model_input(model, 1)->name, "b");
  EXPECT_STREQ(tfc_model_weight(model, 0)->name, "w");
  const tfc_tensor_desc *y = tfc_model_output(model, 0);
  EXPECT_STREQ(y->name, "y");
  EXPECT_EQ(y->dtype, TFC_DTYPE_F32);
  EXPECT_EQ(y->rank, 2);
  EXPECT_EQ(y->shape[0], 2);
  EXPECT_EQ(y->shape[1], 3);
  EXPECT_EQ(tfc_tensor_desc_nbytes(y), 24u);
  EXPECT_EQ(tfc_model_input(model, 2), nullptr);
  EXPECT_EQ(tfc_model_input(model, -1), nullptr);
  EXPECT_EQ(tfc_model_output(model, 1), nullptr);
  EXPECT_EQ(tfc_model_find_weight(model, "w"), 0);
  EXPECT_EQ(tfc_model_find_weight(model, "a"), -1);
  EXPECT_STREQ(tfc_dtype_name(TFC_DTYPE_BF16), "bf16");
  EXPECT_EQ(tfc_dtype_size(TFC_DTYPE_I64), 8u);
  EXPECT_STREQ(tfc_dtype_name(99), "?");
}

TEST_F(AddModel, RunsWithAlignedAndUnalignedWeights) {
  TempDir dir;
  const float w[6] = {1, 2, 3, 4, 5, 6};
  alignas(64) float a[6] = {10, 20, 30, 40, 50, 60};
  alignas(64) float b[6] = {1, 1, 1, 2, 2, 2};
  alignas(64) float y[6];
  bindInputsAndOutput(a, b, y);
  // 128 and 136 are float-aligned: used in place in the page-aligned
  // mapping. 130 is not: copied into a 64-byte aligned buffer.
  for (size_t start : {128u, 136u, 130u}) {
    EXPECT_OK(
        tfc_model_bind_weights(model, writeWeights(dir, start, w).c_str()));
    const void *bound = tfc_model_weight_data(model, 0);
    ASSERT_NE(bound, nullptr);
    if (start % 4 == 0)
      EXPECT_EQ(reinterpret_cast<uintptr_t>(bound) % 4096, start);
    else
      EXPECT_EQ(reinterpret_cast<uintptr_t>(bound) % 64, 0u);
    std::memset(y, 0xff, sizeof(y));
    EXPECT_OK(tfc_model_invoke(model));
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(y[i], a[i] + b[i] * w[i]) << i;
  }
}

TEST_F(AddModel, BindsWeightsOfAnotherFloatType) {
  // f16 and bf16 files bind to the f32 weight through a widened copy: y = a
  // + b * w with w exactly the 16-bit values.
  TempDir dir;
  const uint16_t f16[6] = {0x3c00, 0xc000, 0x3555, 0x0001, 0x7bff, 0x8400};
  const float f16Values[6] = {1.0f,     -2.0f,    0.333251953125f,
                              0x1p-24f, 65504.0f, -0x1p-14f};
  const uint16_t bf16[6] = {0x3f80, 0xc000, 0x3eab, 0x0001, 0x7f7f, 0x8080};
  const float bf16Values[6] = {1.0f,      -2.0f,       0.333984375f,
                               0x1p-133f, 0x1.fep127f, -0x1p-126f};
  alignas(64) float a[6] = {0, 1, 2, 3, 4, 5};
  alignas(64) float b[6] = {1, 1, 1, 1, 1, 1};
  alignas(64) float y[6];
  bindInputsAndOutput(a, b, y);
  std::string error;
  for (bool isBf16 : {false, true}) {
    std::string file =
        dir.path(isBf16 ? "bf16.safetensors" : "f16.safetensors");
    ASSERT_TRUE(
        tfc::writeSafetensors(file,
                              {{"w",
                                isBf16 ? tfc::DType::BF16 : tfc::DType::F16,
                                {2, 3},
                                isBf16 ? bf16 : f16}},
                              error))
        << error;
    EXPECT_OK(tfc_model_bind_weights(model, file.c_str()));
    EXPECT_OK(tfc_model_invoke(model));
    const float *want = isBf16 ? bf16Values : f16Values;
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(y[i], a[i] + want[i]) << (isBf16 ? "bf16 " : "f16 ") << i;
  }
}

TEST_F(AddModel, RefusesBadWeights) {
  TempDir dir;
  float w[6] = {};
  std::string error;
  std::string ints = dir.path("i32.safetensors");
  ASSERT_TRUE(
      tfc::writeSafetensors(ints, {{"w", tfc::DType::I32, {2, 3}, w}}, error));
  Outcome o = outcome(tfc_model_bind_weights(model, ints.c_str()));
  EXPECT_EQ(o.code, TFC_MISMATCH);
  EXPECT_NE(o.message.find("tensor 'w'"), std::string::npos) << o.message;
  EXPECT_NE(o.message.find("expects f32 [2, 3], the file has i32 [2, 3]"),
            std::string::npos)
      << o.message;

  std::string shape = dir.path("shape.safetensors");
  ASSERT_TRUE(
      tfc::writeSafetensors(shape, {{"w", tfc::DType::F32, {3, 2}, w}}, error));
  o = outcome(tfc_model_bind_weights(model, shape.c_str()));
  EXPECT_EQ(o.code, TFC_MISMATCH);
  EXPECT_NE(o.message.find("the file has f32 [3, 2]"), std::string::npos)
      << o.message;

  std::string other = dir.path("other.safetensors");
  ASSERT_TRUE(
      tfc::writeSafetensors(other, {{"v", tfc::DType::F32, {2, 3}, w}}, error));
  o = outcome(tfc_model_bind_weights(model, other.c_str()));
  EXPECT_EQ(o.code, TFC_NOT_FOUND);
  EXPECT_NE(o.message.find("missing tensor 'w' (f32 [2, 3])"),
            std::string::npos)
      << o.message;

  o = outcome(tfc_model_bind_weights(model, dir.path("none").c_str()));
  EXPECT_EQ(o.code, TFC_NOT_FOUND);
  o = outcome(tfc_model_bind_weights(
      model, dir.write("junk.safetensors", "junk").c_str()));
  EXPECT_EQ(o.code, TFC_BAD_FORMAT);
  EXPECT_NE(o.message.find("junk.safetensors: file too small"),
            std::string::npos)
      << o.message;
  // Nothing was bound by the failures.
  EXPECT_EQ(tfc_model_weight_data(model, 0), nullptr);
}

TEST_F(AddModel, ChecksBindingsAndRuns) {
  alignas(64) float buffer[32] = {};
  Outcome o = outcome(tfc_model_invoke(model));
  EXPECT_EQ(o.code, TFC_FAILED_PRECONDITION);
  EXPECT_NE(o.message.find("input 0 'a' is not bound"), std::string::npos)
      << o.message;
  o = outcome(tfc_model_bind_input(model, 2, buffer));
  EXPECT_EQ(o.code, TFC_INVALID_ARGUMENT);
  EXPECT_NE(o.message.find("index 2 out of range"), std::string::npos);
  o = outcome(tfc_model_bind_input(model, 0, buffer + 1));
  EXPECT_EQ(o.code, TFC_INVALID_ARGUMENT);
  EXPECT_NE(o.message.find("input 0 'a': buffer is not 64-byte aligned"),
            std::string::npos)
      << o.message;
  EXPECT_OK(tfc_model_bind_input(model, 0, buffer));
  EXPECT_OK(tfc_model_bind_input(model, 1, buffer));
  EXPECT_OK(tfc_model_bind_output(model, 0, buffer + 16));
  o = outcome(tfc_model_invoke(model));
  EXPECT_EQ(o.code, TFC_FAILED_PRECONDITION);
  EXPECT_NE(o.message.find("weight 0 'w' is not bound"), std::string::npos)
      << o.message;
  EXPECT_OK(tfc_model_bind_weight(model, 0, buffer));
  EXPECT_OK(tfc_model_invoke(model));

  const int64_t good[] = {2, 3}, bad[] = {3, 2};
  EXPECT_OK(tfc_model_check_input(model, 1, TFC_DTYPE_F32, 2, good));
  o = outcome(tfc_model_check_input(model, 1, TFC_DTYPE_F32, 2, bad));
  EXPECT_EQ(o.code, TFC_MISMATCH);
  EXPECT_EQ(o.message, "input 1 'b': expected f32 [2, 3], got f32 [3, 2]");
  o = outcome(tfc_model_check_input(model, 0, TFC_DTYPE_I64, 2, good));
  EXPECT_EQ(o.message, "input 0 'a': expected f32 [2, 3], got i64 [2, 3]");
}

TEST_F(AddModel, TimesTheModel) {
  alignas(64) float a[6] = {1, 2, 3, 4, 5, 6};
  alignas(64) float w[6] = {1, 1, 1, 1, 1, 1};
  alignas(64) float y[6] = {};
  double ms[3] = {-1, -1, -1};
  Outcome o = outcome(tfc_model_time(model, 1, 3, ms));
  EXPECT_EQ(o.code, TFC_FAILED_PRECONDITION);
  EXPECT_NE(o.message.find("input 0 'a' is not bound"), std::string::npos)
      << o.message;
  EXPECT_OK(tfc_model_bind_input(model, 0, a));
  EXPECT_OK(tfc_model_bind_input(model, 1, a));
  EXPECT_OK(tfc_model_bind_weight(model, 0, w));
  EXPECT_OK(tfc_model_bind_output(model, 0, y));
  EXPECT_OK(tfc_model_time(model, 1, 3, ms));
  for (double t : ms)
    EXPECT_GE(t, 0.0);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(y[i], 2 * a[i]);
  EXPECT_STREQ(tfc_model_target(model), "cpu");
  o = outcome(tfc_model_time(model, 0, 1, nullptr));
  EXPECT_EQ(o.code, TFC_INVALID_ARGUMENT);
}

TEST(Model, RefusesLibrariesThatAreNotModels) {
  struct Case {
    const char *file;
    tfc_status_code code;
    const char *message;
  } cases[] = {
      {"not_model.so", TFC_BAD_FORMAT,
       "not a tfc model: %s: missing symbol tfc_model_manifest"},
      {"no_run_model.so", TFC_BAD_FORMAT,
       "not a tfc model: %s: missing symbol tfc_model_run"},
      {"bad_magic_model.so", TFC_BAD_FORMAT,
       "not a tfc model: %s: bad manifest magic 0x12345678, expected "
       "0x4d434654"},
      {"bad_version_model.so", TFC_MISMATCH,
       "model %s: ABI version 7, this runtime supports 6"},
      {"bad_dtype_model.so", TFC_BAD_FORMAT,
       "model %s: manifest argument 0 'x': invalid dtype 42"},
      {"bad_target_model.so", TFC_BAD_FORMAT,
       "model %s: unknown target 'tpu' (this runtime runs cpu and nvptx "
       "models)"},
      {"no_target_model.so", TFC_BAD_FORMAT,
       "model %s: manifest has no target"},
  };
  for (const Case &c : cases) {
    std::string path = fixture(c.file);
    tfc_model *model = reinterpret_cast<tfc_model *>(1);
    Outcome o = outcome(tfc_model_load(path.c_str(), &model));
    EXPECT_EQ(model, nullptr);
    EXPECT_EQ(o.code, c.code) << c.file;
    std::string expected = c.message;
    expected.replace(expected.find("%s"), 2, path);
    EXPECT_EQ(o.message, expected);
  }
  TempDir dir;
  std::string text = dir.write("text.so", "not an ELF file");
  tfc_model *model = nullptr;
  Outcome o = outcome(tfc_model_load(text.c_str(), &model));
  EXPECT_EQ(o.code, TFC_BAD_FORMAT);
  EXPECT_EQ(o.message.rfind("cannot load model " + text + ": ", 0), 0u)
      << o.message;
  o = outcome(tfc_model_load(dir.path("missing.so").c_str(), &model));
  EXPECT_EQ(o.code, TFC_NOT_FOUND);
  o = outcome(tfc_model_load(nullptr, &model));
  EXPECT_EQ(o.code, TFC_INVALID_ARGUMENT);
}

TEST(Model, TypesAndArrays) {
  tfc_model *model = nullptr;
  EXPECT_OK(tfc_model_load(fixture("types_model.so").c_str(), &model));
  ASSERT_NE(model, nullptr);
  TempDir dir;
  // bf16 input read from a '<u2' .npy file.
  const int64_t two[] = {2};
  tfc_array *h = nullptr;
  EXPECT_OK(tfc_array_create(TFC_DTYPE_U16, 1, two, &h));
  uint16_t *hs = static_cast<uint16_t *>(tfc_array_data(h));
  hs[0] = 0x3f80; // 1.0
  hs[1] = 0xc000; // -2.0
  std::string hPath = dir.path("h.npy");
  EXPECT_OK(tfc_array_write_npy(h, hPath.c_str()));
  tfc_array_destroy(h);
  EXPECT_OK(tfc_array_read_npy(hPath.c_str(), &h));
  EXPECT_EQ(tfc_array_dtype(h), TFC_DTYPE_U16);
  EXPECT_OK(tfc_model_check_input(model, 1, tfc_array_dtype(h),
                                  tfc_array_rank(h), tfc_array_shape(h)));

  const int64_t four[] = {4}, three[] = {3};
  tfc_array *n = nullptr, *m = nullptr;
  EXPECT_OK(tfc_array_create(TFC_DTYPE_I32, 1, four, &n));
  EXPECT_OK(tfc_array_create(TFC_DTYPE_BOOL, 1, three, &m));
  static_cast<int32_t *>(tfc_array_data(n))[3] = -21;
  static_cast<uint8_t *>(tfc_array_data(m))[1] = 1;
  tfc_array *outs[3] = {};
  for (int i = 0; i < 3; ++i) {
    const tfc_tensor_desc *d = tfc_model_output(model, i);
    EXPECT_OK(tfc_array_create(d->dtype, d->rank, d->shape, &outs[i]));
    EXPECT_OK(tfc_model_bind_output(model, i, tfc_array_data(outs[i])));
  }
  EXPECT_OK(tfc_model_bind_input(model, 0, tfc_array_data(n)));
  EXPECT_OK(tfc_model_bind_input(model, 1, tfc_array_data(h)));
  EXPECT_OK(tfc_model_bind_input(model, 2, tfc_array_data(m)));
  EXPECT_OK(tfc_model_invoke(model));
  EXPECT_EQ(static_cast<int64_t *>(tfc_array_data(outs[0]))[3], -42);
  EXPECT_EQ(static_cast<uint16_t *>(tfc_array_data(outs[1]))[1], 0xc000);
  const uint8_t *nm = static_cast<uint8_t *>(tfc_array_data(outs[2]));
  EXPECT_EQ(nm[0], 1);
  EXPECT_EQ(nm[1], 0);
  // bf16 outputs are written as '<u2'.
  std::string outPath = dir.path("hc.npy");
  EXPECT_OK(tfc_array_write_npy(outs[1], outPath.c_str()));
  tfc_array *back = nullptr;
  EXPECT_OK(tfc_array_read_npy(outPath.c_str(), &back));
  EXPECT_EQ(tfc_array_dtype(back), TFC_DTYPE_U16);
  tfc_array_destroy(back);
  for (tfc_array *a : {n, m, h, outs[0], outs[1], outs[2]})
    tfc_array_destroy(a);
  tfc_model_destroy(model);
}

TEST(Status, Basics) {
  EXPECT_EQ(tfc_status_get_code(nullptr), TFC_OK);
  EXPECT_STREQ(tfc_status_message(nullptr), "");
  tfc_status_free(nullptr);
  EXPECT_STREQ(tfc_status_code_name(TFC_MISMATCH), "MISMATCH");
  tfc_array *array = nullptr;
  Outcome o = outcome(tfc_array_create(77, 0, nullptr, &array));
  EXPECT_EQ(o.code, TFC_INVALID_ARGUMENT);
  o = outcome(tfc_array_read_npy("/nonexistent/x.npy", &array));
  EXPECT_EQ(o.code, TFC_NOT_FOUND);
  EXPECT_EQ(array, nullptr);
}

} // namespace

/// A model that keeps a copy derived from its weights (as compiled models
/// keep packed weight matrices) sees every new binding.
TEST(CachedModel, RebindingWeightsReachesTheModel) {
  tfc_model *model = nullptr;
  ASSERT_EQ(tfc_model_load(fixture("cached_model.so").c_str(), &model),
            nullptr);
  alignas(64) float a[6] = {0, 0, 0, 0, 0, 0};
  alignas(64) float b[6] = {1, 1, 1, 1, 1, 1};
  alignas(64) float w[6] = {1, 2, 3, 4, 5, 6};
  alignas(64) float w2[6] = {7, 8, 9, 10, 11, 12};
  alignas(64) float y[6];
  EXPECT_OK(tfc_model_bind_input(model, 0, a));
  EXPECT_OK(tfc_model_bind_input(model, 1, b));
  EXPECT_OK(tfc_model_bind_output(model, 0, y));
  EXPECT_OK(tfc_model_bind_weight(model, 0, w));
  EXPECT_OK(tfc_model_invoke(model));
  EXPECT_EQ(y[5], 6.0f);
  // Another buffer.
  EXPECT_OK(tfc_model_bind_weight(model, 0, w2));
  EXPECT_OK(tfc_model_invoke(model));
  EXPECT_EQ(y[5], 12.0f);
  // The same buffer with new contents, bound again.
  w2[5] = 42;
  EXPECT_OK(tfc_model_bind_weight(model, 0, w2));
  EXPECT_OK(tfc_model_invoke(model));
  EXPECT_EQ(y[5], 42.0f);
  tfc_model_destroy(model);
}
