//===- InstructionForms.cpp - wgmma, cp.async.bulk, bar, mbarrier forms ---===//
//
// The instructions whose every modifier is part of one form the
// interpreter implements: wgmma's, the bulk tensor copies', the barriers'
// and the mbarriers'. Each form is checked whole, and its operands once
// they are parsed.
//
//===----------------------------------------------------------------------===//

#include "Parser.h"

namespace ptxi {

// wgmma.{fence,commit_group,wait_group}.sync.aligned and
// wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}.{f16,bf16}, no
// other form (.sp, .satfinite, other types).
void parseWgmma(Inst &in, const std::vector<std::string> &parts, int line) {
  std::string kind = parts.size() > 1 ? parts[1] : "";
  bool aligned =
      parts.size() >= 4 && parts[2] == "sync" && parts[3] == "aligned";
  if (kind == "fence" || kind == "commit_group" || kind == "wait_group") {
    if (!aligned || parts.size() != 4)
      fail(line, "only wgmma." + kind + ".sync.aligned is supported");
    in.op = kind == "fence"          ? Op::WgmmaFence
            : kind == "commit_group" ? Op::WgmmaCommit
                                     : Op::WgmmaWait;
    return;
  }
  if (kind != "mma_async" || !aligned || parts.size() != 8 ||
      parts[5] != "f32" || parts[6] != parts[7] ||
      (parts[6] != "f16" && parts[6] != "bf16"))
    fail(line, "only wgmma.mma_async.sync.aligned.m64nNk16.f32."
               "{f16,bf16}.{f16,bf16} is supported");
  const std::string &shape = parts[4];
  int n = 0;
  if (shape.size() > 7 && shape.size() <= 10 && shape.rfind("m64n", 0) == 0 &&
      shape.compare(shape.size() - 3, 3, "k16") == 0) {
    std::string digits = shape.substr(4, shape.size() - 7);
    if (digits.find_first_not_of("0123456789") == std::string::npos)
      n = std::stoi(digits);
  }
  if (n < 8 || n > 256 || n % 8)
    fail(line, "unsupported wgmma shape '." + shape +
                   "' (m64nNk16, N a multiple of 8 up to 256)");
  in.op = Op::Wgmma;
  in.wgmmaN = n;
  in.bf16 = parts[6] == "bf16";
}

// Operands: wait_group N; mma_async {d}, {a0..a3} (or a-desc), b-desc,
// scale-d (a predicate register or 0/1), scale-a, scale-b, [tnsp-a,]
// tnsp-b.
void checkWgmmaOperands(Inst &in) {
  const std::vector<Operand> &o = in.ops;
  if (in.op == Op::WgmmaFence || in.op == Op::WgmmaCommit) {
    if (!o.empty())
      fail(in.line, "wgmma.fence and wgmma.commit_group take no operands");
    return;
  }
  if (in.op == Op::WgmmaWait) {
    if (o.size() != 1 || o[0].kind != Operand::Imm)
      fail(in.line, "wgmma.wait_group takes one immediate");
    return;
  }
  in.wgmmaRegA = o.size() == 7 && o[1].kind == Operand::Vec;
  if (o.size() != (in.wgmmaRegA ? 7u : 8u))
    fail(in.line, "wgmma.mma_async: expected {d...}, {a0..a3} or a-desc, "
                  "b-desc, scale-d, scale-a, scale-b, [tnsp-a,] tnsp-b");
  auto regs = [&](const Operand &v, size_t count, const char *what) {
    bool ok = v.kind == Operand::Vec && v.elems.size() == count;
    for (size_t i = 0; ok && i < v.elems.size(); ++i)
      ok = v.elems[i].kind == Operand::Reg && v.elems[i].reg > 0;
    if (!ok)
      fail(in.line, "wgmma.mma_async m64n" + std::to_string(in.wgmmaN) +
                        "k16 needs " + std::to_string(count) + " " + what +
                        " registers");
  };
  auto scalar = [&](const Operand &v, const char *what) {
    if (v.kind != Operand::Reg && v.kind != Operand::Imm)
      fail(in.line, std::string("wgmma.mma_async: bad ") + what);
  };
  regs(o[0], in.wgmmaN / 2, "accumulator");
  if (in.wgmmaRegA)
    regs(o[1], 4, "A");
  else
    scalar(o[1], "A descriptor");
  scalar(o[2], "B descriptor");
  // ptxas also takes scale-d as an immediate 0 or 1 (what Triton emits
  // for a product that starts its accumulator).
  bool scaleDImm =
      o[3].kind == Operand::Imm && (o[3].imm == 0 || o[3].imm == 1);
  if (!scaleDImm && (o[3].kind != Operand::Reg || o[3].reg <= 0))
    fail(in.line, "wgmma.mma_async: scale-d must be a predicate register "
                  "or 0 or 1");
  auto imm = [&](const Operand &v, int64_t a, int64_t b, const char *what) {
    int64_t x = (int64_t)v.imm;
    if (v.kind != Operand::Imm || (x != a && x != b))
      fail(in.line, std::string("wgmma.mma_async: ") + what + " must be " +
                        std::to_string(a) + " or " + std::to_string(b));
    return (int)x;
  };
  in.scaleA = imm(o[4], 1, -1, "scale-a");
  in.scaleB = imm(o[5], 1, -1, "scale-b");
  if (!in.wgmmaRegA)
    in.tnspA = imm(o[6], 0, 1, "tnsp-a");
  in.tnspB = imm(o.back(), 0, 1, "tnsp-b");
}

// cp.async.bulk.tensor.Nd.{shared::cluster,shared::cta}.global[.tile]
//     .mbarrier::complete_tx::bytes: a TMA load into this block's shared
// memory (a cluster of one block), no multicast, cache hint or im2col;
// cp.async.bulk.tensor.Nd.global.shared::cta[.tile].bulk_group: a TMA
// store; cp.async.bulk.commit_group and cp.async.bulk.wait_group[.read]
// N: the bulk async-groups of this thread's stores.
void parseTma(Inst &in, const std::vector<std::string> &parts, int line) {
  auto unsupported = [&] {
    fail(line, "only cp.async.bulk.tensor.{1..5}d.shared::cluster.global"
               ".tile.mbarrier::complete_tx::bytes, cp.async.bulk.tensor."
               "{1..5}d.global.shared::cta.tile.bulk_group, "
               "cp.async.bulk.commit_group and "
               "cp.async.bulk.wait_group[.read] are supported");
  };
  if (parts.size() == 4 && parts[3] == "commit_group") {
    in.op = Op::BulkCommit;
    return;
  }
  if ((parts.size() == 4 || (parts.size() == 5 && parts[4] == "read")) &&
      parts[3] == "wait_group") {
    in.op = Op::BulkWait;
    return;
  }
  if (parts.size() >= 8 && parts[3] == "tensor" && parts[4].size() == 2 &&
      parts[4][1] == 'd' && parts[4][0] >= '1' && parts[4][0] <= '5' &&
      parts[5] == "global" && parts[6] == "shared::cta") {
    size_t i = parts[7] == "tile" ? 8 : 7;
    if (i + 1 != parts.size() || parts[i] != "bulk_group")
      unsupported();
    in.op = Op::TmaStore;
    in.tmaRank = parts[4][0] - '0';
    in.space = Space::Shared;
    return;
  }
  if (parts.size() < 8 || parts[3] != "tensor" || parts[4].size() != 2 ||
      parts[4][1] != 'd' || parts[4][0] < '1' || parts[4][0] > '5' ||
      (parts[5] != "shared::cluster" && parts[5] != "shared::cta") ||
      parts[6] != "global")
    unsupported();
  size_t i = parts[7] == "tile" ? 8 : 7;
  if (i + 1 != parts.size() || parts[i] != "mbarrier::complete_tx::bytes")
    unsupported();
  in.op = Op::Tma;
  in.tmaRank = parts[4][0] - '0';
  in.space = Space::Shared;
}

// `[tmap, {c0, ...}]`: the tensor map's register, then the coordinates.
void Parser::parseTensorOperand(Inst &in, std::string s, int line,
                                std::unordered_map<std::string, int> &regs) {
  s = trim(s);
  size_t comma = s.find(',');
  if (s.size() < 2 || s.front() != '[' || s.back() != ']' ||
      comma == std::string::npos)
    fail(line, "cp.async.bulk.tensor: expected [tensor-map, {coordinates}]");
  in.ops.push_back(parseOperand(s.substr(1, comma - 1), line, regs));
  in.ops.push_back(
      parseOperand(s.substr(comma + 1, s.size() - comma - 2), line, regs));
}

static bool isValue(const Operand &o) {
  return o.kind == Operand::Reg || o.kind == Operand::Imm;
}

// [dst], tensor map (a 64-bit register), {coordinates}, [mbarrier]; a
// store: tensor map, {coordinates}, [src]; wait_group: an immediate.
void checkTmaOperands(const Inst &in) {
  const std::vector<Operand> &o = in.ops;
  if (in.op == Op::BulkCommit || in.op == Op::BulkWait) {
    if (in.op == Op::BulkCommit ? !o.empty()
                                : o.size() != 1 || o[0].kind != Operand::Imm)
      fail(in.line, in.op == Op::BulkCommit
                        ? "cp.async.bulk.commit_group takes no operands"
                        : "cp.async.bulk.wait_group takes one immediate");
    return;
  }
  // The tensor operand at t (a load: after [dst]), then the one shared
  // address, [mbarrier] or [src].
  bool store = in.op == Op::TmaStore;
  size_t t = store ? 0 : 1;
  bool ok = o.size() == t + 3 && (store || o[0].kind == Operand::Addr) &&
            o[t].kind == Operand::Reg && o[t].reg > 0 &&
            o[t + 1].kind == Operand::Vec &&
            o[t + 1].elems.size() == size_t(in.tmaRank) &&
            o[t + 2].kind == Operand::Addr;
  for (size_t i = 0; ok && i < o[t + 1].elems.size(); ++i)
    ok = isValue(o[t + 1].elems[i]);
  std::string tensor =
      "[tensor-map, {" + std::to_string(in.tmaRank) + " coordinates}]";
  if (!ok)
    fail(in.line,
         "cp.async.bulk.tensor." + std::to_string(in.tmaRank) +
             (store ? "d store: expected " + tensor + ", [src]"
                    : "d: expected [dst], " + tensor + ", [mbarrier]"));
}

// bar{.cta}.{sync,arrive} and barrier{.cta}.{sync,arrive}{.aligned}
// (bar.sync is barrier.sync.aligned); not .red.
void parseBar(Inst &in, const std::vector<std::string> &parts, int line) {
  size_t i = 1;
  if (i < parts.size() && parts[i] == "cta")
    ++i;
  std::string kind = i < parts.size() ? parts[i++] : "";
  if (kind != "sync" && kind != "arrive")
    fail(line, "only " + parts[0] + "{.cta}.{sync,arrive}" +
                   (parts[0] == "barrier" ? "{.aligned}" : "") +
                   " is supported");
  in.barArrive = kind == "arrive";
  if (parts[0] == "barrier" && i < parts.size() && parts[i] == "aligned")
    ++i;
  if (i != parts.size())
    fail(line, "unsupported modifier '." + parts[i] + "' of " + parts[0] + "." +
                   kind);
}

// Barrier id a{, thread count b}: immediates or (32-bit) registers; the
// count is required for arrive. Their values are checked at launch.
void checkBarOperands(const Inst &in) {
  size_t n = in.ops.size();
  if (in.barArrive ? n != 2 : n < 1 || n > 2)
    fail(in.line, in.barArrive ? "bar.arrive takes a barrier id and a "
                                 "thread count: a, b"
                               : "bar.sync takes a barrier id and an "
                                 "optional thread count: a{, b}");
  for (const Operand &o : in.ops)
    if (o.kind != Operand::Imm && o.kind != Operand::Reg)
      fail(in.line, "the operands of a barrier are immediates or registers");
}

// mbarrier.{init,arrive[.expect_tx],expect_tx,try_wait.parity,
// test_wait.parity,inval}[.sem][.scope].shared[::cta].b64. The semantics
// and scope qualifiers order nothing here (threads run one at a time,
// one block per cluster).
void parseMbarrier(Inst &in, const std::vector<std::string> &parts, int line) {
  static const std::map<std::string, MbarrierOp> kKinds = {
      {"init", MbarInit},          {"arrive", MbarArrive},
      {"expect_tx", MbarExpectTx}, {"try_wait", MbarTryWait},
      {"test_wait", MbarTestWait}, {"inval", MbarInval}};
  std::string kind = parts.size() > 1 ? parts[1] : "";
  auto it = kKinds.find(kind);
  if (it == kKinds.end())
    fail(line, "unsupported mbarrier operation '." + kind + "'");
  in.mbarrier = it->second;
  size_t i = 2;
  if (in.mbarrier == MbarArrive && i < parts.size() &&
      parts[i] == "expect_tx") {
    in.mbarrier = MbarArriveExpectTx;
    kind += ".expect_tx";
    ++i;
  }
  if (in.mbarrier == MbarTryWait || in.mbarrier == MbarTestWait) {
    if (i >= parts.size() || parts[i] != "parity")
      fail(line, "only mbarrier." + kind + ".parity is supported");
    ++i;
  }
  for (; i < parts.size(); ++i) {
    const std::string &m = parts[i];
    if (m == "release" || m == "acquire" || m == "relaxed" || m == "cta" ||
        m == "cluster")
      continue;
    if ((m == "shared" || m == "shared::cta") && i + 2 == parts.size() &&
        parts.back() == "b64")
      break;
    fail(line, "unsupported mbarrier." + kind + " form: only ." + kind +
                   "[.sem][.scope].shared::cta.b64 is supported");
  }
  if (i == parts.size())
    fail(line, "mbarrier." + kind + " needs .shared::cta (or .shared).b64");
  in.space = Space::Shared;
}

void checkMbarrierOperands(const Inst &in) {
  const std::vector<Operand> &o = in.ops;
  auto reg = [&](size_t i) {
    return i < o.size() && o[i].kind == Operand::Reg;
  };
  auto addr = [&](size_t i) {
    return i < o.size() && o[i].kind == Operand::Addr;
  };
  auto value = [&](size_t i) { return i < o.size() && isValue(o[i]); };
  bool ok = false;
  const char *expected = "";
  switch (in.mbarrier) {
  case MbarInit:
    ok = o.size() == 2 && addr(0) && value(1);
    expected = "[addr], count";
    break;
  case MbarArrive:
    ok = (o.size() == 2 || (o.size() == 3 && value(2))) && reg(0) && addr(1);
    expected = "state, [addr][, count]";
    break;
  case MbarArriveExpectTx:
    ok = o.size() == 3 && reg(0) && addr(1) && value(2);
    expected = "state, [addr], txCount";
    break;
  case MbarExpectTx:
    ok = o.size() == 2 && addr(0) && value(1);
    expected = "[addr], txCount";
    break;
  case MbarTryWait: // a suspend-time hint may follow
    ok = (o.size() == 3 || (o.size() == 4 && value(3))) && reg(0) &&
         o[0].reg > 0 && addr(1) && value(2);
    expected = "pred, [addr], phaseParity[, suspendTimeHint]";
    break;
  case MbarTestWait:
    ok = o.size() == 3 && reg(0) && o[0].reg > 0 && addr(1) && value(2);
    expected = "pred, [addr], phaseParity";
    break;
  default:
    ok = o.size() == 1 && addr(0);
    expected = "[addr]";
  }
  if (!ok)
    fail(in.line, "mbarrier: expected " + std::string(expected));
}

} // namespace ptxi
