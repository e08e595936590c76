//===- MappedFile.h - A read-only memory map of a whole file -----*- C++
//-*-===//

#ifndef TFC_RUNTIME_FORMATS_MAPPEDFILE_H
#define TFC_RUNTIME_FORMATS_MAPPEDFILE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tfc {

/// Maps `path` read-only. An empty file maps to {nullptr, 0}. On failure
/// returns false and sets `error` to "<path>: <reason>".
bool mapFile(const std::string &path, const uint8_t *&data, size_t &size,
             std::string &error);
void unmapFile(const uint8_t *data, size_t size);
/// Drops this process's pages of a map from mapFile (its resident memory):
/// the bytes stay the same, read back from the file where touched again.
void releaseMappedPages(const uint8_t *data, size_t size);

/// Writes the byte ranges `chunks` one after another to `path` (created or
/// truncated). On failure returns false and sets `error` to
/// "<path>: <reason>".
bool writeFile(const std::string &path,
               const std::vector<std::pair<const void *, size_t>> &chunks,
               std::string &error);

} // namespace tfc

#endif // TFC_RUNTIME_FORMATS_MAPPEDFILE_H
