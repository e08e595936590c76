//===- ContextStressTest.cpp - Contexts under load, for ThreadSanitizer ---===//
//
// add_model.so (y = a + b * w) on threads × contexts × cycles of model load,
// weight binding, context creation, many runs checked exactly, context and
// model destruction (the model destroyed before its contexts too, left to
// the last context's destroy); the model's own runs beside its contexts'
// while another thread's rebinding of its weights is refused; and two
// threads calling one context at once.
// Bounded to run in seconds under ThreadSanitizer (scripts/sanitizers.sh
// runs ContextStress.* there); every value is a small integer, so that each
// output is exact.
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

/// Counts of what the threads saw; checked once they are joined.
struct Tally {
  std::atomic<int> runs{0}, wrong{0}, failed{0}, refused{0};
  std::atomic<int> firstFailure{0};
  void fail(tfc_status s) {
    ++failed;
    tfc_status_free(s);
  }
};

/// Binds `r` to `c` and runs it once: false (and counted) on failure or a
/// wrong output.
bool runOnce(tfc_context *c, Request &r, const float *w, Tally &tally) {
  if (tfc_status s = r.run(c)) {
    tally.fail(s);
    return false;
  }
  ++tally.runs;
  if (!r.right(w)) {
    ++tally.wrong;
    return false;
  }
  return true;
}

class ContextStress : public ::testing::Test {
protected:
  static constexpr int kThreads = 4;

  void SetUp() override {
    // One weights file per thread, of values of its own: a run that read
    // another model's weights would show.
    for (int t = 0; t < kThreads; ++t) {
      for (int i = 0; i < 6; ++i)
        w[t][i] = float(t * 10 + i + 1);
      std::string path = dir.path("w" + std::to_string(t) + ".safetensors");
      std::string error;
      ASSERT_TRUE(tfc::writeSafetensors(
          path, {{"w", tfc::DType::F32, {2, 3}, w[t]}}, error))
          << error;
      weights.push_back(path);
    }
  }

  /// A loaded add_model.so with thread `t`'s weights bound, or null.
  tfc_model *load(int t, Tally &tally) {
    tfc_model *model = nullptr;
    if (tfc_status s = tfc_model_load(fixture("add_model.so").c_str(), &model))
      tally.fail(s);
    else if (tfc_status s =
                 tfc_model_bind_weights(model, weights[size_t(t)].c_str())) {
      tally.fail(s);
      tfc_model_destroy(model);
      model = nullptr;
    }
    return model;
  }

  static void expectClean(const Tally &tally, int runs) {
    EXPECT_EQ(tally.failed.load(), 0);
    EXPECT_EQ(tally.wrong.load(), 0);
    EXPECT_EQ(tally.runs.load(), runs);
  }

  TempDir dir;
  std::vector<std::string> weights;
  float w[kThreads][6] = {};
};

TEST_F(ContextStress, LoadRunDestroyCycles) {
  // Each thread: cycles of a model of its own, contexts of it, runs
  // interleaved across the contexts, then the contexts and the model
  // destroyed, on odd cycles the model first.
  constexpr int kCycles = 10, kContexts = 3, kRuns = 40;
  Tally tally;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int cycle = 0; cycle < kCycles; ++cycle) {
        tfc_model *model = load(t, tally);
        if (!model)
          return;
        std::vector<tfc_context *> contexts;
        for (int k = 0; k < kContexts; ++k) {
          tfc_context *c = nullptr;
          if (tfc_status s = tfc_context_create(model, &c))
            tally.fail(s);
          else
            contexts.push_back(c);
        }
        Request r[kContexts];
        for (int i = 0; i < kRuns; ++i)
          for (size_t k = 0; k < contexts.size(); ++k) {
            r[k].fill(t * 100000 + cycle * 1000 + i * 10 + int(k));
            runOnce(contexts[k], r[k], w[t], tally);
          }
        if (cycle % 2) {
          // Left to the last context's destroy: the contexts still run.
          tfc_model_destroy(model);
          for (size_t k = 0; k < contexts.size(); ++k) {
            r[k].fill(t + cycle + int(k));
            runOnce(contexts[k], r[k], w[t], tally);
          }
          for (tfc_context *c : contexts)
            tfc_context_destroy(c);
        } else {
          for (tfc_context *c : contexts)
            tfc_context_destroy(c);
          // With no contexts left, the weights can be bound again.
          if (tfc_status s =
                  tfc_model_bind_weights(model, weights[size_t(t)].c_str()))
            tally.fail(s);
          tfc_model_destroy(model);
        }
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  int runs = kThreads * (kCycles * kRuns * kContexts + kCycles / 2 * kContexts);
  expectClean(tally, runs);
}

TEST_F(ContextStress, SharedModelDestroyedFirst) {
  // One model per cycle, shared by every thread: each creates contexts of
  // its own on it at once with the others (a create that meets another call
  // on the model is refused, and tried again), then the model is destroyed
  // while they run, and the last context's destroy, on whichever thread,
  // frees it.
  constexpr int kCycles = 8, kContexts = 2, kRuns = 50;
  Tally tally;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    tfc_model *model = load(0, tally);
    ASSERT_NE(model, nullptr);
    std::atomic<int> created{0};
    std::atomic<bool> destroyed{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        std::vector<tfc_context *> contexts;
        while (int(contexts.size()) < kContexts) {
          tfc_context *c = nullptr;
          tfc_status s = tfc_context_create(model, &c);
          if (!s) {
            contexts.push_back(c);
          } else if (tfc_status_get_code(s) == TFC_FAILED_PRECONDITION &&
                     std::string(tfc_status_message(s))
                             .find("is in use by another call") !=
                         std::string::npos) {
            ++tally.refused;
            tfc_status_free(s);
            std::this_thread::yield();
          } else {
            tally.fail(s);
            break;
          }
        }
        ++created;
        Request r[kContexts];
        for (int i = 0; i < kRuns; ++i) {
          // Half the runs before the model is destroyed, on most cycles.
          if (i == kRuns / 2)
            while (!destroyed.load())
              std::this_thread::yield();
          for (size_t k = 0; k < contexts.size(); ++k) {
            r[k].fill(cycle * 10000 + t * 100 + i * 2 + int(k));
            runOnce(contexts[k], r[k], w[0], tally);
          }
        }
        for (tfc_context *c : contexts)
          tfc_context_destroy(c);
      });
    // Destroyed once every thread holds its contexts (else a create would
    // meet a freed model).
    while (created.load() < kThreads)
      std::this_thread::yield();
    tfc_model_destroy(model);
    destroyed.store(true);
    for (std::thread &thread : threads)
      thread.join();
  }
  expectClean(tally, kCycles * kThreads * kContexts * kRuns);
}

TEST_F(ContextStress, ModelRunsBesideItsContexts) {
  // The model's own runs (on its own bindings) go on beside its contexts',
  // while another thread tries to bind its weights again: refused, as long
  // as the contexts live (FAILED_PRECONDITION, naming the contexts or the
  // model's call under way), and its refusal may refuse a model run in turn.
  constexpr int kCycles = 3, kRuns = 200;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    Tally tally;
    tfc_model *model = load(2, tally);
    ASSERT_NE(model, nullptr);
    std::vector<tfc_context *> contexts(kThreads - 1, nullptr);
    for (tfc_context *&c : contexts)
      ASSERT_OK(tfc_context_create(model, &c));
    Request mine;
    ASSERT_OK(tfc_model_bind_input(model, 0, mine.a));
    ASSERT_OK(tfc_model_bind_input(model, 1, mine.b));
    ASSERT_OK(tfc_model_bind_output(model, 0, mine.y));
    std::atomic<bool> stop{false};
    std::atomic<int> rebinds{0}, modelRefused{0}, modelWrong{0};
    std::vector<std::thread> threads;
    for (size_t t = 0; t < contexts.size(); ++t)
      threads.emplace_back([&, t] {
        Request r;
        for (int i = 0; i < kRuns; ++i) {
          r.fill(cycle * 10000 + int(t) * 1000 + i);
          runOnce(contexts[t], r, w[2], tally);
        }
      });
    std::thread rebinder([&] {
      do { // once at least, the contexts still there
        tfc_status s = tfc_model_bind_weights(model, weights[2].c_str());
        if (s && tfc_status_get_code(s) == TFC_FAILED_PRECONDITION) {
          ++rebinds;
          tfc_status_free(s);
        } else if (s) {
          tally.fail(s);
        } else {
          ++tally.failed; // bound under live contexts
        }
        std::this_thread::yield();
      } while (!stop.load());
    });
    for (int i = 0; i < kRuns; ++i) {
      mine.fill(cycle * 100 + i);
      tfc_status s;
      // Refused while the rebinder's call holds the model: tried again.
      while ((s = tfc_model_invoke(model)) &&
             tfc_status_get_code(s) == TFC_FAILED_PRECONDITION) {
        ++modelRefused;
        tfc_status_free(s);
        std::this_thread::yield();
      }
      if (s)
        tally.fail(s);
      else if (!mine.right(w[2]))
        ++modelWrong;
    }
    for (std::thread &thread : threads)
      thread.join();
    stop.store(true);
    rebinder.join();
    EXPECT_GT(rebinds.load(), 0);
    EXPECT_EQ(modelWrong.load(), 0);
    expectClean(tally, int(contexts.size()) * kRuns);
    for (tfc_context *c : contexts)
      tfc_context_destroy(c);
    tfc_model_destroy(model);
  }
}

TEST_F(ContextStress, TwoThreadsOnOneContext) {
  // Two threads calling one context at once: every call either does its
  // work or is refused with FAILED_PRECONDITION, and the runs that go
  // through give the right output (checked once both are joined: they share
  // the output buffer). The model is destroyed before the context on odd
  // cycles.
  constexpr int kCycles = 4, kRounds = 4, kCalls = 1000;
  std::atomic<int> done{0}, refused{0}, other{0};
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    Tally tally;
    tfc_model *model = load(1, tally);
    ASSERT_NE(model, nullptr);
    tfc_context *c = nullptr;
    ASSERT_OK(tfc_context_create(model, &c));
    if (cycle % 2)
      tfc_model_destroy(model);
    Request r;
    for (int round = 0; round < kRounds; ++round) {
      r.fill(cycle * 100 + round);
      ASSERT_OK(tfc_context_bind_input(c, 0, r.a));
      ASSERT_OK(tfc_context_bind_input(c, 1, r.b));
      ASSERT_OK(tfc_context_bind_output(c, 0, r.y));
      auto count = [&](tfc_status s) {
        if (!s) {
          ++done;
          return;
        }
        std::string message = tfc_status_message(s);
        if (tfc_status_get_code(s) == TFC_FAILED_PRECONDITION &&
            message.find("is in use by another call on another thread") !=
                std::string::npos)
          ++refused;
        else
          ++other;
        tfc_status_free(s);
      };
      auto hammer = [&] {
        for (int i = 0; i < kCalls; ++i) {
          // Rebinding the same buffers races with nothing: the bindings
          // are the context's, changed only by a call that holds it.
          if (i % 4 == 0)
            count(tfc_context_bind_input(c, i % 8 ? 0 : 1, i % 8 ? r.a : r.b));
          else if (i % 4 == 1)
            count(tfc_context_bind_output(c, 0, r.y));
          else
            count(tfc_context_invoke(c));
        }
      };
      std::thread t1(hammer), t2(hammer);
      t1.join();
      t2.join();
      // Both threads' first calls may have been refused: one more run, alone.
      EXPECT_OK(tfc_context_invoke(c));
      EXPECT_TRUE(r.right(w[1])) << "cycle " << cycle << " round " << round;
    }
    tfc_context_destroy(c);
    if (cycle % 2 == 0)
      tfc_model_destroy(model);
    EXPECT_EQ(tally.failed.load(), 0);
  }
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(done.load() + refused.load(), kCycles * kRounds * 2 * kCalls);
  EXPECT_GT(done.load(), 0);
}

} // namespace
