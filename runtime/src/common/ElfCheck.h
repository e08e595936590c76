//===- ElfCheck.h - Refuse truncated shared libraries before dlopen -------===//

#ifndef TFC_RUNTIME_ELFCHECK_H
#define TFC_RUNTIME_ELFCHECK_H

#include <string>

namespace tfc {

/// Checks that the file at `path`, when it is a 64-bit ELF file, holds every
/// byte its headers point at: dlopen maps a truncated library without
/// complaint and the process dies of SIGBUS when the loader touches the
/// missing pages. Returns an empty string when the file is whole (or not
/// ELF: dlopen then reports it), else what is wrong, in a few words.
std::string checkElfExtents(const std::string &path);

} // namespace tfc

#endif // TFC_RUNTIME_ELFCHECK_H
