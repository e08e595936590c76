//===- InputLimits.h - Refuse MLIR text the parser cannot take ------------===//
//
// MLIR's parser recurses once per level of nested attributes and types: a
// file of 10,000 nested brackets overflows the stack. The tools scan their
// input first and refuse nesting far deeper than any model's IR has.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_SUPPORT_INPUTLIMITS_H
#define TFC_SUPPORT_INPUTLIMITS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <string>

namespace tfc {

/// Nesting of brackets that the tools parse (real IR stays under 50).
constexpr unsigned kMaxNesting = 1000;

/// Empty when no bracket of `text` ((, [, {, <) opens below `maxDepth`
/// levels of others, outside comments and string literals; else
/// "NAME:LINE:COL: nesting deeper than N levels of brackets (attributes or
/// types): refused, the parser would run out of stack".
inline std::string checkNesting(llvm::StringRef text, llvm::StringRef name,
                                unsigned maxDepth = kMaxNesting) {
  unsigned depth = 0, line = 1;
  size_t lineStart = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') {
      ++line;
      lineStart = i + 1;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i + 1 < text.size() && text[i + 1] != '\n')
        ++i;
    } else if (c == '"') {
      while (++i < text.size() && text[i] != '"' && text[i] != '\n')
        if (text[i] == '\\')
          ++i;
    } else if (c == '(' || c == '[' || c == '{' || c == '<') {
      if (++depth > maxDepth)
        return (name + ":" + llvm::Twine(line) + ":" +
                llvm::Twine(i - lineStart + 1) + ": nesting deeper than " +
                llvm::Twine(maxDepth) +
                " levels of brackets (attributes or types): refused, the "
                "parser would run out of stack")
            .str();
    } else if ((c == ')' || c == ']' || c == '}' ||
                (c == '>' && (i == 0 || text[i - 1] != '-'))) &&
               depth > 0) {
      --depth;
    }
  }
  return "";
}

} // namespace tfc

#endif // TFC_SUPPORT_INPUTLIMITS_H
