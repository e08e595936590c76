//===- ContextTest.cpp - Execution contexts of one loaded model -----------===//
//
// add_model.so (y = a + b * w): contexts share the model's weights, run at
// once on threads of their own with bindings of their own, refuse a second
// call while one is under way, freeze the model's weights while they exist,
// and keep a destroyed model alive until the last of them goes.
//
//===----------------------------------------------------------------------===//

#include "tfc/runtime/api.h"
#include "tfc/runtime/safetensors.h"

#include "ContextRequest.h"
#include "Status.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

using tfc::testing::fixture;
using tfc::testing::Outcome;
using tfc::testing::outcome;
using tfc::testing::Request;
using tfc::testing::TempDir;

namespace {

class Contexts : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_OK(tfc_model_load(fixture("add_model.so").c_str(), &model));
    std::string error;
    weights = dir.path("w.safetensors");
    ASSERT_TRUE(tfc::writeSafetensors(
        weights, {{"w", tfc::DType::F32, {2, 3}, w}}, error))
        << error;
    ASSERT_OK(tfc_model_bind_weights(model, weights.c_str()));
  }
  void TearDown() override { tfc_model_destroy(model); }

  TempDir dir;
  std::string weights;
  const float w[6] = {1, 2, 3, 4, 5, 6};
  tfc_model *model = nullptr;
};

TEST_F(Contexts, RunOnBindingsOfTheirOwn) {
  tfc_context *c1 = nullptr, *c2 = nullptr;
  ASSERT_OK(tfc_context_create(model, &c1));
  ASSERT_OK(tfc_context_create(model, &c2));
  ASSERT_NE(tfc_context_input(c1, 1), nullptr);
  EXPECT_STREQ(tfc_context_input(c1, 1)->name, "b");
  EXPECT_EQ(tfc_context_output(c1, 0)->shape[1], 3);
  EXPECT_EQ(tfc_context_input(c1, 2), nullptr);
  EXPECT_EQ(tfc_context_output(c1, 1), nullptr);
  Request r1, r2;
  r1.fill(1);
  r2.fill(7);
  EXPECT_OK(tfc_context_bind_input(c1, 0, r1.a));
  EXPECT_OK(tfc_context_bind_input(c1, 1, r1.b));
  EXPECT_OK(tfc_context_bind_output(c1, 0, r1.y));
  // Unbound: c2's output.
  EXPECT_OK(tfc_context_bind_input(c2, 0, r2.a));
  EXPECT_OK(tfc_context_bind_input(c2, 1, r2.b));
  Outcome o = outcome(tfc_context_invoke(c2));
  EXPECT_EQ(o.code, TFC_FAILED_PRECONDITION);
  EXPECT_NE(o.message.find("output 0 'y' is not bound"), std::string::npos)
      << o.message;
  EXPECT_OK(tfc_context_bind_output(c2, 0, r2.y));
  EXPECT_OK(tfc_context_invoke(c1));
  EXPECT_OK(tfc_context_invoke(c2));
  EXPECT_TRUE(r1.right(w));
  EXPECT_TRUE(r2.right(w));
  // The model's own bindings are not the contexts'.
  o = outcome(tfc_model_invoke(model));
  EXPECT_EQ(o.code, TFC_FAILED_PRECONDITION);
  // Binding errors name the call and the tensor.
  o = outcome(tfc_context_bind_input(c1, 0, r1.a + 1));
  EXPECT_EQ(o.code, TFC_INVALID_ARGUMENT);
  EXPECT_NE(o.message.find("input 0 'a': buffer is not 64-byte aligned"),
            std::string::npos)
      << o.message;
  o = outcome(tfc_context_bind_output(c1, 3, r1.y));
  EXPECT_EQ(o.code, TFC_INVALID_ARGUMENT);
  EXPECT_NE(o.message.find("tfc_context_bind_output: index 3 out of range"),
            std::string::npos)
      << o.message;
  o = outcome(tfc_context_set_batch(c1, 2));
  EXPECT_EQ(o.code, TFC_FAILED_PRECONDITION);
  EXPECT_NE(o.message.find("was built for one batch size"), std::string::npos);
  tfc_context_destroy(c1);
  tfc_context_destroy(c2);
}

TEST_F(Contexts, FreezeTheModelsWeights) {
  tfc_context *c = nullptr;
  ASSERT_OK(tfc_context_create(model, &c));
  Outcome o = outcome(tfc_model_bind_weights(model, weights.c_str()));
  EXPECT_EQ(o.code, TFC_FAILED_PRECONDITION);
  EXPECT_NE(o.message.find("has 1 context, which share its weights "
                           "read-only: destroy them before binding weights "
                           "again"),
            std::string::npos)
      << o.message;
  alignas(64) float other[16] = {};
  o = outcome(tfc_model_bind_weight(model, 0, other));
  EXPECT_EQ(o.code, TFC_FAILED_PRECONDITION);
  tfc_context_destroy(c);
  EXPECT_OK(tfc_model_bind_weights(model, weights.c_str()));
}

TEST_F(Contexts, NeedBoundWeights) {
  tfc_model *bare = nullptr;
  ASSERT_OK(tfc_model_load(fixture("add_model.so").c_str(), &bare));
  tfc_context *c = nullptr;
  Outcome o = outcome(tfc_context_create(bare, &c));
  EXPECT_EQ(o.code, TFC_FAILED_PRECONDITION);
  EXPECT_EQ(c, nullptr);
  EXPECT_NE(o.message.find("weight 0 'w' is not bound (bind the weights "
                           "first)"),
            std::string::npos)
      << o.message;
  tfc_model_destroy(bare);
  o = outcome(tfc_context_invoke(nullptr));
  EXPECT_EQ(o.code, TFC_INVALID_ARGUMENT);
}

TEST_F(Contexts, OutliveTheirModelsDestroy) {
  tfc_model *m = nullptr;
  ASSERT_OK(tfc_model_load(fixture("add_model.so").c_str(), &m));
  ASSERT_OK(tfc_model_bind_weights(m, weights.c_str()));
  tfc_context *c = nullptr;
  ASSERT_OK(tfc_context_create(m, &c));
  tfc_model_destroy(m); // left to the context's destroy
  Request r;
  r.fill(3);
  EXPECT_OK(tfc_context_bind_input(c, 0, r.a));
  EXPECT_OK(tfc_context_bind_input(c, 1, r.b));
  EXPECT_OK(tfc_context_bind_output(c, 0, r.y));
  EXPECT_OK(tfc_context_invoke(c));
  EXPECT_TRUE(r.right(w));
  tfc_context_destroy(c);
}

TEST_F(Contexts, RunAtOnceOnThreads) {
  constexpr int kThreads = 4, kRuns = 2000;
  std::vector<tfc_context *> contexts(kThreads, nullptr);
  for (tfc_context *&c : contexts)
    ASSERT_OK(tfc_context_create(model, &c));
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      Request r;
      tfc_context *c = contexts[size_t(t)];
      for (int i = 0; i < kRuns; ++i) {
        r.fill(t * kRuns + i);
        if (tfc_status s = r.run(c)) {
          ++failed;
          tfc_status_free(s);
        } else if (!r.right(w)) {
          ++wrong;
        }
      }
    });
  for (std::thread &t : threads)
    t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  for (tfc_context *c : contexts)
    tfc_context_destroy(c);
}

TEST_F(Contexts, RefuseASecondCallAtOnce) {
  // Two threads on one context: each call either runs right or is refused,
  // naming the context as in use.
  tfc_context *c = nullptr;
  ASSERT_OK(tfc_context_create(model, &c));
  Request r;
  r.fill(2);
  ASSERT_OK(tfc_context_bind_input(c, 0, r.a));
  ASSERT_OK(tfc_context_bind_input(c, 1, r.b));
  ASSERT_OK(tfc_context_bind_output(c, 0, r.y));
  std::atomic<int> refused{0}, other{0};
  auto hammer = [&] {
    for (int i = 0; i < 20000; ++i)
      if (tfc_status s = tfc_context_invoke(c)) {
        std::string message = tfc_status_message(s);
        if (tfc_status_get_code(s) == TFC_FAILED_PRECONDITION &&
            message.find("is in use by another call on another thread") !=
                std::string::npos)
          ++refused;
        else
          ++other;
        tfc_status_free(s);
      }
  };
  std::thread t1(hammer), t2(hammer);
  t1.join();
  t2.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_TRUE(r.right(w));
  tfc_context_destroy(c);
}

} // namespace
