//===- Status.h - tfc_status in the runtime tests ---------------*- C++ -*-===//

#ifndef TFC_UNITTESTS_RUNTIME_STATUS_H
#define TFC_UNITTESTS_RUNTIME_STATUS_H

#include "tfc/runtime/api.h"

#include <gtest/gtest.h>

#include <string>

namespace tfc::testing {

/// The status's code and message; frees it.
struct Outcome {
  tfc_status_code code;
  std::string message;
};

inline Outcome outcome(tfc_status status) {
  Outcome result{tfc_status_get_code(status), tfc_status_message(status)};
  tfc_status_free(status);
  return result;
}

/// tfc_model_load of `path` fails with `code` and `message`, and leaves no
/// model.
inline void expectLoadFails(const std::string &path, tfc_status_code code,
                            const std::string &message) {
  tfc_model *model = reinterpret_cast<tfc_model *>(1);
  Outcome o = outcome(tfc_model_load(path.c_str(), &model));
  EXPECT_EQ(model, nullptr) << path;
  EXPECT_EQ(o.code, code) << path;
  EXPECT_EQ(o.message, message);
}

} // namespace tfc::testing

#define EXPECT_OK(expr)                                                        \
  do {                                                                         \
    ::tfc::testing::Outcome o = ::tfc::testing::outcome(expr);                 \
    EXPECT_EQ(o.code, TFC_OK) << o.message;                                    \
  } while (0)

/// As EXPECT_OK, returning from the test on failure.
#define ASSERT_OK(expr)                                                        \
  do {                                                                         \
    ::tfc::testing::Outcome o = ::tfc::testing::outcome(expr);                 \
    ASSERT_EQ(o.code, TFC_OK) << o.message;                                    \
  } while (0)

#endif // TFC_UNITTESTS_RUNTIME_STATUS_H
