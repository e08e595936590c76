//===- Parser.h - PTX text to instructions ---------------------*- C++ -*-===//
//
// A module is parsed once: its module-scope declarations, then each
// `.entry` split into labels and statements, each statement into an
// instruction with decoded operands (Program.h). Anything outside the subset
// the interpreter runs is a ParseError naming the line.
//
// Parser.cpp reads declarations, kernels and operands, ParseInstruction.cpp
// opcodes and their modifiers, InstructionForms.cpp the forms of wgmma,
// cp.async.bulk, bar and mbarrier and their operands.
//
//===----------------------------------------------------------------------===//

#ifndef PTXI_LIB_PARSER_H
#define PTXI_LIB_PARSER_H

#include "Program.h"

#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace ptxi {

struct ParseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(int line, const std::string &what);

std::string trim(const std::string &s);
std::vector<std::string> split(const std::string &s, char sep);
/// A type suffix without its dot (`f32`, `bf16x2`, `pred`); false if `t`
/// is none.
bool parseType(const std::string &t, Type &out);

class Parser {
public:
  explicit Parser(const char *text);
  std::unique_ptr<ptxemu_module> parse();

private:
  std::string text_;
  std::vector<int> lines_;
  size_t pos_ = 0;
  std::vector<std::pair<std::string, int>> moduleShared_;
  struct GlobalDatum {
    std::string name;
    const char *data;
    size_t size;
  };
  std::vector<GlobalDatum> moduleGlobals_;
  /// Registers declared without a '%' (`.reg .pred p;` in the scoped
  /// blocks of inline asm): names that are not symbols.
  std::unordered_set<std::string> plainRegs_;

  void declareGlobal(ptxemu_module &module, const std::string &decl, int line);
  void skipSpace();
  int line() const;
  std::string statementHead();
  void untilSemicolonOrLine();
  std::string untilSemicolon();

  // `.shared .align 16 .b8 name[N];` (or `.extern .shared ... name[];`).
  /// A data declaration's parts before any initializer:
  /// `[.extern] .space [.align A] .TYPE name[N]` (N empty: unsized, count
  /// 0; no brackets: count 1; no type: elemBytes 0).
  struct DataDecl {
    uint64_t align = 1, elemBytes = 0, count = 1;
    bool isExtern = false, unsized = false;
    std::string name;
  };
  static DataDecl parseDataDecl(const std::string &decl, int line);
  static void declareData(Kernel &k, const std::string &decl, int line,
                          Space space, uint64_t &next);
  void declarePlainRegs(const std::string &decl);

  std::unique_ptr<Kernel> parseEntry();
  static void resolveSymbols(Kernel &k, Operand &o, const Inst &in);
  static int reg(std::unordered_map<std::string, int> &regs,
                 const std::string &name);
  Operand parseOperand(std::string s, int line,
                       std::unordered_map<std::string, int> &regs);
  Inst parseInst(const std::string &s, int line,
                 std::unordered_map<std::string, int> &regs);
  void parseTensorOperand(Inst &in, std::string s, int line,
                          std::unordered_map<std::string, int> &regs);
};

// The instructions whose opcode is a whole form rather than a list of
// modifiers (InstructionForms.cpp): each parse* reads the opcode's dot
// separated `parts` into `in`, each check* its operands once parsed.
void parseWgmma(Inst &in, const std::vector<std::string> &parts, int line);
void checkWgmmaOperands(Inst &in);
void parseTma(Inst &in, const std::vector<std::string> &parts, int line);
void checkTmaOperands(const Inst &in);
void parseBar(Inst &in, const std::vector<std::string> &parts, int line);
void checkBarOperands(const Inst &in);
void parseMbarrier(Inst &in, const std::vector<std::string> &parts, int line);
void checkMbarrierOperands(const Inst &in);

} // namespace ptxi

#endif // PTXI_LIB_PARSER_H
