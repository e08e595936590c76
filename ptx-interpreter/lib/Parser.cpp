//===- Parser.cpp - PTX declarations, kernels and operands ----------------===//
//
// See Parser.h. Comments are stripped first, keeping each character's line;
// a kernel's body is split into labels and statements, its nested `{ }`
// blocks (inline assembly's) flattened into scopes for labels; symbols get
// their addresses once the kernel's declarations are all read.
//
//===----------------------------------------------------------------------===//

#include "Parser.h"

#include <algorithm>
#include <cstring>

namespace ptxi {

Parser::Parser(const char *text) {
  // Strip comments, keep line numbers for each character.
  std::string src(text);
  int line = 1;
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '/' && i + 1 < src.size() && src[i + 1] == '/') {
      while (i < src.size() && src[i] != '\n')
        ++i;
    } else if (src[i] == '/' && i + 1 < src.size() && src[i + 1] == '*') {
      i += 2;
      while (i + 1 < src.size() && !(src[i] == '*' && src[i + 1] == '/')) {
        if (src[i] == '\n')
          ++line;
        ++i;
      }
      ++i;
      continue;
    }
    if (i >= src.size())
      break;
    text_ += src[i];
    lines_.push_back(line);
    if (src[i] == '\n')
      ++line;
  }
}

std::unique_ptr<ptxemu_module> Parser::parse() {
  auto module = std::make_unique<ptxemu_module>();
  bool sawVersion = false;
  // Module-scope statements end with ';' or are '.entry ... { ... }'.
  while (skipSpace(), pos_ < text_.size()) {
    int line = lines_[pos_];
    std::string head = statementHead();
    if (head.rfind(".version", 0) == 0) {
      sawVersion = true;
      untilSemicolonOrLine();
    } else if (head.rfind(".target", 0) == 0 ||
               head.rfind(".address_size", 0) == 0) {
      untilSemicolonOrLine();
    } else if (head.find(".entry") != std::string::npos) {
      if (!sawVersion)
        fail(line, "not a PTX module (no .version)");
      module->kernels.push_back(parseEntry());
    } else if (head.find(".func") != std::string::npos) {
      fail(line, "device functions (.func) are not supported");
    } else if (head.find(".shared") != std::string::npos) {
      std::string decl = untilSemicolon();
      moduleShared_.push_back({decl, line});
    } else if (head.rfind(".global", 0) == 0) {
      declareGlobal(*module, untilSemicolon(), line);
    } else if (head.find(".const") != std::string::npos) {
      fail(line, "module-scope .const data is not supported");
    } else {
      fail(line, "unexpected '" + head.substr(0, 40) + "'");
    }
  }
  if (!sawVersion)
    throw ParseError("not a PTX module (no .version)");
  return module;
}

/// `.global [.align A] .TYPE name[N] [= {v, ...}];` (or one value, or no
/// initializer: zeros) at module scope: bytes the module owns, which every
/// kernel of it reads and writes as device memory. Values are integers
/// (decimal or hex) or 0f/0d bit patterns.
void Parser::declareGlobal(ptxemu_module &module, const std::string &decl,
                           int line) {
  size_t eq = decl.find('=');
  std::string init;
  if (eq != std::string::npos)
    init = trim(decl.substr(eq + 1));
  DataDecl d = parseDataDecl(decl.substr(0, eq), line);
  const std::string &name = d.name;
  std::vector<uint64_t> values;
  if (!init.empty()) {
    if (init.front() == '{')
      init = init.substr(1, init.rfind('}') - 1);
    for (const std::string &v : split(init, ',')) {
      std::string x = trim(v);
      bool bits = x.size() > 2 && x[0] == '0' &&
                  (x[1] == 'f' || x[1] == 'F' || x[1] == 'd' || x[1] == 'D');
      if (x.empty() || (!bits && !isdigit((unsigned char)x[0]) && x[0] != '-'))
        fail(line, "cannot read the initializer of '" + name + "'");
      values.push_back(bits          ? std::stoull(x.substr(2), nullptr, 16)
                       : x[0] == '-' ? (uint64_t)std::stoll(x, nullptr, 0)
                                     : std::stoull(x, nullptr, 0));
    }
  }
  uint64_t count = d.unsized ? values.size() : d.count;
  uint64_t elemBytes = d.elemBytes;
  if (!elemBytes || values.size() > count || count > (1u << 24))
    fail(line, "cannot read the declaration '" + decl + "'");
  size_t bytes = size_t(count * elemBytes);
  module.globalData.push_back(std::make_unique<char[]>(bytes + 1));
  char *data = module.globalData.back().get();
  memset(data, 0, bytes + 1);
  for (size_t i = 0; i < values.size(); ++i)
    memcpy(data + i * elemBytes, &values[i], elemBytes); // little-endian
  moduleGlobals_.push_back({name, data, bytes});
}

void Parser::skipSpace() {
  while (pos_ < text_.size() && isspace((unsigned char)text_[pos_]))
    ++pos_;
}

int Parser::line() const {
  return lines_[std::min(pos_, lines_.size() ? lines_.size() - 1 : 0)];
}

std::string Parser::statementHead() {
  size_t e = text_.find_first_of(";{(\n", pos_);
  return text_.substr(pos_, e == std::string::npos ? e : e - pos_);
}

void Parser::untilSemicolonOrLine() {
  size_t e = text_.find_first_of(";\n", pos_);
  pos_ = e == std::string::npos ? text_.size() : e + 1;
}

std::string Parser::untilSemicolon() {
  size_t e = text_.find(';', pos_);
  if (e == std::string::npos)
    fail(line(), "missing ';'");
  std::string s = text_.substr(pos_, e - pos_);
  pos_ = e + 1;
  return trim(s);
}

Parser::DataDecl Parser::parseDataDecl(const std::string &decl, int line) {
  std::vector<std::string> words;
  std::string w;
  for (char c : decl) {
    if (isspace((unsigned char)c)) {
      if (!w.empty())
        words.push_back(w);
      w.clear();
    } else {
      w += c;
    }
  }
  if (!w.empty())
    words.push_back(w);
  DataDecl d;
  for (size_t i = 0; i < words.size(); ++i) {
    Type t;
    if (words[i] == ".extern")
      d.isExtern = true;
    else if (words[i] == ".align" && i + 1 < words.size())
      d.align = std::stoull(words[++i]);
    else if (words[i][0] == '.' && parseType(words[i].substr(1), t))
      d.elemBytes = std::max(1, t.bits / 8);
    else if (words[i][0] != '.')
      d.name = words[i];
  }
  size_t br = d.name.find('[');
  if (br != std::string::npos) {
    std::string n = d.name.substr(br + 1, d.name.find(']') - br - 1);
    d.unsized = n.empty();
    d.count = d.unsized ? 0 : std::stoull(n);
    d.name = d.name.substr(0, br);
  }
  if (d.name.empty())
    fail(line, "cannot read the declaration '" + decl + "'");
  return d;
}

void Parser::declareData(Kernel &k, const std::string &decl, int line,
                         Space space, uint64_t &next) {
  DataDecl d = parseDataDecl(decl, line);
  if (d.isExtern) {
    k.dynamicSharedAlign = std::max(k.dynamicSharedAlign, d.align);
    k.symbols[d.name] = {Space::Shared, ~0ull, 0}; // placed at launch
    return;
  }
  uint64_t bytes = d.count * std::max<uint64_t>(d.elemBytes, 1);
  next = alignUp(next, d.align);
  k.symbols[d.name] = {space, next, bytes};
  next += bytes;
}

// `.reg .pred p, q<2>;`: remembers p, q0 and q1 (names with a '%' read
// as registers anyway). One register file per kernel: inline asm blocks
// that each declare `p` share it, which is harmless as each writes it
// before reading it.
void Parser::declarePlainRegs(const std::string &decl) {
  std::string names, spaced = decl; // names: after the .reg and type
  std::replace(spaced.begin(), spaced.end(), '\t', ' ');
  for (const std::string &word : split(spaced, ' '))
    if (!trim(word).empty() && trim(word)[0] != '.')
      names += trim(word);
  for (std::string name : split(names, ',')) {
    if (name.empty() || name[0] == '%')
      continue;
    size_t lt = name.find('<');
    if (lt == std::string::npos) {
      plainRegs_.insert(name);
      continue;
    }
    int count = std::atoi(name.c_str() + lt + 1);
    for (int i = 0; i < count; ++i)
      plainRegs_.insert(name.substr(0, lt) + std::to_string(i));
  }
}

std::unique_ptr<Kernel> Parser::parseEntry() {
  auto k = std::make_unique<Kernel>();
  plainRegs_.clear();
  size_t open = text_.find('(', pos_);
  std::string head = trim(text_.substr(pos_, open - pos_));
  k->name = trim(head.substr(head.rfind(' ') + 1));
  size_t close = text_.find(')', open);
  if (open == std::string::npos || close == std::string::npos)
    fail(line(), "cannot read the parameters of an .entry");
  for (std::string p : split(text_.substr(open + 1, close - open - 1), ',')) {
    p = trim(p);
    if (p.empty())
      continue;
    std::vector<std::string> words;
    for (auto &w : split(p, ' '))
      if (!trim(w).empty())
        words.push_back(trim(w));
    uint64_t size = 0, align = 0;
    std::string name;
    for (size_t i = 1; i < words.size(); ++i) {
      Type t;
      if (words[i] == ".align" && i + 1 < words.size())
        align = std::stoull(words[++i]);
      else if (words[i] == ".ptr")
        continue;
      else if (words[i][0] == '.' && parseType(words[i].substr(1), t))
        size = std::max(1, t.bits / 8);
      else if (words[i][0] != '.')
        name = words[i];
    }
    uint64_t count = 1;
    size_t br = name.find('[');
    if (br != std::string::npos) {
      count = std::stoull(name.substr(br + 1));
      name = name.substr(0, br);
    } else {
      align = size; // .ptr .align N is about the pointee
    }
    k->paramBytes = alignUp(k->paramBytes, std::max<uint64_t>(align, 1));
    k->params.push_back({name, k->paramBytes, size * count});
    k->symbols[name] = {Space::Param, k->paramBytes, size * count};
    k->paramBytes += size * count;
  }
  pos_ = close + 1;
  size_t brace = text_.find('{', pos_);
  if (brace == std::string::npos)
    fail(line(), "an .entry without a body");
  // Performance directives between the parameters and the body:
  // .maxntid x, y, z (or .reqntid) bounds the threads per block.
  std::string directives = text_.substr(pos_, brace - pos_);
  for (const char *d : {".maxntid", ".reqntid"})
    if (size_t at = directives.find(d); at != std::string::npos) {
      std::string dims = directives.substr(at + strlen(d));
      dims = dims.substr(0, dims.find_first_of("\n."));
      k->maxThreads = 1;
      for (const std::string &x : split(dims, ',')) {
        std::string n = trim(x);
        if (n.empty() || n.size() > 4 ||
            n.find_first_not_of("0123456789") != std::string::npos)
          fail(line(), std::string("malformed ") + d + " directive");
        k->maxThreads *= unsigned(std::stoul(n));
      }
    }
  pos_ = brace + 1;
  uint64_t shared = 0, local = 0;
  for (auto &[decl, l] : moduleShared_)
    declareData(*k, decl, l, Space::Shared, shared);
  for (const GlobalDatum &g : moduleGlobals_) {
    k->symbols[g.name] = {Space::Global, uint64_t(uintptr_t(g.data)), g.size};
    k->globalData.push_back({g.data, g.size});
  }
  std::unordered_map<std::string, int> regs;
  // Labels by name and the scope block that declares them: nested blocks
  // ({ ... } in a body, as inline assembly writes them) are flattened,
  // and a label is visible in its block and the blocks inside it (one
  // name may label a statement in each of several blocks).
  std::map<std::pair<std::string, int>, int> labels;
  std::vector<int> parentScope = {-1}; // scope 0: the body
  std::vector<int> branchScope;        // of each instruction
  struct Statement {
    std::string text;
    int line, scope;
  };
  std::vector<Statement> statements;
  // Split the body into labels and statements.
  int scope = 0;
  std::string cur;
  int curLine = line();
  auto isLabel = [](const std::string &name) {
    if (name.empty() ||
        !(isalpha((unsigned char)name[0]) || name[0] == '$' || name[0] == '_'))
      return false;
    for (char c : name)
      if (!isalnum((unsigned char)c) && c != '_' && c != '$')
        return false;
    return true;
  };
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == '{' && trim(cur).empty()) {
      parentScope.push_back(scope);
      scope = (int)parentScope.size() - 1;
      ++pos_;
      continue;
    }
    if (c == '}' && trim(cur).empty()) {
      ++pos_;
      scope = parentScope[scope];
      if (scope < 0)
        break;
      continue;
    }
    if (trim(cur).empty())
      curLine = lines_[pos_];
    if (c == ';') {
      statements.push_back({trim(cur), curLine, scope});
      cur.clear();
    } else if (c == ':' && isLabel(trim(cur)) &&
               text_.compare(pos_, 2, "::") != 0) {
      statements.push_back({trim(cur) + ":", curLine, scope});
      cur.clear();
    } else {
      cur += c == '\n' ? ' ' : c;
    }
    ++pos_;
  }
  for (auto &[s, l, sc] : statements) {
    if (s.empty())
      continue;
    if (s.back() == ':') {
      if (!labels
               .emplace(std::make_pair(s.substr(0, s.size() - 1), sc),
                        (int)k->code.size())
               .second)
        fail(l, "label '" + s.substr(0, s.size() - 1) +
                    "' declared twice in one block");
      continue;
    }
    if (s.rfind(".reg", 0) == 0) {
      declarePlainRegs(s); // registers are numbered on first use
      continue;
    }
    if (s.rfind(".shared", 0) == 0 || s.rfind(".extern", 0) == 0) {
      declareData(*k, s, l, Space::Shared, shared);
      continue;
    }
    if (s.rfind(".local", 0) == 0) {
      declareData(*k, s, l, Space::Local, local);
      continue;
    }
    if (s[0] == '.')
      continue; // .pragma and the like
    k->code.push_back(parseInst(s, l, regs));
    branchScope.push_back(sc);
  }
  // Resolve labels: the branch's block first, then the ones around it.
  for (size_t i = 0; i < k->code.size(); ++i) {
    Inst &in = k->code[i];
    if (in.op != Op::Bra)
      continue;
    std::string label = trim(in.text.substr(in.text.find_last_of(" \t") + 1));
    auto it = labels.end();
    for (int sc = branchScope[i]; sc >= 0 && it == labels.end();
         sc = parentScope[sc])
      it = labels.find({label, sc});
    if (it == labels.end())
      fail(in.line, "unknown label '" + label + "'");
    in.target = it->second;
    in.ops.clear(); // the label, not an operand
  }
  Inst ret;
  ret.op = Op::Ret;
  ret.text = "(end of kernel)";
  k->code.push_back(ret);
  k->numRegs = (int)regs.size() + 1;
  k->dynamicSharedOffset = alignUp(shared, k->dynamicSharedAlign);
  for (auto &[name, sym] : k->symbols)
    if (sym.space == Space::Shared && sym.offset == ~0ull)
      sym.offset = k->dynamicSharedOffset;
  // Symbol operands were recorded by name; now they have addresses.
  for (auto &in : k->code) {
    for (auto &o : in.ops)
      resolveSymbols(*k, o, in);
    in.stat = statOf(in);
  }
  k->localBytes = local;
  return k;
}

void Parser::resolveSymbols(Kernel &k, Operand &o, const Inst &in) {
  for (auto &e : o.elems)
    resolveSymbols(k, e, in);
  if (o.symbol.empty())
    return;
  auto sym = k.symbols.find(o.symbol);
  if (sym == k.symbols.end())
    fail(in.line, "unknown symbol '" + o.symbol + "'");
  o.imm += sym->second.offset;
  o.symSpace = sym->second.space;
}

int Parser::reg(std::unordered_map<std::string, int> &regs,
                const std::string &name) {
  auto it = regs.find(name);
  if (it != regs.end())
    return it->second;
  int id = (int)regs.size() + 1; // 0 is a sink
  regs[name] = id;
  return id;
}

Operand Parser::parseOperand(std::string s, int line,
                             std::unordered_map<std::string, int> &regs) {
  s = trim(s);
  Operand o;
  if (s.empty())
    fail(line, "empty operand");
  if (s[0] == '{') {
    o.kind = Operand::Vec;
    for (auto &e : split(s.substr(1, s.rfind('}') - 1), ','))
      o.elems.push_back(parseOperand(e, line, regs));
    return o;
  }
  if (s[0] == '[') {
    o.kind = Operand::Addr;
    std::string inner = trim(s.substr(1, s.rfind(']') - 1));
    size_t plus = inner.find_first_of("+-", 1);
    std::string base = trim(inner.substr(0, plus));
    if (plus != std::string::npos) {
      std::string off = trim(inner.substr(plus + 1));
      int64_t v = std::stoll(off, nullptr, 0);
      o.imm = (uint64_t)(inner[plus] == '-' ? -v : v);
    }
    if (base[0] == '%') {
      o.reg = reg(regs, base);
    } else if (isdigit((unsigned char)base[0])) {
      o.imm += std::stoull(base, nullptr, 0);
    } else {
      o.symbol = base;
    }
    return o;
  }
  if (s[0] == '%') {
    static const std::map<std::string, Special> kSpecial = {
        {"%tid.x", Special::TidX},       {"%tid.y", Special::TidY},
        {"%tid.z", Special::TidZ},       {"%ntid.x", Special::NtidX},
        {"%ntid.y", Special::NtidY},     {"%ntid.z", Special::NtidZ},
        {"%ctaid.x", Special::CtaidX},   {"%ctaid.y", Special::CtaidY},
        {"%ctaid.z", Special::CtaidZ},   {"%nctaid.x", Special::NctaidX},
        {"%nctaid.y", Special::NctaidY}, {"%nctaid.z", Special::NctaidZ},
        {"%laneid", Special::LaneId},    {"%warpid", Special::WarpId}};
    auto it = kSpecial.find(s);
    if (it != kSpecial.end()) {
      o.kind = Operand::Spec;
      o.spec = it->second;
      return o;
    }
    o.kind = Operand::Reg;
    size_t bar = s.find('|');
    o.reg = reg(regs, trim(s.substr(0, bar)));
    if (bar != std::string::npos)
      o.reg2 = reg(regs, trim(s.substr(bar + 1)));
    return o;
  }
  if (s == "_") {
    o.kind = Operand::Reg;
    o.reg = 0;
    return o;
  }
  if (plainRegs_.count(s)) {
    o.kind = Operand::Reg;
    o.reg = reg(regs, s);
    return o;
  }
  if (s[0] == '$') {
    o.kind = Operand::Label;
    return o;
  }
  o.kind = Operand::Imm;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'f' || s[1] == 'F')) {
    o.imm = std::stoull(s.substr(2), nullptr, 16);
  } else if (s.size() > 2 && s[0] == '0' && (s[1] == 'd' || s[1] == 'D')) {
    o.imm = std::stoull(s.substr(2), nullptr, 16);
  } else if (isdigit((unsigned char)s[0]) || s[0] == '-') {
    o.imm = s[0] == '-' ? (uint64_t)std::stoll(s, nullptr, 0)
                        : std::stoull(s, nullptr, 0);
  } else {
    // A symbol's address (mov.b64 %rd, tile).
    o.kind = Operand::Addr;
    o.symbol = s;
  }
  return o;
}

} // namespace ptxi
