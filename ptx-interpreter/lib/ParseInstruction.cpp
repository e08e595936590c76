//===- ParseInstruction.cpp - PTX opcodes and modifiers -------------------===//
//
// One statement into an instruction: its predicate, its opcode's name and
// dot-separated modifiers (types, state space, rounding, comparison, the
// shape of an mma) and its operands, split on top-level commas.
//
//===----------------------------------------------------------------------===//

#include "Parser.h"

namespace ptxi {

[[noreturn]] void fail(int line, const std::string &what) {
  throw ParseError("line " + std::to_string(line) + ": " + what);
}

std::string trim(const std::string &s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos)
    return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string &s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

bool parseType(const std::string &t, Type &out) {
  static const std::map<std::string, Type> kTypes = {
      {"b8", {Ty::B, 8}},         {"b16", {Ty::B, 16}},
      {"b32", {Ty::B, 32}},       {"b64", {Ty::B, 64}},
      {"u8", {Ty::U, 8}},         {"u16", {Ty::U, 16}},
      {"u32", {Ty::U, 32}},       {"u64", {Ty::U, 64}},
      {"s8", {Ty::S, 8}},         {"s16", {Ty::S, 16}},
      {"s32", {Ty::S, 32}},       {"s64", {Ty::S, 64}},
      {"f32", {Ty::F, 32}},       {"f64", {Ty::F, 64}},
      {"f16", {Ty::F16, 16}},     {"bf16", {Ty::BF16, 16}},
      {"f16x2", {Ty::F16x2, 32}}, {"bf16x2", {Ty::BF16x2, 32}},
      {"pred", {Ty::Pred, 1}}};
  auto it = kTypes.find(t);
  if (it == kTypes.end())
    return false;
  out = it->second;
  return true;
}

Inst Parser::parseInst(const std::string &s, int line,
                       std::unordered_map<std::string, int> &regs) {
  Inst in;
  in.line = line;
  in.text = s;
  std::string rest = s;
  if (rest[0] == '@') {
    size_t sp = rest.find_first_of(" \t");
    std::string p = rest.substr(1, sp - 1);
    in.predNeg = p[0] == '!';
    in.pred = reg(regs, in.predNeg ? p.substr(1) : p);
    rest = trim(rest.substr(sp));
  }
  size_t sp = rest.find_first_of(" \t");
  std::string opcode = rest.substr(0, sp);
  std::string operands = sp == std::string::npos ? "" : rest.substr(sp);
  std::vector<std::string> parts = split(opcode, '.');
  const std::string &name = parts[0];
  static const std::map<std::string, Op> kOps = {
      {"mov", Op::Mov},
      {"ld", Op::Ld},
      {"st", Op::St},
      {"add", Op::Add},
      {"sub", Op::Sub},
      {"mul", Op::Mul},
      {"mad", Op::Mad},
      {"div", Op::Div},
      {"rem", Op::Rem},
      {"min", Op::Min},
      {"max", Op::Max},
      {"and", Op::And},
      {"or", Op::Or},
      {"xor", Op::Xor},
      {"not", Op::Not},
      {"shl", Op::Shl},
      {"shr", Op::Shr},
      {"neg", Op::Neg},
      {"abs", Op::Abs},
      {"bfe", Op::Bfe},
      {"setp", Op::Setp},
      {"selp", Op::Selp},
      {"cvt", Op::Cvt},
      {"cvta", Op::Cvta},
      {"fma", Op::Fma},
      {"rcp", Op::Rcp},
      {"sqrt", Op::Sqrt},
      {"rsqrt", Op::Rsqrt},
      {"ex2", Op::Ex2},
      {"lg2", Op::Lg2},
      {"copysign", Op::Copysign},
      {"bra", Op::Bra},
      {"ret", Op::Ret},
      {"exit", Op::Ret},
      {"bar", Op::Bar},
      {"barrier", Op::Bar},
      {"shfl", Op::Shfl},
      {"mma", Op::Mma},
      {"ldmatrix", Op::Ldmatrix},
      {"stmatrix", Op::Stmatrix},
      {"cp", Op::CpAsync},
      {"vote", Op::Vote},
      {"elect", Op::Elect},
      {"wgmma", Op::Wgmma},
      {"fence", Op::Nop},
      {"membar", Op::Nop},
      {"atom", Op::Atom},
      {"mbarrier", Op::Mbarrier},
      {"setmaxnreg", Op::SetMaxNreg},
  };
  auto it = kOps.find(name);
  if (it == kOps.end())
    fail(line, "unsupported PTX instruction '" + opcode + "'");
  in.op = it->second;
  int types = 0;
  static const std::map<std::string, int> kCmp = {
      {"eq", EQ},   {"ne", NE},   {"lt", LT},   {"le", LE},   {"gt", GT},
      {"ge", GE},   {"lo", LO},   {"ls", LS},   {"hi", HI},   {"hs", HS},
      {"equ", EQU}, {"neu", NEU}, {"ltu", LTU}, {"leu", LEU}, {"gtu", GTU},
      {"geu", GEU}, {"num", NUM}, {"nan", NAN_}};
  bool wgmma = in.op == Op::Wgmma;
  if (wgmma)
    parseWgmma(in, parts, line);
  // fence.proxy.async (what wgmma needs between st.shared or cp.async
  // writing a tile and reading it) and fence.mbarrier_init (between
  // mbarrier.init and the barrier's use by other threads): nothing to
  // order here, threads run one at a time. No other fence.
  bool fence = name == "fence";
  // fence.{sc,acq_rel}.{cta,gpu,sys} and membar.{cta,gl,sys} (what a block
  // needs before and after an atomic arrival) order nothing here either.
  bool ordering =
      (fence && parts.size() == 3 &&
       (parts[1] == "sc" || parts[1] == "acq_rel") &&
       (parts[2] == "cta" || parts[2] == "gpu" || parts[2] == "sys")) ||
      (name == "membar" && parts.size() == 2 &&
       (parts[1] == "cta" || parts[1] == "gl" || parts[1] == "sys"));
  if (name == "membar" && !ordering)
    fail(line, "only membar.{cta,gl,sys} is supported");
  if (fence && !ordering &&
      !(parts.size() >= 3 && parts[1] == "proxy" && parts[2] == "async" &&
        (parts.size() == 3 ||
         (parts.size() == 4 &&
          (parts[3] == "shared::cta" || parts[3] == "global")))) &&
      opcode != "fence.mbarrier_init.release.cluster")
    fail(line, "only fence.proxy.async[.shared::cta|.global], "
               "fence.{sc,acq_rel}.{cta,gpu,sys} and "
               "fence.mbarrier_init.release.cluster are supported");
  bool tma = name == "cp" && parts.size() > 2 && parts[1] == "async" &&
             parts[2] == "bulk";
  if (tma)
    parseTma(in, parts, line);
  bool mbarrier = in.op == Op::Mbarrier;
  if (mbarrier)
    parseMbarrier(in, parts, line);
  // setmaxnreg.{inc,dec}.sync.aligned.u32: the block's register pool
  // (Launch::setMaxRegisters).
  bool setmaxnreg = name == "setmaxnreg";
  if (setmaxnreg &&
      (parts.size() != 5 || (parts[1] != "inc" && parts[1] != "dec") ||
       parts[2] != "sync" || parts[3] != "aligned" || parts[4] != "u32"))
    fail(line, "only setmaxnreg.{inc,dec}.sync.aligned.u32 is supported");
  bool bar = in.op == Op::Bar;
  if (bar)
    parseBar(in, parts, line);
  // atom[.sem][.scope][.global].add.{u32,s32,u64}: blocks and threads run
  // one at a time, so the read-modify-write is atomic as it stands.
  if (in.op == Op::Atom) {
    bool add = false, typed = false;
    for (size_t i = 1; i < parts.size(); ++i) {
      const std::string &m = parts[i];
      if (m == "add" && !add)
        add = true;
      else if (m == "global")
        in.space = Space::Global;
      else if (i + 1 == parts.size() &&
               (m == "u32" || m == "s32" || m == "u64"))
        typed = parseType(m, in.type);
      else if (m != "relaxed" && m != "acq_rel" && m != "acquire" &&
               m != "release" && m != "cta" && m != "gpu" && m != "sys")
        fail(line, "only atom[.sem][.scope][.global].add.{u32,s32,u64} is "
                   "supported, not ." +
                       m);
    }
    if (!add || !typed)
      fail(line, "only atom[.sem][.scope][.global].add.{u32,s32,u64} is "
                 "supported");
  }
  bool whole = wgmma || fence || ordering || tma || mbarrier || setmaxnreg ||
               bar || in.op == Op::Atom;
  for (size_t i = whole ? parts.size() : 1; i < parts.size(); ++i) {
    const std::string &m = parts[i];
    Type t;
    if (parseType(m, t) && !(in.op == Op::Mma && i < parts.size() - 4)) {
      (types++ == 0 ? in.type : in.type2) = t;
      if (in.op == Op::Mma && (t.kind == Ty::BF16))
        in.bf16 = true;
      continue;
    }
    if (in.op == Op::Setp && kCmp.count(m) && i == 1) {
      in.cmp = kCmp.at(m);
    } else if (m == "global") {
      in.space = Space::Global;
    } else if (m == "shared" || m == "shared::cta") {
      in.space = Space::Shared;
    } else if (m == "param") {
      in.space = Space::Param;
    } else if (m == "local") {
      in.space = Space::Local;
    } else if (m == "to") {
      in.toSpace = true;
    } else if (m == "v2" || m == "v4") {
      continue; // the vector operand says how many
    } else if (m == "rn" || m == "rz" || m == "rm" || m == "rp") {
      in.rounding = m == "rn" ? 0 : m == "rz" ? 1 : m == "rm" ? 2 : 3;
    } else if (m == "rni" || m == "rzi" || m == "rmi" || m == "rpi") {
      in.roundInt = true;
      in.rounding = m == "rni" ? 0 : m == "rzi" ? 1 : m == "rmi" ? 2 : 3;
    } else if (m == "ftz") {
      in.ftz = true;
    } else if (m == "sat") {
      in.sat = true;
    } else if (m == "NaN") {
      in.nan = true;
    } else if (m == "lo") {
      in.mulMode = 0;
    } else if (m == "hi") {
      in.mulMode = 1;
    } else if (m == "wide") {
      in.mulMode = 2;
    } else if (in.op == Op::Setp && (m == "and" || m == "or" || m == "xor")) {
      in.combine = m == "and" ? 1 : m == "or" ? 2 : 3;
    } else if (in.op == Op::Shfl &&
               (m == "up" || m == "down" || m == "bfly" || m == "idx")) {
      in.shflMode = m == "up" ? 0 : m == "down" ? 1 : m == "bfly" ? 2 : 3;
    } else if (in.op == Op::Vote &&
               (m == "all" || m == "any" || m == "uni" || m == "ballot")) {
      in.shflMode = m == "all" ? 0 : m == "any" ? 1 : m == "uni" ? 2 : 3;
    } else if ((in.op == Op::Ldmatrix || in.op == Op::Stmatrix) &&
               (m == "x1" || m == "x2" || m == "x4")) {
      in.matrices = m[1] - '0';
    } else if (m == "trans") {
      in.trans = true;
    } else if (in.op == Op::Mma && (m == "m16n8k16" || m == "m16n8k8")) {
      in.mmaK = m == "m16n8k16" ? 16 : 8;
    } else if (in.op == Op::Mma && (m == "row" || m == "col")) {
      if ((i == 4 && m != "row") || (i == 5 && m != "col"))
        fail(line, "only mma.sync .row.col is supported");
    } else if (in.op == Op::CpAsync) {
      if (m == "async" || m == "ca" || m == "cg")
        continue;
      if (m == "commit_group")
        in.op = Op::CpAsyncCommit;
      else if (m == "wait_group" || m == "wait_all")
        in.op = Op::CpAsyncWait, in.waitAll = m == "wait_all";
      else if (m.rfind("L2::", 0) != 0)
        fail(line, "unsupported cp modifier '." + m + "'");
    } else if (m == "approx" || m == "full" || m == "uni" || m == "sync" ||
               m == "aligned" || m == "nc" || m == "ca" || m == "cg" ||
               m == "cs" || m == "lu" || m == "cv" || m == "m8n8" ||
               m == "volatile" || m == "relaxed" || m == "weak" ||
               m.rfind("L1::", 0) == 0 || m.rfind("L2::", 0) == 0) {
      continue;
    } else if (in.op == Op::Ld || in.op == Op::St || in.op == Op::Cvta) {
      fail(line, "unsupported state space or modifier '." + m + "'");
    } else {
      fail(line, "unsupported modifier '." + m + "' of " + name);
    }
  }
  if (in.op == Op::Mma) {
    if (parts.size() != 10 || parts[6] != "f32" || parts[9] != "f32" ||
        parts[7] != parts[8] || (parts[7] != "f16" && parts[7] != "bf16"))
      fail(line, "only mma.sync .f32.{f16,bf16}.{f16,bf16}.f32 is supported");
    in.bf16 = parts[7] == "bf16";
  }
  // Operands: split on top-level commas.
  std::vector<std::string> list;
  std::string cur;
  int nest = 0;
  for (char c : operands) {
    if (c == '{' || c == '[')
      ++nest;
    if (c == '}' || c == ']')
      --nest;
    if (c == ',' && nest == 0) {
      list.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!trim(cur).empty())
    list.push_back(cur);
  for (size_t i = 0; i < list.size(); ++i) {
    if (tma && i == (in.op == Op::TmaStore ? 0u : 1u) &&
        in.op != Op::BulkCommit && in.op != Op::BulkWait)
      parseTensorOperand(in, list[i], line, regs);
    else
      in.ops.push_back(parseOperand(list[i], line, regs));
  }
  if (wgmma)
    checkWgmmaOperands(in);
  if (tma)
    checkTmaOperands(in);
  if (mbarrier)
    checkMbarrierOperands(in);
  if (bar)
    checkBarOperands(in);
  if (in.op == Op::Ldmatrix || in.op == Op::Stmatrix) {
    bool st = in.op == Op::Stmatrix;
    bool ok = in.ops.size() == 2 && in.ops[st ? 0 : 1].kind == Operand::Addr;
    const Operand *v = ok ? &in.ops[st ? 1 : 0] : nullptr;
    ok =
        ok && v->kind == Operand::Vec && v->elems.size() == (size_t)in.matrices;
    for (size_t i = 0; ok && i < v->elems.size(); ++i)
      ok = v->elems[i].kind == Operand::Reg;
    if (!ok)
      fail(line, name + " .x" + std::to_string(in.matrices) + " takes " +
                     (st ? "[address], {" : "{") + std::to_string(in.matrices) +
                     " registers}" + (st ? "" : ", [address]"));
  }
  if (setmaxnreg && (in.ops.size() != 1 || in.ops[0].kind != Operand::Imm))
    fail(line, "setmaxnreg takes one immediate");
  if (setmaxnreg) {
    int64_t count = int64_t(in.ops[0].imm);
    if (count < 24 || count > 256 || count % 8)
      fail(line, "setmaxnreg to " + std::to_string(count) +
                     " registers: the count must be 24 to 256, a multiple "
                     "of 8");
    in.decrease = parts[1] == "dec";
  }
  return in;
}

} // namespace ptxi
