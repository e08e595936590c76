//===- BatchTest.cpp - Models built for several batch sizes and lengths ---===//
//
// batches_model (runtime/tests/fixtures/batches_model.c) holds variants of
// batch sizes 1 and 3 and lengths 2 and 5: ids i64 [B, L], mask f32
// [B, 3 + L], kv f32 [2, 2B, L] (batches_outer_model: [2B, 2, L]), weight
// w f32 [4]; y f32 [B, L, 4] = ids * w + z, z f32 [B] the sums of the mask
// rows, kv2 = kv + 1, info i64 [B, 3] = {the variant's batch size and
// length, the row's nonzero ids}, all over the variant's padded rows. The
// inputs here are small integers, so every result is exact and the
// reference below equals it.
//
//===----------------------------------------------------------------------===//

#include "tfc/runtime/api.h"

#include "GuardedTensor.h"
#include "Status.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>

using tfc::testing::expectLoadFails;
using tfc::testing::fixture;
using tfc::testing::GuardedTensor;
using tfc::testing::Outcome;
using tfc::testing::outcome;

namespace {

constexpr int64_t kLargest = 3;

/// The smallest built batch size (length) of at least `n`.
int64_t builtBatch(int64_t n) { return n <= 1 ? 1 : 3; }
int64_t builtLength(int64_t n) { return n <= 2 ? 2 : 5; }

/// The two layouts of the fixture: kv's batch axis second, or first.
class BatchesModel : public ::testing::TestWithParam<bool> {
protected:
  bool outer() const { return GetParam(); }

  void SetUp() override {
    path = fixture(outer() ? "batches_outer_model.so" : "batches_model.so");
    tfc_status status = tfc_model_load(path.c_str(), &model);
    ASSERT_EQ(status, nullptr) << tfc_status_message(status);
    for (float &v : w)
      v = float(int(rng() % 9) - 4);
    EXPECT_OK(tfc_model_bind_weight(model, 0, w));
  }
  void TearDown() override { tfc_model_destroy(model); }

  /// The offset of kv[i, r, t] (r: one of the 2B rows) at `batch`, `length`.
  size_t kvIndex(int64_t batch, int64_t length, int64_t i, int64_t r,
                 int64_t t) const {
    return size_t(outer() ? (r * 2 + i) * length + t
                          : (i * 2 * batch + r) * length + t);
  }

  /// Buffers of the current shapes, bound: fresh small integers in the
  /// inputs (ids 0..9, a third of them 0), `fill` bytes in the outputs.
  struct Run {
    explicit Run(tfc_model *model)
        : ids(tfc_model_input(model, 0)), mask(tfc_model_input(model, 1)),
          kv(tfc_model_input(model, 2)), y(tfc_model_output(model, 0)),
          z(tfc_model_output(model, 1)), kv2(tfc_model_output(model, 2)),
          info(tfc_model_output(model, 3)) {}
    GuardedTensor ids, mask, kv, y, z, kv2, info;
  };

  std::unique_ptr<Run> bindFresh(int64_t batch, int64_t length, uint8_t fill) {
    auto run = std::make_unique<Run>(model);
    for (int64_t i = 0; i < batch * length; ++i)
      run->ids.as<int64_t>()[i] = std::max<int64_t>(0, int64_t(rng() % 13) - 3);
    for (int64_t i = 0; i < batch * (3 + length); ++i)
      run->mask.as<float>()[i] = float(int(rng() % 7) - 3);
    for (int64_t i = 0; i < 4 * batch * length; ++i)
      run->kv.as<float>()[i] = float(int(rng() % 100) - 50);
    for (GuardedTensor *t : {&run->y, &run->z, &run->kv2, &run->info})
      std::memset(t->data(), fill, t->nbytes);
    EXPECT_OK(tfc_model_bind_input(model, 0, run->ids.data()));
    EXPECT_OK(tfc_model_bind_input(model, 1, run->mask.data()));
    EXPECT_OK(tfc_model_bind_input(model, 2, run->kv.data()));
    EXPECT_OK(tfc_model_bind_output(model, 0, run->y.data()));
    EXPECT_OK(tfc_model_bind_output(model, 1, run->z.data()));
    EXPECT_OK(tfc_model_bind_output(model, 2, run->kv2.data()));
    EXPECT_OK(tfc_model_bind_output(model, 3, run->info.data()));
    return run;
  }

  /// Compares the outputs with the model computed here over the caller's
  /// `batch` sequences of `length` tokens: padding with zeros changes
  /// neither the mask sums nor the count of nonzero ids. Sequence b runs in
  /// the slice b / 3 (of min(3, batch - 3 * slice) sequences); an element of
  /// y whose id is 0 is not written: it keeps the caller's `fill` where its
  /// slice ran on the caller's buffers, and is 0xFF where it ran staged.
  void expectOutputs(Run &run, int64_t batch, int64_t length, uint8_t fill) {
    SCOPED_TRACE("batch " + std::to_string(batch) + ", length " +
                 std::to_string(length));
    const int64_t *ids = run.ids.as<int64_t>();
    const float *mask = run.mask.as<float>();
    bool sliced = batch > kLargest;
    for (int64_t b = 0; b < batch; ++b) {
      int64_t slice = std::min(kLargest, batch - b / kLargest * kLargest);
      bool staged = builtBatch(slice) != slice ||
                    builtLength(length) != length || (sliced && !outer());
      uint8_t unwritten = staged ? 0xff : fill;
      float sum = 0;
      for (int64_t c = 0; c < 3 + length; ++c)
        sum += mask[b * (3 + length) + c];
      EXPECT_EQ(run.z.as<float>()[b], sum) << "z[" << b << "]";
      int64_t nonzero = 0;
      for (int64_t t = 0; t < length; ++t) {
        int64_t id = ids[b * length + t];
        nonzero += id != 0;
        for (int64_t j = 0; j < 4; ++j) {
          const float *got = run.y.as<float>() + (b * length + t) * 4 + j;
          if (id == 0) {
            uint8_t bytes[4];
            std::memcpy(bytes, got, 4);
            for (uint8_t byte : bytes)
              EXPECT_EQ(byte, unwritten)
                  << "y unwritten at " << b << ", " << t << ", " << j;
          } else {
            EXPECT_EQ(*got, float(id) * w[j] + sum)
                << "y[" << b << ", " << t << ", " << j << "]";
          }
        }
      }
      const int64_t *info = run.info.as<int64_t>() + b * 3;
      EXPECT_EQ(info[0], builtBatch(slice)) << "the variant's batch, row " << b;
      EXPECT_EQ(info[1], builtLength(length)) << "the variant's length";
      EXPECT_EQ(info[2], nonzero) << "nonzero ids of row " << b;
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t r = 2 * b; r < 2 * b + 2; ++r)
          for (int64_t t = 0; t < length; ++t) {
            size_t at = kvIndex(batch, length, i, r, t);
            EXPECT_EQ(run.kv2.as<float>()[at], run.kv.as<float>()[at] + 1)
                << "kv2[" << i << ", " << r << ", " << t << "]";
          }
    }
    for (GuardedTensor *t : {&run.y, &run.z, &run.kv2, &run.info})
      EXPECT_TRUE(t->guardIntact()) << "written past an output";
  }

  std::string path;
  tfc_model *model = nullptr;
  std::mt19937 rng{7};
  alignas(64) float w[4];
};

TEST_P(BatchesModel, Signature) {
  EXPECT_EQ(tfc_model_num_batches(model), 2);
  EXPECT_EQ(tfc_model_built_batch(model, 0), 1);
  EXPECT_EQ(tfc_model_built_batch(model, 1), 3);
  EXPECT_EQ(tfc_model_built_batch(model, 2), 0);
  EXPECT_EQ(tfc_model_num_lengths(model), 2);
  EXPECT_EQ(tfc_model_built_length(model, 1), 5);
  // The largest and longest at load.
  EXPECT_EQ(tfc_model_batch(model), 3);
  EXPECT_EQ(tfc_model_length(model), 5);
  int32_t kvBatchAxis = outer() ? 0 : 1;
  EXPECT_EQ(tfc_model_input_batch_axis(model, 0), 0);
  EXPECT_EQ(tfc_model_input_batch_axis(model, 1), 0);
  EXPECT_EQ(tfc_model_input_batch_axis(model, 2), kvBatchAxis);
  EXPECT_EQ(tfc_model_input_batch_axis(model, 3), -1);
  EXPECT_EQ(tfc_model_input_length_axis(model, 2), 2);
  EXPECT_EQ(tfc_model_output_batch_axis(model, 0), 0);
  EXPECT_EQ(tfc_model_output_batch_axis(model, 1), 0);
  EXPECT_EQ(tfc_model_output_batch_axis(model, 2), kvBatchAxis);
  EXPECT_EQ(tfc_model_output_batch_axis(model, 3), 0);
  EXPECT_EQ(tfc_model_output_batch_axis(model, 4), -1);
  EXPECT_EQ(tfc_model_output_length_axis(model, 1), -1);
  EXPECT_EQ(tfc_model_output_length_axis(model, 3), -1);

  // A batch beyond the largest built: the same descriptors, in its shapes.
  const tfc_tensor_desc *kv = tfc_model_input(model, 2);
  EXPECT_OK(tfc_model_set_batch(model, 7));
  EXPECT_OK(tfc_model_set_length(model, 4));
  EXPECT_EQ(tfc_model_batch(model), 7);
  EXPECT_EQ(tfc_model_input(model, 2), kv);
  EXPECT_EQ(kv->shape[kvBatchAxis], 14);
  EXPECT_EQ(kv->shape[2], 4);
  EXPECT_EQ(tfc_model_input(model, 1)->shape[1], 7);
  EXPECT_EQ(tfc_model_output(model, 3)->shape[0], 7);
  EXPECT_EQ(tfc_model_output(model, 3)->shape[1], 3);
  EXPECT_EQ(tfc_model_weight(model, 0)->shape[0], 4);
  EXPECT_EQ(tfc_tensor_desc_nbytes(tfc_model_output(model, 0)), 7u * 4 * 4 * 4);
}

TEST_P(BatchesModel, RunsEveryBatchAndLength) {
  // Below, at, between and beyond the built batch sizes; slices of 3 with a
  // rest of 1 (built) or 2 (padded to 3).
  for (int64_t batch : {1, 2, 3, 4, 5, 6, 7, 8})
    for (int64_t length : {1, 2, 3, 5}) {
      EXPECT_OK(tfc_model_set_batch(model, batch));
      EXPECT_OK(tfc_model_set_length(model, length));
      for (uint8_t fill : {0x5a, 0x00}) {
        auto run = bindFresh(batch, length, fill);
        EXPECT_OK(tfc_model_invoke(model));
        expectOutputs(*run, batch, length, fill);
      }
    }
}

TEST_P(BatchesModel, SettingABatchDropsInputsAndOutputs) {
  auto run = bindFresh(3, 5, 0);
  EXPECT_OK(tfc_model_invoke(model));
  // The same batch again keeps the bindings.
  EXPECT_OK(tfc_model_set_batch(model, 3));
  EXPECT_OK(tfc_model_invoke(model));
  EXPECT_OK(tfc_model_set_batch(model, 5));
  Outcome o = outcome(tfc_model_invoke(model));
  EXPECT_EQ(o.code, TFC_FAILED_PRECONDITION) << o.message;
  auto rebound = bindFresh(5, 5, 0);
  EXPECT_OK(tfc_model_invoke(model));
  expectOutputs(*rebound, 5, 5, 0);
}

TEST_P(BatchesModel, TimesSlicedBatches) {
  EXPECT_OK(tfc_model_set_batch(model, 8));
  EXPECT_OK(tfc_model_set_length(model, 3));
  auto run = bindFresh(8, 3, 0);
  double ms[3];
  EXPECT_OK(tfc_model_time(model, 1, 3, ms));
  for (double t : ms)
    EXPECT_GE(t, 0.0);
  // Timing fills the outputs with 0xFF before each run.
  expectOutputs(*run, 8, 3, 0xff);
}

TEST_P(BatchesModel, RefusesOtherBatches) {
  Outcome o = outcome(tfc_model_set_batch(model, 0));
  EXPECT_EQ(o.code, TFC_INVALID_ARGUMENT);
  EXPECT_EQ(o.message, "model " + path + ": batch 0 is less than 1");
  o = outcome(tfc_model_set_batch(model, int64_t(1) << 60));
  EXPECT_EQ(o.code, TFC_INVALID_ARGUMENT);
  EXPECT_EQ(o.message, "model " + path +
                           ": batch 1152921504606846976 makes tensors of "
                           "more than 2^63 bytes");
  o = outcome(tfc_model_set_length(model, 6));
  EXPECT_EQ(o.code, TFC_INVALID_ARGUMENT);
  EXPECT_EQ(o.message, "model " + path +
                           ": length 6 is longer than the longest it was "
                           "built for, 5");
  // Nothing changed.
  EXPECT_EQ(tfc_model_batch(model), 3);
  EXPECT_EQ(tfc_model_length(model), 5);
  o = outcome(tfc_model_set_batch(nullptr, 2));
  EXPECT_EQ(o.code, TFC_INVALID_ARGUMENT);
  EXPECT_EQ(o.message, "tfc_model_set_batch: model must not be NULL");
}

INSTANTIATE_TEST_SUITE_P(Layouts, BatchesModel, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool> &info) {
                           return info.param ? "BatchAxisFirst"
                                             : "BatchAxisSecond";
                         });

TEST(Batches, ModelOfOneBatchSize) {
  tfc_model *model = nullptr;
  std::string path = fixture("lengths_model.so");
  ASSERT_EQ(tfc_model_load(path.c_str(), &model), nullptr);
  EXPECT_EQ(tfc_model_num_batches(model), 0);
  EXPECT_EQ(tfc_model_built_batch(model, 0), 0);
  EXPECT_EQ(tfc_model_batch(model), 0);
  EXPECT_EQ(tfc_model_input_batch_axis(model, 0), -1);
  EXPECT_EQ(tfc_model_output_batch_axis(model, 0), -1);
  Outcome o = outcome(tfc_model_set_batch(model, 2));
  EXPECT_EQ(o.code, TFC_FAILED_PRECONDITION);
  EXPECT_EQ(o.message,
            "model " + path +
                " was built for one batch size; compile it with --batch "
                "B1,B2,... to run other batch sizes");
  tfc_model_destroy(model);
}

TEST(Batches, RefusesVariantsThatAreNotOneModel) {
  struct Case {
    const char *file;
    const char *message;
  } cases[] = {
      {"batches_no_axis_model.so",
       ": output 'z' has no batch axis (it is f32 [3] at every batch size; "
       "with several batch sizes every input and output has one)"},
      {"batches_factor_model.so",
       ": variant of batch 1 and length 2: input 'kv' has extent 3 on its "
       "batch axis 1, not 2 (2 times the batch size, as at batch 3 and "
       "length 5)"},
      {"batches_grid_model.so",
       ": variant 2 (batch 3, length 5) is not batch 3, length 2 (the "
       "variants are every built batch size with every built length, "
       "ordered by batch size, then length, both increasing)"},
  };
  for (const Case &c : cases) {
    std::string path = fixture(c.file);
    expectLoadFails(path, TFC_BAD_FORMAT, "model " + path + c.message);
  }
}

} // namespace
