//===- RunEntry.h - A model library's run function --------------*- C++ -*-===//

#ifndef TFC_LIB_TARGET_RUNENTRY_H
#define TFC_LIB_TARGET_RUNENTRY_H

#include "tfc/Target/Manifest.h"

#include "llvm/IR/Function.h"

#include <string>

namespace tfc {

/// Adds `void name(void **buffers)` (tfc_model_run's type), which unpacks
/// one pointer per argument and result into the memref calling convention of
/// the manifest's entry; null (and `error`) when that does not fit.
///
/// The entry's body moves into the new function, its arguments replaced by
/// what the buffers give (a load per buffer; offsets, sizes and strides are
/// constants), and the entry is erased. A call of the entry instead, with
/// five or more lowered arguments per tensor, took time and memory quadratic
/// in the number of tensors in two passes that run before the inliner (which
/// merged the two where the body was small): CalledValuePropagation revisits
/// the call as the state of each argument changes, merging all of them each
/// time, and PostOrderFunctionAttrs makes a new attribute list of every
/// argument for each attribute it infers. A function of 4,000 tensor arguments
/// (20,005 lowered) took 14 s and 1.4 GB to optimise, 8,000 70 s and 5.2 GB;
/// moved, 0.02 s and 0.03 s. The call stays where the entry cannot move: where
/// something else calls it, where it returns a value, or where an argument is
/// `noalias` (inlining turns that into alias scopes, which the moved body would
/// not have).
llvm::Function *addRunEntry(llvm::Module &mod, const Manifest &manifest,
                            llvm::StringRef name, std::string &error);

} // namespace tfc

#endif // TFC_LIB_TARGET_RUNENTRY_H
