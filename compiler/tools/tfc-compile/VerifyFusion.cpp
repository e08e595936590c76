//===- VerifyFusion.cpp - Run the fused and unfused builds side by side ---===//

#include "VerifyFusion.h"

#include "tfc/runtime/api.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

namespace tfc {
namespace {

struct AlignedFree {
  void operator()(void *p) const { std::free(p); }
};
using Bytes = std::unique_ptr<uint8_t, AlignedFree>;

Bytes allocate(size_t n) {
  return Bytes(
      static_cast<uint8_t *>(std::aligned_alloc(64, (n + 63) / 64 * 64)));
}

size_t count(const tfc_tensor_desc *d) {
  size_t n = 1;
  for (int32_t i = 0; i < d->rank; ++i)
    n *= size_t(d->shape[i]);
  return n;
}

uint16_t toHalf(float f) { return std::bit_cast<uint16_t>(_Float16(f)); }
uint16_t toBF16(float f) { return uint16_t(std::bit_cast<uint32_t>(f) >> 16); }
float fromHalf(uint16_t h) { return float(std::bit_cast<_Float16>(h)); }
float fromBF16(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

/// Random contents for a tensor: normal floats; integers and booleans in
/// {0, 1} (valid token ids, masks and indices).
void fill(const tfc_tensor_desc *d, uint8_t *data, std::mt19937 &rng) {
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> bit(0, 1);
  size_t n = count(d);
  for (size_t i = 0; i < n; ++i) {
    switch (d->dtype) {
    case TFC_DTYPE_F32:
      reinterpret_cast<float *>(data)[i] = normal(rng);
      break;
    case TFC_DTYPE_F16:
      reinterpret_cast<uint16_t *>(data)[i] = toHalf(normal(rng));
      break;
    case TFC_DTYPE_BF16:
      reinterpret_cast<uint16_t *>(data)[i] = toBF16(normal(rng));
      break;
    case TFC_DTYPE_I64:
      reinterpret_cast<int64_t *>(data)[i] = bit(rng);
      break;
    case TFC_DTYPE_I32:
      reinterpret_cast<int32_t *>(data)[i] = bit(rng);
      break;
    default:
      data[i] = uint8_t(bit(rng));
      break;
    }
  }
}

double value(const tfc_tensor_desc *d, const uint8_t *data, size_t i) {
  switch (d->dtype) {
  case TFC_DTYPE_F32:
    return reinterpret_cast<const float *>(data)[i];
  case TFC_DTYPE_F16:
    return fromHalf(reinterpret_cast<const uint16_t *>(data)[i]);
  case TFC_DTYPE_BF16:
    return fromBF16(reinterpret_cast<const uint16_t *>(data)[i]);
  case TFC_DTYPE_I64:
    return double(reinterpret_cast<const int64_t *>(data)[i]);
  case TFC_DTYPE_I32:
    return reinterpret_cast<const int32_t *>(data)[i];
  default:
    return data[i];
  }
}

std::string take(tfc_status s) {
  std::string m = tfc_status_message(s);
  tfc_status_free(s);
  return m;
}

} // namespace

bool verifyFusedAgainstUnfused(const std::string &fusedLib,
                               const std::string &unfusedLib, unsigned seed,
                               std::string &report) {
  tfc_model *models[2] = {nullptr, nullptr};
  const std::string libs[2] = {fusedLib, unfusedLib};
  for (int m = 0; m < 2; ++m)
    if (tfc_status s = tfc_model_load(libs[m].c_str(), &models[m])) {
      report = "--verify-fusion: " + take(s);
      tfc_model_destroy(models[0]);
      return false;
    }
  std::unique_ptr<tfc_model, void (*)(tfc_model *)> fused(models[0],
                                                          tfc_model_destroy),
      unfused(models[1], tfc_model_destroy);

  std::mt19937 rng(seed);
  std::vector<Bytes> keep;
  auto bindAll = [&](int32_t num, auto descOf, auto bind) -> std::string {
    for (int32_t i = 0; i < num; ++i) {
      const tfc_tensor_desc *d = descOf(fused.get(), i);
      keep.push_back(allocate(tfc_tensor_desc_nbytes(d)));
      fill(d, keep.back().get(), rng);
      for (tfc_model *m : {fused.get(), unfused.get()})
        if (tfc_status s = bind(m, i, keep.back().get()))
          return take(s);
    }
    return "";
  };
  std::string err = bindAll(tfc_model_num_inputs(fused.get()), tfc_model_input,
                            tfc_model_bind_input);
  if (err.empty())
    err = bindAll(tfc_model_num_weights(fused.get()), tfc_model_weight,
                  tfc_model_bind_weight);
  int32_t numOutputs = tfc_model_num_outputs(fused.get());
  std::vector<Bytes> outs[2];
  for (int m = 0; m < 2 && err.empty(); ++m)
    for (int32_t i = 0; i < numOutputs; ++i) {
      const tfc_tensor_desc *d = tfc_model_output(fused.get(), i);
      outs[m].push_back(allocate(tfc_tensor_desc_nbytes(d)));
      std::memset(outs[m].back().get(), 0xff, tfc_tensor_desc_nbytes(d));
      if (tfc_status s = tfc_model_bind_output(m ? unfused.get() : fused.get(),
                                               i, outs[m].back().get()))
        err = take(s);
    }
  for (tfc_model *m : {fused.get(), unfused.get()})
    if (err.empty())
      if (tfc_status s = tfc_model_invoke(m))
        err = take(s);
  if (!err.empty()) {
    report = "--verify-fusion: " + err;
    return false;
  }

  double worst = 0;
  for (int32_t i = 0; i < numOutputs; ++i) {
    const tfc_tensor_desc *d = tfc_model_output(fused.get(), i);
    bool isFloat = d->dtype == TFC_DTYPE_F32 || d->dtype == TFC_DTYPE_F16 ||
                   d->dtype == TFC_DTYPE_BF16;
    double tol = d->dtype == TFC_DTYPE_F32 ? 1e-4 : isFloat ? 5e-3 : 0.0;
    double num = 0, den = 0;
    for (size_t k = 0, n = count(d); k < n; ++k) {
      double a = value(d, outs[0][i].get(), k),
             b = value(d, outs[1][i].get(), k);
      num += (a - b) * (a - b);
      den += b * b;
    }
    double rel = std::sqrt(num / (den > 0 ? den : 1.0));
    worst = std::max(worst, rel);
    if (!(rel <= tol)) {
      char buf[96];
      std::snprintf(buf, sizeof(buf), "%.3g (tolerance %.0e)", rel, tol);
      report = "--verify-fusion: output " + std::to_string(i) + " '" + d->name +
               "' of the fused build differs from the unfused build: "
               "relative error " +
               buf + " on random inputs (seed " + std::to_string(seed) + ")";
      return false;
    }
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2g", worst);
  report = "--verify-fusion: fused and unfused builds agree on random inputs "
           "(seed " +
           std::to_string(seed) + ", largest relative error " + buf + ")";
  return true;
}

} // namespace tfc
