//===- ContextRequest.h - One request of the contexts' tests ----*- C++ -*-===//
//
// The add model of the execution contexts' tests computes y = a + b * w on
// 6 elements; a Request holds one call's inputs and output, and run() binds
// them to a context and invokes it.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_TESTS_UNITTESTS_RUNTIME_CONTEXTREQUEST_H
#define TFC_TESTS_UNITTESTS_RUNTIME_CONTEXTREQUEST_H

#include "tfc/runtime/api.h"

namespace tfc::testing {

struct Request {
  alignas(64) float a[16];
  alignas(64) float b[16];
  alignas(64) float y[16];
  /// Inputs that differ with `base`; the output poisoned, so that a run
  /// that writes nothing is seen.
  void fill(int base) {
    for (int i = 0; i < 6; ++i) {
      a[i] = float(base % 1000 + i);
      b[i] = float(i % 3 - base % 7);
      y[i] = -12345.0f;
    }
  }
  /// Whether y holds a + b * w.
  bool right(const float *w) const {
    for (int i = 0; i < 6; ++i)
      if (y[i] != a[i] + b[i] * w[i])
        return false;
    return true;
  }
  /// Binds a, b and y to `c` and runs it: the first failing call's status.
  tfc_status run(tfc_context *c) {
    tfc_status s = tfc_context_bind_input(c, 0, a);
    if (!s)
      s = tfc_context_bind_input(c, 1, b);
    if (!s)
      s = tfc_context_bind_output(c, 0, y);
    if (!s)
      s = tfc_context_invoke(c);
    return s;
  }
};

} // namespace tfc::testing

#endif // TFC_TESTS_UNITTESTS_RUNTIME_CONTEXTREQUEST_H
