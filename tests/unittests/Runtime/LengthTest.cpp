//===- LengthTest.cpp - Models built for several sequence lengths ---------===//
//
// lengths_model (runtime/tests/fixtures/lengths_model.c) holds variants of
// lengths 2, 4 and 8: ids i64 [2, L], mask f32 [2, 3 + L], scale f32 [2],
// weight w f32 [4]; y f32 [2, L, 4] = ids * w * scale + z, z f32 [2] the
// sums of the mask rows, info i64 [2] = {the variant's length, the nonzero
// ids}, all over the variant's padded rows. The inputs here are small
// integers, so every result is exact and the reference below equals it.
//
//===----------------------------------------------------------------------===//

#include "tfc/runtime/api.h"

#include "GuardedTensor.h"
#include "Status.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

using tfc::testing::expectLoadFails;
using tfc::testing::fixture;
using tfc::testing::GuardedTensor;
using tfc::testing::Outcome;
using tfc::testing::outcome;

namespace {

/// The shortest built length of at least `length`.
int64_t builtFor(int64_t length) {
  return length <= 2 ? 2 : length <= 4 ? 4 : 8;
}

class LengthsModel : public ::testing::Test {
protected:
  void SetUp() override {
    path = fixture("lengths_model.so");
    tfc_status status = tfc_model_load(path.c_str(), &model);
    ASSERT_EQ(status, nullptr) << tfc_status_message(status);
    for (float &v : w)
      v = float(int(rng() % 9) - 4);
    EXPECT_OK(tfc_model_bind_weight(model, 0, w));
  }
  void TearDown() override { tfc_model_destroy(model); }

  /// Buffers of the current shapes, filled with fresh small integers (ids
  /// 1..999, so none is zero), bound.
  struct Run {
    explicit Run(tfc_model *model)
        : ids(tfc_model_input(model, 0)), mask(tfc_model_input(model, 1)),
          scale(tfc_model_input(model, 2)), y(tfc_model_output(model, 0)),
          z(tfc_model_output(model, 1)), info(tfc_model_output(model, 2)) {}
    GuardedTensor ids, mask, scale, y, z, info;
  };

  std::unique_ptr<Run> bindFresh(int64_t length) {
    auto run = std::make_unique<Run>(model);
    for (int64_t i = 0; i < 2 * length; ++i)
      run->ids.as<int64_t>()[i] = 1 + int64_t(rng() % 999);
    for (int64_t i = 0; i < 2 * (3 + length); ++i)
      run->mask.as<float>()[i] = float(int(rng() % 7) - 3);
    for (int b = 0; b < 2; ++b)
      run->scale.as<float>()[b] = float(1 + rng() % 4);
    EXPECT_OK(tfc_model_bind_input(model, 0, run->ids.data()));
    EXPECT_OK(tfc_model_bind_input(model, 1, run->mask.data()));
    EXPECT_OK(tfc_model_bind_input(model, 2, run->scale.data()));
    EXPECT_OK(tfc_model_bind_output(model, 0, run->y.data()));
    EXPECT_OK(tfc_model_bind_output(model, 1, run->z.data()));
    EXPECT_OK(tfc_model_bind_output(model, 2, run->info.data()));
    return run;
  }

  /// Compares the outputs with the model computed here over the caller's
  /// `length` tokens: padding with zeros changes neither the mask sums nor
  /// the count of nonzero ids. Rows of y whose id is 0 are not written.
  void expectOutputs(Run &run, int64_t length) {
    SCOPED_TRACE("length " + std::to_string(length));
    const int64_t *ids = run.ids.as<int64_t>();
    const float *mask = run.mask.as<float>();
    const float *scale = run.scale.as<float>();
    int64_t nonzero = 0;
    for (int64_t b = 0; b < 2; ++b) {
      float sum = 0;
      for (int64_t c = 0; c < 3 + length; ++c)
        sum += mask[b * (3 + length) + c];
      EXPECT_EQ(run.z.as<float>()[b], sum) << "z[" << b << "]";
      for (int64_t t = 0; t < length; ++t) {
        int64_t id = ids[b * length + t];
        nonzero += id != 0;
        for (int64_t j = 0; j < 4; ++j) {
          const float *got = run.y.as<float>() + (b * length + t) * 4 + j;
          if (id == 0) {
            uint32_t bits;
            std::memcpy(&bits, got, 4);
            EXPECT_EQ(bits, 0xffffffffu) << "y unwritten at " << b << t << j;
          } else {
            EXPECT_EQ(*got, float(id) * w[j] * scale[b] + sum)
                << "y[" << b << ", " << t << ", " << j << "]";
          }
        }
      }
    }
    EXPECT_EQ(run.info.as<int64_t>()[0], builtFor(length)) << "the variant";
    EXPECT_EQ(run.info.as<int64_t>()[1], nonzero) << "nonzero ids";
    for (GuardedTensor *t : {&run.y, &run.z, &run.info})
      EXPECT_TRUE(t->guardIntact()) << "written past an output";
  }

  std::string path;
  tfc_model *model = nullptr;
  std::mt19937 rng{42};
  alignas(64) float w[4];
};

TEST_F(LengthsModel, Signature) {
  EXPECT_EQ(tfc_model_num_lengths(model), 3);
  EXPECT_EQ(tfc_model_built_length(model, 0), 2);
  EXPECT_EQ(tfc_model_built_length(model, 1), 4);
  EXPECT_EQ(tfc_model_built_length(model, 2), 8);
  EXPECT_EQ(tfc_model_built_length(model, 3), 0);
  EXPECT_EQ(tfc_model_built_length(model, -1), 0);
  // The longest at load.
  EXPECT_EQ(tfc_model_length(model), 8);
  const tfc_tensor_desc *ids = tfc_model_input(model, 0);
  const tfc_tensor_desc *mask = tfc_model_input(model, 1);
  const tfc_tensor_desc *y = tfc_model_output(model, 0);
  EXPECT_STREQ(ids->name, "ids");
  EXPECT_EQ(ids->shape[1], 8);
  EXPECT_EQ(mask->shape[1], 11);
  EXPECT_EQ(y->shape[1], 8);
  EXPECT_EQ(tfc_model_input_length_axis(model, 0), 1);
  EXPECT_EQ(tfc_model_input_length_axis(model, 1), 1);
  EXPECT_EQ(tfc_model_input_length_axis(model, 2), -1);
  EXPECT_EQ(tfc_model_input_length_axis(model, 3), -1);
  EXPECT_EQ(tfc_model_output_length_axis(model, 0), 1);
  EXPECT_EQ(tfc_model_output_length_axis(model, 1), -1);
  EXPECT_EQ(tfc_model_output_length_axis(model, 2), -1);
  EXPECT_EQ(tfc_model_output_length_axis(model, 3), -1);
  EXPECT_EQ(tfc_model_output_length_axis(model, -1), -1);

  // The same descriptors, with the new length's shapes.
  EXPECT_OK(tfc_model_set_length(model, 3));
  EXPECT_EQ(tfc_model_length(model), 3);
  EXPECT_EQ(tfc_model_input(model, 0), ids);
  EXPECT_EQ(ids->shape[0], 2);
  EXPECT_EQ(ids->shape[1], 3);
  EXPECT_EQ(mask->shape[1], 6);
  EXPECT_EQ(y->shape[0], 2);
  EXPECT_EQ(y->shape[1], 3);
  EXPECT_EQ(y->shape[2], 4);
  EXPECT_EQ(tfc_model_input(model, 2)->shape[0], 2);
  EXPECT_EQ(tfc_model_weight(model, 0)->shape[0], 4);
  EXPECT_EQ(tfc_tensor_desc_nbytes(y), 2u * 3 * 4 * 4);
  const tfc_manifest *manifest = tfc_model_manifest_of(model);
  EXPECT_STREQ(manifest->entry, "lengths");
  EXPECT_EQ(manifest->args[2].shape[1], 6);
  EXPECT_EQ(manifest->results[0].shape[1], 3);
  EXPECT_EQ(manifest->args[0].bounds[1], 1000);

  const int64_t three[] = {2, 3}, four[] = {2, 4};
  EXPECT_OK(tfc_model_check_input(model, 0, TFC_DTYPE_I64, 2, three));
  Outcome o = outcome(tfc_model_check_input(model, 0, TFC_DTYPE_I64, 2, four));
  EXPECT_EQ(o.code, TFC_MISMATCH);
  EXPECT_EQ(o.message, "input 0 'ids': expected i64 [2, 3], got i64 [2, 4]");
}

TEST_F(LengthsModel, RunsEveryLength) {
  // Down and up: a variant's padded buffers, reused, hold the rows of a
  // longer length before a shorter one; the padding must be zeros again.
  for (int64_t length :
       {8, 7, 6, 5, 4, 3, 2, 1, 1, 2, 3, 4, 5, 6, 7, 8, 7, 3, 5, 1}) {
    EXPECT_OK(tfc_model_set_length(model, length));
    EXPECT_EQ(tfc_model_length(model), length);
    std::unique_ptr<Run> run = bindFresh(length);
    EXPECT_OK(tfc_model_invoke(model));
    expectOutputs(*run, length);
  }
}

TEST_F(LengthsModel, SettingALengthDropsInputsAndOutputs) {
  std::unique_ptr<Run> run = bindFresh(8);
  EXPECT_OK(tfc_model_invoke(model));
  // The same length again changes nothing.
  EXPECT_OK(tfc_model_set_length(model, 8));
  EXPECT_OK(tfc_model_invoke(model));
  expectOutputs(*run, 8);

  EXPECT_OK(tfc_model_set_length(model, 3));
  Outcome o = outcome(tfc_model_invoke(model));
  EXPECT_EQ(o.code, TFC_FAILED_PRECONDITION);
  EXPECT_EQ(o.message, path + ": input 0 'ids' is not bound");
  run = bindFresh(3);
  EXPECT_OK(tfc_model_invoke(model));
  expectOutputs(*run, 3);
  EXPECT_OK(tfc_model_set_length(model, 3));
  EXPECT_OK(tfc_model_invoke(model));
  expectOutputs(*run, 3);

  // The weight stays bound; outputs are dropped too.
  EXPECT_OK(tfc_model_set_length(model, 4));
  run = std::make_unique<Run>(model);
  EXPECT_OK(tfc_model_bind_input(model, 0, run->ids.data()));
  EXPECT_OK(tfc_model_bind_input(model, 1, run->mask.data()));
  EXPECT_OK(tfc_model_bind_input(model, 2, run->scale.data()));
  o = outcome(tfc_model_invoke(model));
  EXPECT_EQ(o.code, TFC_FAILED_PRECONDITION);
  EXPECT_EQ(o.message, path + ": output 0 'y' is not bound");
  EXPECT_NE(tfc_model_weight_data(model, 0), nullptr);
}

TEST_F(LengthsModel, RefusesOtherLengths) {
  struct Case {
    int64_t length;
    const char *message;
  } cases[] = {
      {0, ": length 0 is less than 1"},
      {-5, ": length -5 is less than 1"},
      {9, ": length 9 is longer than the longest it was built for, 8"},
  };
  EXPECT_OK(tfc_model_set_length(model, 5));
  std::unique_ptr<Run> run = bindFresh(5);
  for (const Case &c : cases) {
    Outcome o = outcome(tfc_model_set_length(model, c.length));
    EXPECT_EQ(o.code, TFC_INVALID_ARGUMENT);
    EXPECT_EQ(o.message, "model " + path + c.message);
  }
  // Nothing changed: the same length, still bound.
  EXPECT_EQ(tfc_model_length(model), 5);
  EXPECT_EQ(tfc_model_input(model, 0)->shape[1], 5);
  EXPECT_OK(tfc_model_invoke(model));
  expectOutputs(*run, 5);
  Outcome o = outcome(tfc_model_set_length(nullptr, 3));
  EXPECT_EQ(o.code, TFC_INVALID_ARGUMENT);
}

TEST_F(LengthsModel, ChecksBoundsInTheCallersShape) {
  EXPECT_OK(tfc_model_set_length(model, 3));
  std::unique_ptr<Run> run = bindFresh(3);
  // [1, 2] of [2, 3] (at the padded [2, 4] this element would be [1, 1]).
  run->ids.as<int64_t>()[5] = 1000;
  Outcome o = outcome(tfc_model_invoke(model));
  EXPECT_EQ(o.code, TFC_INVALID_ARGUMENT);
  EXPECT_EQ(o.message,
            path + ": input 0 'ids' holds 1000 at [1, 2], outside [0, 1000)");
  double ms[2];
  o = outcome(tfc_model_time(model, 0, 2, ms));
  EXPECT_EQ(o.code, TFC_INVALID_ARGUMENT);
}

TEST_F(LengthsModel, TimesPaddedAndBuiltLengths) {
  for (int64_t length : {5, 4, 1}) {
    EXPECT_OK(tfc_model_set_length(model, length));
    std::unique_ptr<Run> run = bindFresh(length);
    // An id of 0 leaves its row of y unwritten: the poisoning before each
    // run shows there, through the padded buffers too.
    run->ids.as<int64_t>()[length] = 0;
    std::memset(run->y.data(), 0, run->y.nbytes);
    double ms[3] = {-1, -1, -1};
    EXPECT_OK(tfc_model_time(model, 2, 3, ms));
    for (double t : ms)
      EXPECT_GE(t, 0.0);
    expectOutputs(*run, length);
  }
}

TEST_F(LengthsModel, InvokePoisonsPaddedOutputs) {
  EXPECT_OK(tfc_model_set_length(model, 6));
  std::unique_ptr<Run> run = bindFresh(6);
  EXPECT_OK(tfc_model_invoke(model));
  expectOutputs(*run, 6);
  // A row the model does not write this time shows 0xFF, not the last
  // run's values.
  run->ids.as<int64_t>()[2] = 0;
  EXPECT_OK(tfc_model_invoke(model));
  expectOutputs(*run, 6);
}

TEST(Lengths, OneShapeModel) {
  tfc_model *model = nullptr;
  std::string path = fixture("add_model.so");
  ASSERT_EQ(tfc_model_load(path.c_str(), &model), nullptr);
  EXPECT_EQ(tfc_model_num_lengths(model), 0);
  EXPECT_EQ(tfc_model_built_length(model, 0), 0);
  EXPECT_EQ(tfc_model_length(model), 0);
  EXPECT_EQ(tfc_model_input_length_axis(model, 0), -1);
  EXPECT_EQ(tfc_model_output_length_axis(model, 0), -1);
  EXPECT_EQ(tfc_model_manifest_of(model)->args, tfc_model_input(model, 0));
  Outcome o = outcome(tfc_model_set_length(model, 3));
  EXPECT_EQ(o.code, TFC_FAILED_PRECONDITION);
  EXPECT_EQ(o.message, "model " + path +
                           " was built for one sequence length; compile it "
                           "with --seq-len L1,L2,... to run other lengths");
  tfc_model_destroy(model);
  EXPECT_EQ(tfc_model_num_lengths(nullptr), 0);
  EXPECT_EQ(tfc_model_length(nullptr), 0);
}

TEST(Lengths, RefusesVariantsThatAreNotOneModel) {
  struct Case {
    const char *file;
    const char *message;
  } cases[] = {
      {"lengths_one_model.so",
       ": tfc_model_variants returns 1 variant; a model built for several "
       "shapes has at least 2"},
      {"lengths_order_model.so",
       ": variant 1 (batch 2, length 2) follows one of length 4 (the "
       "variants are every built batch size with every built length, "
       "ordered by batch size, then length, both increasing)"},
      {"lengths_two_axes_model.so",
       ": variant of length 4: input 'mask' is f32 [3, 7], at length 8 f32 "
       "[2, 11]: it differs in axis 0, the variant of length 2 in axis 1 "
       "(only the sequence axis may differ)"},
      {"lengths_offset_model.so",
       ": variant of length 4: input 'mask' has extent 8 on its sequence "
       "axis 1, not 7 (3 plus the length, as at length 8)"},
      {"lengths_dtype_model.so",
       ": variant of length 4: input 'scale' is f16 [2], the model's f32 "
       "[2]"},
      {"lengths_name_model.so",
       ": variant of length 4: argument 2 is 'attn', the model's 'mask'"},
      {"lengths_weight_model.so",
       ": variant of length 2: weight 'w' is f32 [5], at length 8 f32 [4] "
       "(weights are the same in every variant)"},
      {"lengths_not_main_model.so",
       ": variant of length 8, the last, is not the model's manifest "
       "(tfc_model_manifest): input 'ids' is i64 [2, 8] there, i64 [2, 4] in "
       "the manifest"},
      {"lengths_gpu_model.so", ": variants are for cpu models, not nvptx"},
  };
  for (const Case &c : cases) {
    std::string path = fixture(c.file);
    expectLoadFails(path, TFC_BAD_FORMAT, "model " + path + c.message);
  }
}

} // namespace
