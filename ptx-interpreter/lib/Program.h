//===- Program.h - A PTX module parsed into instructions -------*- C++ -*-===//
//
// What the parser makes of a PTX module and the interpreter runs: each
// kernel's instructions with decoded types, modifiers and operands, its
// parameters, symbols and memory sizes.
//
//===----------------------------------------------------------------------===//

#ifndef PTXI_LIB_PROGRAM_H
#define PTXI_LIB_PROGRAM_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ptxi {

enum class Op {
  Mov,
  Ld,
  St,
  Add,
  Sub,
  Mul,
  Mad,
  Div,
  Rem,
  Min,
  Max,
  And,
  Or,
  Xor,
  Not,
  Shl,
  Shr,
  Neg,
  Abs,
  Bfe,
  Setp,
  Selp,
  Cvt,
  Cvta,
  Fma,
  Rcp,
  Sqrt,
  Rsqrt,
  Ex2,
  Lg2,
  Copysign,
  Bra,
  Ret,
  Bar,
  Shfl,
  Mma,
  Ldmatrix,
  Stmatrix,
  CpAsync,
  CpAsyncCommit,
  CpAsyncWait,
  Vote,
  Elect,
  WgmmaFence,
  WgmmaCommit,
  WgmmaWait,
  Wgmma,      // wgmma.mma_async
  Mbarrier,   // mbarrier.*, Inst::mbarrier says which
  Tma,        // cp.async.bulk.tensor, global to shared
  TmaStore,   // cp.async.bulk.tensor, shared to global (bulk groups)
  BulkCommit, // cp.async.bulk.commit_group
  BulkWait,   // cp.async.bulk.wait_group[.read]
  SetMaxNreg, // setmaxnreg.{inc,dec}
  Atom,       // atom[.space].add.{u32,s32,u64}
  Nop,
};

/// The mbarrier operations.
enum MbarrierOp {
  MbarInit,
  MbarArrive,
  MbarArriveExpectTx,
  MbarExpectTx,
  MbarTryWait,
  MbarTestWait,
  MbarInval
};

enum class Ty { None, B, U, S, F, F16, BF16, F16x2, BF16x2, Pred };

struct Type {
  Ty kind = Ty::None;
  int bits = 0;
  bool isFloat() const { return kind == Ty::F; }
  /// A scalar f16 or bf16 (arithmetic on them: add, sub, mul, fma, min,
  /// max, neg, abs, setp).
  bool isHalf() const { return kind == Ty::F16 || kind == Ty::BF16; }
  bool isSigned() const { return kind == Ty::S; }
};

enum class Space { Generic, Global, Shared, Param, Local };

enum class Special {
  TidX,
  TidY,
  TidZ,
  NtidX,
  NtidY,
  NtidZ,
  CtaidX,
  CtaidY,
  CtaidZ,
  NctaidX,
  NctaidY,
  NctaidZ,
  LaneId,
  WarpId
};

struct Operand {
  enum Kind { None, Reg, Imm, Spec, Addr, Vec, Label } kind = None;
  int reg = -1;     // Reg; Addr: base register or -1
  uint64_t imm = 0; // Imm; Addr: offset (symbol address included)
  Space symSpace = Space::Generic; // Addr on a symbol: its space
  Special spec = Special::TidX;
  std::vector<Operand> elems; // Vec
  int reg2 = -1;              // Reg: second destination (`d|p`)
  std::string symbol;         // Addr: the symbol it is based on, if any
};

struct Inst {
  Op op = Op::Nop;
  Type type, type2; // type2: cvt's source, mul.wide's etc.
  Space space = Space::Generic;
  int pred = -1;
  bool predNeg = false;
  // Modifiers.
  int cmp = 0;           // setp comparison
  int combine = 0;       // setp .and/.or/.xor
  int rounding = 0;      // 0 rn, 1 rz, 2 rm, 3 rp
  bool roundInt = false; // cvt.rni etc.
  bool ftz = false, sat = false, nan = false;
  int mulMode = 0;      // 0 lo, 1 hi, 2 wide
  bool toSpace = false; // cvta.to.<space>
  bool waitAll = false; // cp.async.wait_all
  int shflMode = 0;     // 0 up 1 down 2 bfly 3 idx; vote: 0 all 1 any 2 uni
                        // 3 ballot
  int matrices = 1;     // ldmatrix .x1/.x2/.x4
  bool trans = false;
  int mmaK = 16;
  bool bf16 = false;
  // wgmma.mma_async: N of m64nNk16, A from registers (else a descriptor),
  // the immediates scale-a, scale-b (1 or -1) and tnsp-a, tnsp-b (0 K-major,
  // 1 MN-major).
  int wgmmaN = 0;
  bool wgmmaRegA = false;
  int scaleA = 1, scaleB = 1, tnspA = 0, tnspB = 0;
  int mbarrier = MbarInit; // Op::Mbarrier: a MbarrierOp
  bool barArrive = false;  // Op::Bar: bar.arrive (else bar.sync)
  bool decrease = false;   // Op::SetMaxNreg: setmaxnreg.dec (else .inc)
  int tmaRank = 0;         // cp.async.bulk.tensor.Nd: N
  int target = -1;         // bra
  std::vector<Operand> ops;
  int line = 0;
  std::string text;
  int stat = 0; // its Stat class, for PTXEMU_STATS
};

/// What PTXEMU_STATS counts, by class of instruction.
enum Stat {
  StatOther,
  StatMma,
  StatWgmma,
  StatLdmatrix,
  StatLdShared,
  StatStShared,
  StatLdGlobal,
  StatStGlobal,
  StatCpAsync,
  StatBar,
  StatShfl,
  StatEx2,
  StatBranch,
  StatTma,
  StatMbarrier,
  kNumStats
};

/// The Stat class of an instruction.
int statOf(const Inst &in);

enum Cmp {
  EQ,
  NE,
  LT,
  LE,
  GT,
  GE,
  LO,
  LS,
  HI,
  HS,
  EQU,
  NEU,
  LTU,
  LEU,
  GTU,
  GEU,
  NUM,
  NAN_
};

struct Symbol {
  Space space;
  uint64_t offset; // in its space's buffer
  uint64_t size;
};

struct Param {
  std::string name;
  uint64_t offset, size;
};

struct Kernel {
  std::string name;
  std::vector<Param> params;
  uint64_t paramBytes = 0;
  std::vector<Inst> code;
  int numRegs = 0;
  /// Where the dynamic shared memory (`.extern .shared`) starts, after the
  /// static declarations, and the alignment it asks for.
  uint64_t dynamicSharedOffset = 0, dynamicSharedAlign = 16;
  uint64_t localBytes = 0;
  /// Threads per block of `.maxntid` (0: none declared).
  unsigned maxThreads = 0;
  std::map<std::string, Symbol> symbols; // shared, local, param, global
  /// The module's `.global` data: device memory of every launch.
  std::vector<std::pair<const char *, size_t>> globalData;
};

inline uint64_t alignUp(uint64_t v, uint64_t a) {
  return a ? (v + a - 1) / a * a : v;
}

} // namespace ptxi

struct ptxemu_module {
  std::vector<std::unique_ptr<ptxi::Kernel>> kernels;
  std::vector<std::unique_ptr<char[]>> globalData; // module-scope .global
};

#endif // PTXI_LIB_PROGRAM_H
