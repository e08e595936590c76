//===- Failure.cpp - Sticky errors of the mgpu* functions -----------------===//

#include "Failure.h"

#include <mutex>

namespace tfc::cuda {
namespace {

thread_local FailureScope *currentScope = nullptr;

struct Unscoped {
  std::mutex mutex;
  std::optional<Failure> failure;
};

Unscoped &unscoped() {
  static Unscoped *instance = new Unscoped(); // leaked: used during exit
  return *instance;
}

void record(Failure failure) {
  if (currentScope) {
    currentScope->record(std::move(failure));
    return;
  }
  Unscoped &u = unscoped();
  std::lock_guard<std::mutex> lock(u.mutex);
  if (!u.failure)
    u.failure = std::move(failure);
}

} // namespace

void recordFailure(const Driver *driver, CUresult result,
                   const std::string &what) {
  std::string text = driver ? driver->errorText(result)
                            : "CUDA error " + std::to_string(result);
  record({result, what + ": " + text});
}

void recordFailure(CUresult result, const std::string &message) {
  record({result, message});
}

const Driver *activeDriver() {
  std::string error;
  Driver *driver = Driver::get(&error);
  if (!driver) {
    recordFailure(kErrorNotSupported, error);
    return nullptr;
  }
  if (CUresult r = driver->makeCurrent()) {
    recordFailure(driver, r, "cuCtxSetCurrent failed");
    return nullptr;
  }
  return driver;
}

bool scopeFailed() { return currentScope && currentScope->failure(); }

FailureScope::FailureScope() : outer_(currentScope) { currentScope = this; }

FailureScope::~FailureScope() { currentScope = outer_; }

void FailureScope::record(Failure failure) {
  if (!failure_)
    failure_ = std::move(failure);
}

std::optional<Failure> takeUnscopedFailure() {
  Unscoped &u = unscoped();
  std::lock_guard<std::mutex> lock(u.mutex);
  std::optional<Failure> failure = std::move(u.failure);
  u.failure.reset();
  return failure;
}

} // namespace tfc::cuda
