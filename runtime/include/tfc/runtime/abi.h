/*===- abi.h - The contract between a compiled model and the runtime ------===*
 *
 * A model compiled by tfc-compile is a shared library that exports exactly two
 * symbols, both with C linkage:
 *
 *   const tfc_manifest *tfc_model_manifest(void);
 *   void tfc_model_run(void **buffers);
 *
 * `buffers` holds one pointer per argument, then one per result, in manifest
 * order. Each points to a dense row-major buffer of the declared dtype and
 * shape, aligned to 64 bytes (weights: to their element size); results are
 * written in place (the caller owns every buffer). Weights are arguments like
 * any other: the runtime binds them by name from a safetensors file.
 *
 * A model may also export `void tfc_model_weights_changed(void)`: the runtime
 * calls it after every (re)binding of weights, so that whatever the model
 * derived from them (packed copies of weight matrices) is rebuilt. Weights
 * must not change while they are bound; to change them, bind them again.
 *
 * Compiled code allocates its temporaries through the three functions below,
 * which the runtime defines (libtfcrt): a caching allocator, so that working
 * memory is allocated once and reused across runs.
 *
 * This header is C and includes nothing from LLVM or MLIR.
 *===----------------------------------------------------------------------===*/

#ifndef TFC_RUNTIME_ABI_H
#define TFC_RUNTIME_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TFC_ABI_VERSION 1u
/* "TFCM" */
#define TFC_MANIFEST_MAGIC 0x4d434654u

typedef enum tfc_dtype {
  TFC_DTYPE_F32 = 0,
  TFC_DTYPE_F16 = 1,
  TFC_DTYPE_BF16 = 2,
  TFC_DTYPE_I64 = 3,
  TFC_DTYPE_I32 = 4,
  TFC_DTYPE_BOOL = 5, /* one byte per element */
} tfc_dtype;

typedef enum tfc_tensor_role {
  TFC_ROLE_INPUT = 0,  /* supplied by the caller on each run */
  TFC_ROLE_WEIGHT = 1, /* bound once by name (safetensors) */
  TFC_ROLE_OUTPUT = 2, /* written by the model */
} tfc_tensor_role;

typedef struct tfc_tensor_desc {
  const char *name;
  int32_t dtype; /* tfc_dtype */
  int32_t role;  /* tfc_tensor_role */
  int32_t rank;
  const int64_t *shape; /* rank entries, all static */
} tfc_tensor_desc;

typedef struct tfc_manifest {
  uint32_t magic;       /* TFC_MANIFEST_MAGIC */
  uint32_t abi_version; /* TFC_ABI_VERSION */
  const char *entry;    /* name of the compiled function */
  const char *target;   /* "cpu" or "nvptx" */
  int32_t num_args;     /* inputs and weights, in call order */
  int32_t num_results;
  const tfc_tensor_desc *args;
  const tfc_tensor_desc *results;
} tfc_manifest;

typedef const tfc_manifest *(*tfc_model_manifest_fn)(void);
typedef void (*tfc_model_run_fn)(void **buffers);
typedef void (*tfc_model_weights_changed_fn)(void);

/* Provided by the runtime; called by compiled code for its temporaries. */
void *_mlir_memref_to_llvm_alloc(size_t size);
void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t size);
void _mlir_memref_to_llvm_free(void *ptr);

#ifdef __cplusplus
}
#endif

#endif /* TFC_RUNTIME_ABI_H */
