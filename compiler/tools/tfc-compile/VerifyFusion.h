//===- VerifyFusion.h - Run the fused and unfused builds side by side -----===//

#ifndef TFC_TOOLS_TFC_COMPILE_VERIFYFUSION_H
#define TFC_TOOLS_TFC_COMPILE_VERIFYFUSION_H

#include <string>

namespace tfc {

/// Loads both model libraries through the runtime, binds the same seeded
/// random inputs and weights to each, runs them and compares every output
/// (relative L2 error at most 1e-4 for f32, 5e-3 for f16/bf16, exact for
/// integers). Returns whether they agree; `report` is one line either way.
bool verifyFusedAgainstUnfused(const std::string &fusedLib,
                               const std::string &unfusedLib, unsigned seed,
                               std::string &report);

} // namespace tfc

#endif // TFC_TOOLS_TFC_COMPILE_VERIFYFUSION_H
