//===- Api.cpp - The C API of the PTX interpreter -------------------------===//
//
// See ptxi/ptxemu.h. A module is parsed once; a launch interprets its
// kernel over the grid, and reports a fault as a PTXEMU_* code and a
// message.
//
//===----------------------------------------------------------------------===//

#include "Launch.h"
#include "Parser.h"

#include "ptxi/ptxemu.h"

#include <cstdio>
#include <cstdlib>

using namespace ptxi;

static void copyError(char *error, size_t size, const std::string &what) {
  if (error && size)
    snprintf(error, size, "%s", what.c_str());
}

extern "C" {

ptxemu_module *ptxemu_load(const char *text, char *error, size_t errorSize) {
  try {
    Parser parser(text);
    return parser.parse().release();
  } catch (const std::exception &e) {
    copyError(error, errorSize, e.what());
    return nullptr;
  }
}

void ptxemu_unload(ptxemu_module *module) { delete module; }

ptxemu_kernel *ptxemu_get(ptxemu_module *module, const char *name) {
  if (!module || !name)
    return nullptr;
  for (auto &k : module->kernels)
    if (k->name == name)
      return reinterpret_cast<ptxemu_kernel *>(k.get());
  return nullptr;
}

size_t ptxemu_param_sizes(const ptxemu_kernel *kernel, size_t *sizes,
                          size_t max) {
  if (!kernel)
    return 0;
  const auto &params = reinterpret_cast<const Kernel *>(kernel)->params;
  for (size_t i = 0; i < params.size() && i < max; ++i)
    sizes[i] = size_t(params[i].size);
  return params.size();
}

int ptxemu_launch(ptxemu_kernel *kernel, const unsigned grid[3],
                  const unsigned block[3], unsigned dynamicShared,
                  void **params, const ptxemu_range *allocations,
                  size_t numAllocations, char *error, size_t errorSize) {
  if (!kernel || !params)
    return PTXEMU_INVALID_VALUE;
  try {
    Launch launch(*reinterpret_cast<Kernel *>(kernel), grid, block,
                  dynamicShared, params, allocations, numAllocations);
    launch.run();
    if (getenv("PTXEMU_STATS"))
      fprintf(stderr, "%s\n", launch.statsLine().c_str());
    return PTXEMU_OK;
  } catch (const Fault &f) {
    copyError(error, errorSize, f.what);
    return f.code;
  } catch (const std::exception &e) {
    copyError(error, errorSize, e.what());
    return PTXEMU_LAUNCH_FAILED;
  }
}

} // extern "C"
