//===- ElfCheck.cpp - Refuse truncated shared libraries before dlopen -----===//

#include "ElfCheck.h"

#include <elf.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

namespace tfc {

std::string checkElfExtents(const std::string &path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    return "";
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  Elf64_Ehdr eh;
  in.seekg(0);
  if (size < sizeof(eh) || !in.read(reinterpret_cast<char *>(&eh), sizeof(eh)))
    return "";
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64)
    return ""; // not ours to judge: dlopen reports it
  auto past = [&](uint64_t offset, uint64_t bytes) {
    return offset > size || bytes > size - offset;
  };
  char buf[160];
  if (eh.e_phentsize != sizeof(Elf64_Phdr) ||
      past(eh.e_phoff, uint64_t(eh.e_phnum) * sizeof(Elf64_Phdr)))
    return "truncated or corrupt ELF file (program headers past the end)";
  if (eh.e_shnum &&
      past(eh.e_shoff, uint64_t(eh.e_shnum) * uint64_t(eh.e_shentsize))) {
    std::snprintf(buf, sizeof(buf),
                  "truncated ELF file (%llu bytes; its section headers end "
                  "at byte %llu)",
                  static_cast<unsigned long long>(size),
                  static_cast<unsigned long long>(
                      eh.e_shoff + uint64_t(eh.e_shnum) * eh.e_shentsize));
    return buf;
  }
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  in.seekg(static_cast<std::streamoff>(eh.e_phoff));
  if (!in.read(reinterpret_cast<char *>(ph.data()),
               std::streamsize(ph.size() * sizeof(Elf64_Phdr))))
    return "truncated or corrupt ELF file (unreadable program headers)";
  for (const Elf64_Phdr &p : ph)
    if (p.p_type == PT_LOAD && past(p.p_offset, p.p_filesz)) {
      std::snprintf(buf, sizeof(buf),
                    "truncated ELF file (%llu bytes; a loadable segment ends "
                    "at byte %llu)",
                    static_cast<unsigned long long>(size),
                    static_cast<unsigned long long>(p.p_offset + p.p_filesz));
      return buf;
    }
  return "";
}

} // namespace tfc
