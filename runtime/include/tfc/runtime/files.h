//===- files.h - Outputs that would overwrite a tool's inputs -------------===//
//
// A tool that writes a file the same run reads (its weights, an input, the
// model library) destroys that input: `tfc-run m.so --weights W --output W`
// would replace a checkpoint by a small .npy. The tools name what they read
// and write, and refuse a run whose outputs meet its inputs (the same file,
// also through links or under another name) or each other, before they
// write anything.
//
// C++ (tfcrt_formats); includes nothing from LLVM or MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_FILES_H
#define TFC_RUNTIME_FILES_H

#include <string>
#include <vector>

namespace tfc {

/// A file a tool reads or writes, as the user named it: what it is ("the
/// model", "--weights", "--output 1") and its path.
struct ToolFile {
  std::string what;
  std::string path;
};

/// Whether `a` and `b` name the same file: one inode where both exist (links
/// followed), else the same canonical directory and name.
bool sameFile(const std::string &a, const std::string &b);

/// Empty when no output is one of the inputs or another output; else one
/// line naming both: "--output y.npy is the same file as --weights
/// w.safetensors (writing it would destroy that input)".
std::string checkOutputs(const std::vector<ToolFile> &inputs,
                         const std::vector<ToolFile> &outputs);

} // namespace tfc

#endif // TFC_RUNTIME_FILES_H
