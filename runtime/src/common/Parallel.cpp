//===- Parallel.cpp - Tensor-parallel models in the runtime ---------------===//
//
// Joining the MPI job when a tensor-parallel model loads, a rank's part of
// each split weight when it binds them, the collectives its code calls, and
// parallel.h's calls: the parts of whole inputs and the whole of split
// outputs (a KV cache's heads), the bytes of weights a rank binds.
//
//===----------------------------------------------------------------------===//

#include "Parallel.h"

#include "Mpi.h"

#include "tfc/runtime/dtype.h"
#include "tfc/runtime/parallel.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <utility>

using namespace tfc::rt;

namespace {

std::mutex failureMutex;
std::string collectiveFailure;

/// Calls `run(whole, part, count)` for each piece, in elements, of rank
/// `rank`'s part of a tensor of `whole` shape split along `axis` into
/// `ranks` parts of `groups` groups (abi.h's tfc_tensor_split): offsets
/// into the whole tensor and into the part, and the piece's length. A part
/// is ceil(whole / ranks) long along `axis`; of a padded one (groups 1),
/// the piece holds the rows that lie in the whole tensor, none past it.
template <typename Fn>
void forEachPiece(const std::vector<int64_t> &whole, int32_t axis,
                  int32_t groups, int32_t ranks, int32_t rank, Fn &&run) {
  int64_t outer = 1, inner = 1;
  for (int32_t d = 0; d < axis; ++d)
    outer *= whole[size_t(d)];
  for (size_t d = size_t(axis) + 1; d < whole.size(); ++d)
    inner *= whole[d];
  int64_t wholeAxis = whole[size_t(axis)];
  int64_t partAxis = (wholeAxis + ranks - 1) / ranks;
  int64_t chunk = partAxis / groups;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t g = 0; g < groups; ++g) {
      int64_t start = (g * ranks + rank) * chunk;
      int64_t rows = std::min(chunk, wholeAxis - start);
      if (rows > 0)
        run((o * wholeAxis + start) * inner, (o * partAxis + g * chunk) * inner,
            rows * inner);
    }
}

/// `shape` with `axis` `ranks` times as long: the whole tensor's.
std::vector<int64_t> wholeShape(int32_t rank, const int64_t *shape,
                                int32_t axis, int32_t ranks) {
  std::vector<int64_t> whole(shape, shape + rank);
  whole[size_t(axis)] *= ranks;
  return whole;
}

/// `count` elements from `src` (`from`) to `dst` (`to`), converted.
void copyElements(const uint8_t *src, tfc::DType from, uint8_t *dst,
                  tfc::DType to, int64_t count) {
  if (from == to)
    std::memcpy(dst, src, size_t(count) * tfc_dtype_size(int32_t(to)));
  else
    tfc::convertFloats(src, from, dst, to, size_t(count));
}

const tfc_tensor_split kWhole = {-1, 1};

} // namespace

namespace tfc::rt {

tfc_status joinParallel(tfc_model *model, const std::string &file,
                        const tfc_manifest &m, const tfc_tensor_parallel *p) {
  auto bad = [&](const std::string &why) {
    return makeStatus(TFC_BAD_FORMAT, "model " + file + ": " + why);
  };
  if (!p || p->ranks < 2 || (m.num_args > 0 && (!p->args || !p->arg_whole)) ||
      (m.num_results > 0 && !p->results))
    return bad("tfc_model_tensor_parallel() is malformed");
  for (int32_t i = 0; i < m.num_args + m.num_results; ++i) {
    bool arg = i < m.num_args;
    const tfc_tensor_split &s = arg ? p->args[i] : p->results[i - m.num_args];
    const tfc_tensor_desc &d = arg ? m.args[i] : m.results[i - m.num_args];
    if (s.axis == -1)
      continue;
    // The whole: N parts, or fewer rows for a weight padded to N parts.
    int64_t part = s.axis >= 0 && s.axis < d.rank ? d.shape[s.axis] : 0;
    int64_t whole = arg ? p->arg_whole[i] : part * p->ranks;
    bool padded = whole != part * p->ranks;
    if (s.axis < 0 || s.axis >= d.rank || s.groups < 1 ||
        d.shape[s.axis] % s.groups != 0 || whole < 1 ||
        part != (whole + p->ranks - 1) / p->ranks ||
        (padded && (s.groups != 1 || d.role != TFC_ROLE_WEIGHT)))
      return bad(std::string(arg ? "argument " : "result ") +
                 std::to_string(arg ? i : i - m.num_args) + " " +
                 quote(d.name) + " has a malformed split");
  }
  MpiJob job;
  std::string error;
  if (!joinMpiJob(p->ranks, job, error))
    return makeStatus(TFC_FAILED_PRECONDITION, "model " + file + ": " + error);
  model->parallel = p;
  model->rank = job.rank;
  return nullptr;
}

const tfc_tensor_split *weightSplit(const tfc_model *model, int32_t arg) {
  if (!model->parallel || model->parallel->args[arg].axis < 0)
    return nullptr;
  return &model->parallel->args[arg];
}

tfc_status bindWeightPart(const tfc_model *model, int32_t arg,
                          const tfc::SafetensorsTensor &tensor,
                          const std::string &path, const void *&data,
                          tfc::AlignedBuffer &copy) {
  const tfc_tensor_desc &desc = model->manifest->args[arg];
  const tfc_tensor_split &split = model->parallel->args[arg];
  int32_t ranks = model->parallel->ranks;
  std::vector<int64_t> whole(desc.shape, desc.shape + desc.rank);
  whole[size_t(split.axis)] = model->parallel->arg_whole[arg];
  int64_t partCount =
      tfc_tensor_desc_nbytes(&desc) / tfc_dtype_size(desc.dtype);
  auto want = static_cast<tfc::DType>(desc.dtype);
  bool convert = tensor.dtype != want;
  if ((convert && !tfc::isFloatConvertible(tensor.dtype, want)) ||
      tensor.shape != whole)
    return makeStatus(
        TFC_MISMATCH,
        "weights file " + path + ": tensor " + quote(desc.name) + ": model " +
            model->path + " expects " +
            describe(desc.dtype, int32_t(whole.size()), whole.data()) +
            " (split across " + std::to_string(ranks) +
            " ranks), the file has " +
            describe(int32_t(tensor.dtype), int32_t(tensor.shape.size()),
                     tensor.shape.data()));
  size_t fromSize = tfc_dtype_size(int32_t(tensor.dtype));
  size_t toSize = tfc_dtype_size(desc.dtype);
  // One piece (the rows of a [out, in] weight split by its outputs): in
  // place, as whole weights are, unless it is padded.
  int64_t pieces = 0, first = 0, found = 0;
  forEachPiece(whole, split.axis, split.groups, ranks, model->rank,
               [&](int64_t from, int64_t, int64_t count) {
                 if (pieces++ == 0)
                   first = from;
                 found += count;
               });
  const uint8_t *start = tensor.data + size_t(first) * fromSize;
  if (pieces == 1 && found == partCount && !convert &&
      reinterpret_cast<uintptr_t>(start) % std::max<size_t>(toSize, 1) == 0) {
    data = start;
    return nullptr;
  }
  if (!copy.allocate(tfc_tensor_desc_nbytes(&desc)))
    return makeStatus(TFC_OUT_OF_MEMORY, "weights file " + path + ": tensor " +
                                             quote(desc.name) +
                                             ": out of memory");
  if (found < partCount) // the rows past the whole vocabulary
    std::memset(copy.data(), 0, tfc_tensor_desc_nbytes(&desc));
  forEachPiece(whole, split.axis, split.groups, ranks, model->rank,
               [&](int64_t from, int64_t to, int64_t count) {
                 copyElements(tensor.data + size_t(from) * fromSize,
                              tensor.dtype, copy.data() + size_t(to) * toSize,
                              want, count);
               });
  data = copy.data();
  return nullptr;
}

std::string takeCollectiveFailure() {
  std::lock_guard<std::mutex> lock(failureMutex);
  return std::exchange(collectiveFailure, std::string());
}

} // namespace tfc::rt

extern "C" {

TFC_API void _mlir_ciface_tfc_all_reduce_f32(tfc_memref2d_f32 *in,
                                             tfc_memref2d_f32 *out) {
  int64_t rows = in->sizes[0], cols = in->sizes[1];
  float *dst = out->aligned + out->offset;
  // `out` is the fresh dense buffer of the op's result.
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      dst[r * out->strides[0] + c * out->strides[1]] =
          in->aligned[in->offset + r * in->strides[0] + c * in->strides[1]];
  std::string error;
  if (out->strides[1] != 1 || out->strides[0] != cols)
    error = "internal error: the all-reduce's result is not dense";
  else if (allReduceSum(dst, rows * cols, error))
    return;
  std::lock_guard<std::mutex> lock(failureMutex);
  if (collectiveFailure.empty())
    collectiveFailure = error;
}

TFC_API void _mlir_ciface_tfc_all_gather_f32(tfc_memref2d_f32 *in,
                                             tfc_memref2d_f32 *out) {
  int64_t rows = in->sizes[0], cols = in->sizes[1];
  int64_t ranks = cols > 0 ? out->sizes[1] / cols : 0;
  std::string error;
  if (out->strides[1] != 1 || out->strides[0] != out->sizes[1] ||
      out->sizes[0] != rows || ranks * cols != out->sizes[1])
    error = "internal error: the all-gather's result is not its input's "
            "rows, dense, a whole number of times as wide";
  else {
    // This rank's rows packed, gathered rank by rank, then set side by
    // side: out[r, k * cols + c] = rank k's in[r, c].
    std::vector<float> part(size_t(rows * cols)),
        all(size_t(ranks) * part.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        part[size_t(r * cols + c)] =
            in->aligned[in->offset + r * in->strides[0] + c * in->strides[1]];
    if (allGather(part.data(), int64_t(part.size()), all.data(), ranks,
                  error)) {
      float *dst = out->aligned + out->offset;
      for (int64_t k = 0; k < ranks; ++k)
        for (int64_t r = 0; r < rows; ++r)
          std::memcpy(dst + r * ranks * cols + k * cols,
                      all.data() + (k * rows + r) * cols,
                      size_t(cols) * sizeof(float));
      return;
    }
  }
  std::lock_guard<std::mutex> lock(failureMutex);
  if (collectiveFailure.empty())
    collectiveFailure = error;
}

TFC_API int32_t tfc_parallel_rank(void) { return int32_t(jobRank()); }

int32_t tfc_model_ranks(const tfc_model *model) {
  return model && model->parallel ? model->parallel->ranks : 1;
}

int32_t tfc_model_rank(const tfc_model *model) {
  return model && model->parallel ? model->rank : 0;
}

tfc_tensor_split tfc_model_input_split(const tfc_model *model, int32_t index) {
  if (!model || !model->parallel || index < 0 ||
      size_t(index) >= model->inputArgs.size())
    return kWhole;
  return model->parallel->args[model->inputArgs[size_t(index)]];
}

tfc_tensor_split tfc_model_output_split(const tfc_model *model, int32_t index) {
  if (!model || !model->parallel || index < 0 ||
      index >= model->manifest->num_results)
    return kWhole;
  return model->parallel->results[index];
}

tfc_status tfc_model_input_part(const tfc_model *model, int32_t index,
                                const tfc_array *whole, tfc_array **part) {
  if (!model || !whole || !part || index < 0 ||
      size_t(index) >= model->inputArgs.size())
    return makeStatus(TFC_INVALID_ARGUMENT,
                      "tfc_model_input_part: needs a model, an input index "
                      "in range, an array and room for the part");
  return guard([&]() -> tfc_status {
    tfc_tensor_split s = tfc_model_input_split(model, index);
    std::vector<int64_t> shape = whole->shape;
    int32_t ranks = tfc_model_ranks(model);
    if (s.axis >= 0) {
      const tfc_tensor_desc *d = tfc_model_input(model, index);
      int64_t size = int64_t(shape.size()) > s.axis ? shape[size_t(s.axis)] : 0;
      if (d->rank != int32_t(shape.size()) ||
          size != int64_t(d->shape[s.axis]) * ranks)
        return makeStatus(
            TFC_MISMATCH,
            roleName(model, TFC_ROLE_INPUT, index) + ": expected the whole " +
                "tensor, axis " + std::to_string(s.axis) + " of " +
                std::to_string(d->shape[s.axis] * ranks) + " (" +
                std::to_string(ranks) + " ranks' parts of " +
                std::to_string(d->shape[s.axis]) + "), got " +
                describe(whole->dtype, int32_t(shape.size()), shape.data()));
      shape[size_t(s.axis)] /= ranks;
    }
    if (tfc_status st = tfc_array_create(whole->dtype, int32_t(shape.size()),
                                         shape.data(), part))
      return st;
    size_t size = tfc_dtype_size(whole->dtype);
    auto dtype = static_cast<tfc::DType>(whole->dtype);
    if (s.axis < 0) {
      std::memcpy((*part)->data.data(), whole->data.data(),
                  tfc_array_nbytes(*part));
      return nullptr;
    }
    forEachPiece(whole->shape, s.axis, s.groups, ranks, model->rank,
                 [&](int64_t from, int64_t to, int64_t count) {
                   copyElements(whole->data.data() + size_t(from) * size, dtype,
                                (*part)->data.data() + size_t(to) * size, dtype,
                                count);
                 });
    return nullptr;
  });
}

tfc_status tfc_model_gather_output(tfc_model *model, int32_t index,
                                   const tfc_array *part, tfc_array **whole) {
  if (!model || !part || !whole || index < 0 ||
      index >= model->manifest->num_results)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      "tfc_model_gather_output: needs a model, an output "
                      "index in range, an array and room for the whole");
  return guard([&]() -> tfc_status {
    tfc_tensor_split s = tfc_model_output_split(model, index);
    int32_t ranks = tfc_model_ranks(model);
    std::vector<int64_t> shape = part->shape;
    if (s.axis >= 0)
      shape = wholeShape(int32_t(shape.size()), shape.data(), s.axis, ranks);
    if (tfc_status st = tfc_array_create(part->dtype, int32_t(shape.size()),
                                         shape.data(), whole))
      return st;
    if (s.axis < 0) {
      std::memcpy((*whole)->data.data(), part->data.data(),
                  tfc_array_nbytes(*whole));
      return nullptr;
    }
    // Each rank's part in its place among zeros, summed over the ranks in
    // f32 (exact: every element is one rank's value plus zeros).
    auto dtype = static_cast<tfc::DType>(part->dtype);
    if (dtype != tfc::DType::F32 && dtype != tfc::DType::F16 &&
        dtype != tfc::DType::BF16)
      return makeStatus(TFC_UNIMPLEMENTED,
                        "tfc_model_gather_output: a split output of integers");
    std::vector<float> sum(
        size_t(tfc_array_nbytes(*whole) / tfc_dtype_size(part->dtype)), 0.0f);
    size_t size = tfc_dtype_size(part->dtype);
    forEachPiece(shape, s.axis, s.groups, ranks, model->rank,
                 [&](int64_t at, int64_t from, int64_t count) {
                   copyElements(part->data.data() + size_t(from) * size, dtype,
                                reinterpret_cast<uint8_t *>(sum.data() + at),
                                tfc::DType::F32, count);
                 });
    std::string error;
    if (!allReduceSum(sum.data(), int64_t(sum.size()), error))
      return makeStatus(TFC_IO_ERROR, "model " + model->path + ": " + error);
    copyElements(reinterpret_cast<const uint8_t *>(sum.data()), tfc::DType::F32,
                 (*whole)->data.data(), dtype, int64_t(sum.size()));
    return nullptr;
  });
}

uint64_t tfc_model_weight_bytes(const tfc_model *model) {
  if (!model)
    return 0;
  uint64_t bytes = 0;
  for (int32_t arg : model->weightArgs)
    if (model->buffers[size_t(arg)] ||
        std::any_of(model->pendingConversions.begin(),
                    model->pendingConversions.end(), [&](const auto &p) {
                      return model->weightArgs[size_t(p.first)] == arg;
                    }))
      bytes += tfc_tensor_desc_nbytes(&model->manifest->args[arg]);
  return bytes;
}

} // extern "C"
