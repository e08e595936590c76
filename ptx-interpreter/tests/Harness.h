//===- Harness.h - Hand-written PTX run through the interpreter -*- C++ -*-===//
//
// The tests write small kernels in PTX, load them with ptxemu_load and
// launch them on host buffers, which are the kernels' only device memory
// and are passed to them, in order, as 64-bit pointer parameters.
//
//===----------------------------------------------------------------------===//

#ifndef PTXI_TESTS_HARNESS_H
#define PTXI_TESTS_HARNESS_H

#include "ptxi/ptxemu.h"

#include <string>
#include <vector>

namespace ptxi::test {

/// What every test module starts with: three lines.
inline const char *const kModuleHeader =
    ".version 8.0\n.target sm_90a\n.address_size 64\n";

/// A PTX module parsed from kModuleHeader + `body`, unloaded at the end.
class PtxModule {
public:
  explicit PtxModule(const std::string &body) {
    char message[512] = "";
    module_ =
        ptxemu_load((kModuleHeader + body).c_str(), message, sizeof message);
    error_ = message;
  }
  ~PtxModule() { ptxemu_unload(module_); }
  PtxModule(const PtxModule &) = delete;
  PtxModule &operator=(const PtxModule &) = delete;

  bool loaded() const { return module_ != nullptr; }
  /// The load's error message (empty when it loaded).
  const std::string &error() const { return error_; }
  ptxemu_kernel *kernel(const char *name) const {
    return ptxemu_get(module_, name);
  }

private:
  ptxemu_module *module_ = nullptr;
  std::string error_;
};

/// A device buffer: `bytes` bytes at `data`.
struct Buffer {
  void *data;
  size_t bytes;
};

template <typename T> Buffer bufferOf(std::vector<T> &v) {
  return {v.data(), v.size() * sizeof(T)};
}

/// One launch: a grid of `blocks` blocks of `threads` threads (along x),
/// each buffer a pointer parameter and the launch's device memory. Returns
/// the PTXEMU_* code; `error` gets the launch's message.
inline int launch(const PtxModule &module, const char *name, unsigned blocks,
                  unsigned threads, const std::vector<Buffer> &buffers,
                  std::string *error = nullptr) {
  ptxemu_kernel *kernel = module.kernel(name);
  if (!kernel) {
    if (error)
      *error = std::string("no kernel ") + name;
    return -1;
  }
  std::vector<void *> pointers;
  std::vector<ptxemu_range> memory;
  for (const Buffer &b : buffers) {
    pointers.push_back(b.data);
    memory.push_back({static_cast<const char *>(b.data), b.bytes});
  }
  std::vector<void *> params;
  for (void *&p : pointers)
    params.push_back(&p);
  const unsigned grid[3] = {blocks, 1, 1}, block[3] = {threads, 1, 1};
  char message[512] = "";
  int rc = ptxemu_launch(kernel, grid, block, 0, params.data(), memory.data(),
                         memory.size(), message, sizeof message);
  if (error)
    *error = message;
  return rc;
}

} // namespace ptxi::test

#endif // PTXI_TESTS_HARNESS_H
