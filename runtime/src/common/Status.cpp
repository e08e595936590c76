//===- Status.cpp - The C API's statuses and element types ----------------===//
//
// tfc_status, and the helpers the other files make statuses and their
// messages with (makeStatus, quote, describe, roleName, fromGpu, and
// checkPath for NOT_FOUND); the element type and tensor size functions.
//
//===----------------------------------------------------------------------===//

#include "ModelImpl.h"

#include <cstdio>

#include "tfc/runtime/dtype.h"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>
#include <vector>

using tfc::DType;

namespace {

/// Returned when a status itself cannot be allocated; never freed.
tfc_status_impl outOfMemoryStatus{TFC_OUT_OF_MEMORY, "out of memory"};

} // namespace

namespace tfc::rt {

tfc_status makeStatus(tfc_status_code code, std::string message) {
  try {
    return new tfc_status_impl{code, std::move(message)};
  } catch (...) {
    return &outOfMemoryStatus;
  }
}

std::string quote(const char *name) {
  if (!name)
    return "'<null>'";
  // Control characters are written escaped: a message stays one line.
  std::string text = "'";
  for (const char *c = name; *c; ++c) {
    unsigned char u = static_cast<unsigned char>(*c);
    if (u == '\n')
      text += "\\n";
    else if (u == '\t')
      text += "\\t";
    else if (u < 0x20 || u == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", u);
      text += hex;
    } else {
      text += *c;
    }
  }
  return text + "'";
}

std::string describe(int32_t dtype, int32_t rank, const int64_t *shape) {
  return std::string(tfc_dtype_name(dtype)) + " " +
         tfc::shapeString(shape, rank > 0 && shape ? rank : 0);
}

std::string describe(const tfc_tensor_desc &desc) {
  return describe(desc.dtype, desc.rank, desc.shape);
}

tfc_status checkPath(const char *path, const std::string &what) {
  struct stat st;
  if (::stat(path, &st) == 0)
    return nullptr;
  int error = errno;
  // A symbolic link loop, a path too long, no permission: said as they are.
  return makeStatus(error == ENOENT || error == ENOTDIR ? TFC_NOT_FOUND
                                                        : TFC_IO_ERROR,
                    what + ": " + std::strerror(error));
}

std::string roleName(const tfc_model *model, tfc_tensor_role role,
                     int32_t index) {
  const tfc_tensor_desc *desc =
      role == TFC_ROLE_INPUT    ? tfc_model_input(model, index)
      : role == TFC_ROLE_WEIGHT ? tfc_model_weight(model, index)
                                : tfc_model_output(model, index);
  const char *kind = role == TFC_ROLE_INPUT    ? "input"
                     : role == TFC_ROLE_WEIGHT ? "weight"
                                               : "output";
  return std::string(kind) + " " + std::to_string(index) + " " +
         quote(desc ? desc->name : nullptr);
}

tfc_status fromGpu(tfc::cuda::GpuError error) {
  return error ? makeStatus(error.code, std::move(error.message)) : nullptr;
}

} // namespace tfc::rt

using namespace tfc::rt;

extern "C" {

/*===-- Status ------------------------------------------------------------===*/

tfc_status_code tfc_status_get_code(tfc_status status) {
  return status ? status->code : TFC_OK;
}

const char *tfc_status_message(tfc_status status) {
  return status ? status->message.c_str() : "";
}

void tfc_status_free(tfc_status status) {
  if (status != &outOfMemoryStatus)
    delete status;
}

const char *tfc_status_code_name(tfc_status_code code) {
  switch (code) {
  case TFC_OK:
    return "OK";
  case TFC_INVALID_ARGUMENT:
    return "INVALID_ARGUMENT";
  case TFC_NOT_FOUND:
    return "NOT_FOUND";
  case TFC_IO_ERROR:
    return "IO_ERROR";
  case TFC_BAD_FORMAT:
    return "BAD_FORMAT";
  case TFC_MISMATCH:
    return "MISMATCH";
  case TFC_FAILED_PRECONDITION:
    return "FAILED_PRECONDITION";
  case TFC_OUT_OF_MEMORY:
    return "OUT_OF_MEMORY";
  case TFC_UNIMPLEMENTED:
    return "UNIMPLEMENTED";
  case TFC_INTERNAL:
    return "INTERNAL";
  }
  return "UNKNOWN";
}

/*===-- Element types -----------------------------------------------------===*/

size_t tfc_dtype_size(int32_t dtype) {
  return tfc::isValidDType(dtype) ? tfc::dtypeSize(DType(dtype)) : 0;
}

const char *tfc_dtype_name(int32_t dtype) {
  return tfc::isValidDType(dtype) ? tfc::dtypeName(DType(dtype)) : "?";
}

size_t tfc_tensor_desc_nbytes(const tfc_tensor_desc *desc) {
  if (!desc || desc->rank < 0 || (desc->rank > 0 && !desc->shape) ||
      !tfc::isValidDType(desc->dtype))
    return 0;
  std::vector<int64_t> shape(desc->shape, desc->shape + desc->rank);
  return tfc::tensorBytes(shape, tfc::dtypeSize(DType(desc->dtype)))
      .value_or(0);
}

} // extern "C"
