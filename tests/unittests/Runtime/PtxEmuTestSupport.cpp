//===- PtxEmuTestSupport.cpp - What the PtxEmu tests share ----------------===//

#include "PtxEmuTestSupport.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace tfc::testing::ptxemu {

namespace {

const char *kHeader = ".version 8.0\n.target sm_90\n.address_size 64\n";

/// Launches kernel `name` of `m` on one block of `threads`, each of
/// `values` a pointer argument, `ranges` the device memory.
int launchBlock(Module &m, const char *name, unsigned threads,
                std::vector<void *> values,
                const std::vector<ptxemu_range> &ranges, std::string *error) {
  ptxemu_kernel *k = ptxemu_get(m.module, name);
  EXPECT_NE(k, nullptr) << m.error;
  if (!k)
    return -1;
  std::vector<void *> params;
  for (void *&v : values)
    params.push_back(&v);
  unsigned grid[3] = {1, 1, 1}, block[3] = {threads, 1, 1};
  char buf[512] = "";
  int rc = ptxemu_launch(k, grid, block, 0, params.data(), ranges.data(),
                         ranges.size(), buf, sizeof buf);
  if (error)
    *error = buf;
  return rc;
}

} // namespace

Module::Module(const std::string &body) {
  char buf[512] = "";
  module = ptxemu_load((std::string(kHeader) + body).c_str(), buf, sizeof buf);
  error = buf;
}

Module::~Module() { ptxemu_unload(module); }

int launch(Module &m, const char *name, unsigned threads,
           std::vector<std::pair<void *, size_t>> buffers, std::string *error) {
  std::vector<void *> values;
  std::vector<ptxemu_range> ranges;
  for (auto &[ptr, size] : buffers) {
    values.push_back(ptr);
    ranges.push_back({static_cast<const char *>(ptr), size});
  }
  return launchBlock(m, name, threads, values, ranges, error);
}

int launchWithStats(Module &m, const char *name, unsigned threads,
                    std::vector<std::pair<void *, size_t>> buffers,
                    std::string *error, std::string *stats) {
  setenv("PTXEMU_STATS", "1", 1);
  ::testing::internal::CaptureStderr();
  int rc = launch(m, name, threads, std::move(buffers), error);
  *stats = ::testing::internal::GetCapturedStderr();
  unsetenv("PTXEMU_STATS");
  return rc;
}

uint16_t half(float x) {
  _Float16 h = static_cast<_Float16>(x);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

uint32_t pack(uint16_t lo, uint16_t hi) { return lo | (uint32_t(hi) << 16); }

std::string loadsOrError(const std::string &inst) {
  Module m(R"(
.visible .entry k(.param .u64 p)
{
  .reg .pred %p<2>;
  .reg .b32 %r<300>;
  .reg .b64 %rd<4>;
  )" + inst +
           R"(
  ret;
}
)");
  return m.module ? std::string("loaded") : m.error;
}

std::vector<uint32_t> aFragments(const Matrix &a) {
  std::vector<uint32_t> regs(128 * 4);
  for (int tid = 0; tid < 128; ++tid) {
    int m = 16 * (tid / 32) + (tid % 32) / 4, k = 2 * (tid % 4);
    for (int r = 0; r < 4; ++r) {
      int row = m + 8 * (r % 2), col = k + 8 * (r / 2);
      regs[tid * 4 + r] = pack(a.bitsAt(row, col), a.bitsAt(row, col + 1));
    }
  }
  return regs;
}

std::string dRegs(int n) {
  std::string s = "{";
  for (int i = 0; i < n / 2; ++i)
    s += (i ? ", %r" : "%r") + std::to_string(200 + i);
  return s + "}";
}

std::string mmaAsync(int n, const std::string &t, const std::string &operands) {
  return "  wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) +
         "k16.f32." + t + "." + t + "\n    " + dRegs(n) + ", " + operands +
         ";\n";
}

std::string fencedGroup(const std::string &mmas) {
  return kFence + mmas + kCommit + kWait0;
}

std::string descriptor(const char *reg, const SmemOperand &op, uint64_t high) {
  uint64_t fields = ((op.lbo >> 4) << 16) | ((op.sbo >> 4) << 32) | high;
  return "  mov.u64 %rd30, tile;\n  add.s64 %rd31, %rd30, " +
         std::to_string(op.offset) +
         ";\n  shr.u64 %rd32, %rd31, 4;\n  and.b64 %rd33, %rd32, 16383;\n"
         "  or.b64 " +
         reg + ", %rd33, " + std::to_string(fields) + ";\n";
}

TensorMap tensorMap(const void *base, int elementBytes,
                    std::vector<uint64_t> dims, std::vector<uint64_t> strides,
                    std::vector<uint16_t> box, int swizzle, int oobFill) {
  TensorMap t;
  std::memset(&t, 0, sizeof t);
  fake_tensor_map &m = t.map;
  m.magic = FAKE_TENSOR_MAP_MAGIC;
  m.dataType = elementBytes == 2 ? 6 : 7;
  m.rank = uint8_t(dims.size());
  m.elementBytes = uint8_t(elementBytes);
  m.swizzle = uint8_t(swizzle);
  m.oobFill = uint8_t(oobFill);
  m.address = reinterpret_cast<uintptr_t>(base);
  for (size_t d = 0; d < dims.size(); ++d) {
    m.dims[d] = dims[d];
    m.box[d] = box[d];
    m.elementStrides[d] = 1;
    if (d)
      m.strides[d - 1] = strides[d - 1];
  }
  return t;
}

std::string waitLoop(const std::string &label, const std::string &bar,
                     const std::string &parity) {
  return "$" + label +
         ":\n  {\n  .reg .pred p;\n"
         "  mbarrier.try_wait.parity.shared::cta.b64 p, [" +
         bar + "], " + parity +
         ";\n  selp.b32 %r14, 1, 0, p;\n  }\n"
         "  setp.eq.u32 %p9, %r14, 0;\n  @%p9 bra $" +
         label + ";\n";
}

std::string tmaLoad(int offset, const std::vector<int> &coords,
                    const std::string &map, const std::string &bar) {
  std::string s, list;
  for (size_t d = 0; d < coords.size(); ++d) {
    std::string reg = "%r" + std::to_string(40 + d);
    s += "  mov.u32 " + reg + ", " + std::to_string(coords[d]) + ";\n";
    list += (d ? ", " : "") + reg;
  }
  return s + "  cp.async.bulk.tensor." + std::to_string(coords.size()) +
         "d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r2+" +
         std::to_string(offset) + "], [" + map + ", {" + list + "}], [" + bar +
         "];\n";
}

std::string tmaKernel(int tileBytes, const std::string &body) {
  std::string size = std::to_string(tileBytes);
  return R"(
.visible .entry tma(.param .u64 pmap, .param .u64 pout, .param .u64 pextra)
{
  .shared .align 1024 .b8 tile[)" +
         size + R"(];
  .shared .align 8 .b8 bar[32];
  .reg .pred %p<12>;
  .reg .b32 %r<64>;
  .reg .f32 %f<8>;
  .reg .b16 %rs<8>;
  .reg .b64 %rd<40>;
  ld.param.u64 %rd1, [pmap];
  ld.param.u64 %rd2, [pout];
  ld.param.u64 %rd8, [pextra];
  mov.u32 %r1, bar;
  mov.u32 %r2, tile;
  mov.u32 %r9, %tid.x;
  setp.ne.u32 %p1, %r9, 0;
  mov.u32 %r13, 0;
  @%p1 bra $L__filled;
  mov.u32 %r20, 0;
  mov.u32 %r21, 0x5a5a5a5a;
$L__fill:
  add.u32 %r22, %r2, %r20;
  st.shared.v4.b32 [%r22], {%r21, %r21, %r21, %r21};
  add.u32 %r20, %r20, 16;
  setp.lt.u32 %p2, %r20, )" +
         size + R"(;
  @%p2 bra $L__fill;
$L__filled:
  bar.sync 0;
)" + body +
         R"(
  bar.sync 0;
  @%p1 bra $L__end;
  mov.u32 %r20, 0;
$L__out:
  add.u32 %r22, %r2, %r20;
  ld.shared.v4.b32 {%r23, %r24, %r25, %r26}, [%r22];
  cvt.u64.u32 %rd3, %r20;
  add.s64 %rd4, %rd2, %rd3;
  st.global.v4.b32 [%rd4], {%r23, %r24, %r25, %r26};
  add.u32 %r20, %r20, 16;
  setp.lt.u32 %p2, %r20, )" +
         size + R"(;
  @%p2 bra $L__out;
$L__end:
  ret;
}
)";
}

std::string loadAndWait(int bytes, const std::string &loads) {
  return "  @%p1 bra $L__inited;\n"
         "  mbarrier.init.shared::cta.b64 [%r1], 1;\n"
         "  fence.mbarrier_init.release.cluster;\n"
         "$L__inited:\n  bar.sync 0;\n  @%p1 bra $L__issued;\n"
         "  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r1], " +
         std::to_string(bytes) + ";\n" + loads + "$L__issued:\n" +
         waitLoop("L__wait");
}

int runTmaMaps(Module &m, std::vector<TensorMap> maps,
               std::vector<uint8_t> &tile, std::string *error, unsigned threads,
               std::vector<uint32_t> extra,
               const std::vector<ptxemu_range> *tensors) {
  std::vector<void *> values = {maps.data(), tile.data(), extra.data()};
  std::vector<ptxemu_range> ranges = {
      {reinterpret_cast<const char *>(maps.data()),
       maps.size() * sizeof(TensorMap)},
      {reinterpret_cast<const char *>(tile.data()), tile.size()},
      {reinterpret_cast<const char *>(extra.data()), extra.size() * 4}};
  if (tensors)
    ranges.insert(ranges.end(), tensors->begin(), tensors->end());
  for (const TensorMap &t : maps)
    if (!tensors && t.map.magic == FAKE_TENSOR_MAP_MAGIC && t.map.address)
      ranges.push_back({reinterpret_cast<const char *>(t.map.address),
                        size_t(t.map.dims[t.map.rank - 1]) *
                            (t.map.rank > 1 ? t.map.strides[t.map.rank - 2]
                                            : t.map.elementBytes)});
  return launchBlock(m, "tma", threads, values, ranges, error);
}

int runTma(const std::string &ptx, const TensorMap &map,
           std::vector<uint8_t> &tile, unsigned threads, std::string *error) {
  Module m(ptx);
  EXPECT_NE(m.module, nullptr) << m.error;
  if (!m.module)
    return -1;
  return runTmaMaps(m, {map}, tile, error, threads);
}

} // namespace tfc::testing::ptxemu
