//===- Arrays.cpp - Host arrays -------------------------------------------===//
//
// tfc_array: a tensor in host memory, aligned as the models want their
// buffers, made empty or read from and written to .npy files.
//
//===----------------------------------------------------------------------===//

#include "ModelImpl.h"

#include "tfc/runtime/dtype.h"
#include "tfc/runtime/npy.h"

#include <cerrno>
#include <cstring>
#include <optional>

using tfc::DType;
using namespace tfc::rt;

extern "C" {

tfc_status tfc_array_create(int32_t dtype, int32_t rank, const int64_t *shape,
                            tfc_array **out) {
  if (out)
    *out = nullptr;
  if (!out || rank < 0 || rank > 64 || (rank > 0 && !shape))
    return makeStatus(TFC_INVALID_ARGUMENT,
                      "tfc_array_create: invalid arguments");
  if (!tfc::isValidDType(dtype))
    return makeStatus(TFC_INVALID_ARGUMENT, "tfc_array_create: invalid dtype " +
                                                std::to_string(dtype));
  return guard([&]() -> tfc_status {
    auto array = std::make_unique<tfc_array>();
    array->dtype = dtype;
    array->shape.assign(shape, shape + rank);
    std::optional<size_t> nbytes =
        tfc::tensorBytes(array->shape, tfc::dtypeSize(DType(dtype)));
    if (!nbytes)
      return makeStatus(TFC_INVALID_ARGUMENT,
                        "tfc_array_create: invalid shape " +
                            tfc::shapeString(array->shape));
    if (!array->data.allocate(*nbytes))
      return makeStatus(TFC_OUT_OF_MEMORY,
                        "tfc_array_create: out of memory for " +
                            std::to_string(*nbytes) + " bytes");
    *out = array.release();
    return nullptr;
  });
}

tfc_status tfc_array_read_npy(const char *path, tfc_array **out) {
  if (out)
    *out = nullptr;
  if (!path || !out)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      "tfc_array_read_npy: path and out must not be NULL");
  return guard([&]() -> tfc_status {
    if (tfc_status s = checkPath(path, path))
      return s;
    tfc::NpyArray npy;
    std::string error;
    if (!tfc::readNpy(path, npy, error))
      return makeStatus(TFC_BAD_FORMAT, error);
    auto array = std::make_unique<tfc_array>();
    array->dtype = int32_t(npy.dtype);
    array->shape = std::move(npy.shape);
    array->data = std::move(npy.data);
    *out = array.release();
    return nullptr;
  });
}

tfc_status tfc_array_write_npy(const tfc_array *array, const char *path) {
  if (!array || !path)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      "tfc_array_write_npy: array and path must not be NULL");
  return guard([&]() -> tfc_status {
    std::string error;
    if (!tfc::writeNpy(path, DType(array->dtype), array->shape,
                       array->data.data(), error))
      return makeStatus(TFC_IO_ERROR, error);
    return nullptr;
  });
}

void tfc_array_destroy(tfc_array *array) { delete array; }

int32_t tfc_array_dtype(const tfc_array *array) {
  return array ? array->dtype : -1;
}

int32_t tfc_array_rank(const tfc_array *array) {
  return array ? int32_t(array->shape.size()) : 0;
}

const int64_t *tfc_array_shape(const tfc_array *array) {
  return array ? array->shape.data() : nullptr;
}

void *tfc_array_data(tfc_array *array) {
  return array ? array->data.data() : nullptr;
}

size_t tfc_array_nbytes(const tfc_array *array) {
  return array ? array->data.size() : 0;
}

} // extern "C"
