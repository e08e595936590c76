//===- Failure.h - Sticky errors of the mgpu* functions ---------*- C++ -*-===//
//
// The mgpu* functions that generated host code calls return no status, so a
// failing driver call is recorded instead: the first failure while the
// runtime runs a model on this thread (a FailureScope) is kept and becomes
// the run's status. Later failures of the same run are consequences of the
// first and are dropped; calls that could touch memory (launches, copies)
// are skipped once a run has failed, so that a failed allocation's NULL
// does not turn into an illegal-address fault that ruins the context.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_CUDA_FAILURE_H
#define TFC_RUNTIME_CUDA_FAILURE_H

#include "CudaDriver.h"

#include <optional>
#include <string>

namespace tfc::cuda {

struct Failure {
  CUresult result = kSuccess;
  /// One line: "cuLaunchKernel failed for kernel 'k': CUDA_ERROR_X (...)".
  std::string message;
};

/// Records a failed call. `driver` (may be null) turns `result` into its
/// name; `what` names the call, with the kernel or size when known.
void recordFailure(const Driver *driver, CUresult result,
                   const std::string &what);
/// Records a failure that is not a driver result (no driver, a refused
/// request): `message` is the whole line.
void recordFailure(CUresult result, const std::string &message);

/// True when the current scope already holds a failure.
bool scopeFailed();

/// The driver, initialised if needed, with the runtime's context current on
/// this thread; nullptr when either fails, which is recorded.
const Driver *activeDriver();

/// While alive, failures on this thread go to this scope (scopes nest; the
/// innermost wins). Without a scope they go to a process-wide slot that the
/// next GPU run reports (see takeUnscopedFailure).
class FailureScope {
public:
  FailureScope();
  ~FailureScope();
  FailureScope(const FailureScope &) = delete;
  FailureScope &operator=(const FailureScope &) = delete;

  const std::optional<Failure> &failure() const { return failure_; }
  void record(Failure failure);

private:
  std::optional<Failure> failure_;
  FailureScope *outer_;
};

/// The first failure recorded outside any scope (by a model library loaded
/// without tfc_model_load, say), cleared by this call.
std::optional<Failure> takeUnscopedFailure();

/// Runs `body` for the C function `fn`; an exception (out of memory while
/// recording, say) becomes a recorded failure and a default result, never a
/// crash in generated code.
template <typename Fn>
auto shielded(const char *fn, Fn &&body) noexcept -> decltype(body()) {
  try {
    return body();
  } catch (...) {
    try {
      recordFailure(kErrorOutOfMemory,
                    std::string(fn) + ": out of host memory");
    } catch (...) {
    }
    return decltype(body())();
  }
}

} // namespace tfc::cuda

#endif // TFC_RUNTIME_CUDA_FAILURE_H
