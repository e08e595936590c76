/*===- api.h - The tfc runtime C API --------------------------------------===*
 *
 * Loads a compiled model (a shared library implementing abi.h), binds its
 * weights from a safetensors file and its inputs and outputs to caller
 * buffers, and runs it.
 *
 *   tfc_model *model;
 *   tfc_status s = tfc_model_load("model.so", &model);
 *   if (!s) s = tfc_model_bind_weights(model, "model.safetensors");
 *   if (!s) s = tfc_model_bind_input(model, 0, x);   // 64-byte aligned
 *   if (!s) s = tfc_model_bind_output(model, 0, y);
 *   if (!s) s = tfc_model_invoke(model);
 *   if (s) { fprintf(stderr, "%s\n", tfc_status_message(s));
 *tfc_status_free(s); } tfc_model_destroy(model);
 *
 * Conventions:
 *  - A tfc_status is NULL on success; otherwise the caller owns it and frees it
 *    with tfc_status_free. Its message is one line naming the file, the tensor
 *    or argument, and what was expected.
 *  - No C++ exception crosses this API.
 *  - Handles are created and destroyed explicitly. A model serves one call
 *    at a time: a call that runs it or changes its bindings while another
 *    such call is under way on another thread fails with
 *    FAILED_PRECONDITION ("model m.so is in use by another call on another
 *    thread ..."); binding and running from different threads in turn is
 *    the caller's to order. Different models are independent, also two of
 *    the same file: each runs a private copy of its library taken when it
 *    is loaded (so a library rebuilt at a loaded path is read again). The
 *    allocator behind compiled code is thread-safe.
 *  - Tensors are indexed per role: inputs 0..num_inputs-1 and weights
 *    0..num_weights-1 in the manifest's argument order, outputs
 *    0..num_outputs-1 in result order.
 *  - GPU models (manifest target "nvptx") take the same host buffers: the
 *    runtime owns one device buffer per argument and result, copies weights
 *    to the device when they are bound, inputs before each run, and outputs
 *    back after it. Inputs and outputs may instead be bound to device
 *    buffers (below, "Device tensors"), used in place. The CUDA driver
 *    (libcuda.so.1, or $TFC_CUDA_DRIVER) is opened on first need; see
 *    runtime/README.md.
 *
 * This header is C and includes nothing from LLVM or MLIR.
 *===----------------------------------------------------------------------===*/

#ifndef TFC_RUNTIME_API_H
#define TFC_RUNTIME_API_H

#include "tfc/runtime/abi.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TFC_API __attribute__((visibility("default")))
#else
#define TFC_API
#endif

/*===-- Status ------------------------------------------------------------===*/

typedef enum tfc_status_code {
  TFC_OK = 0,
  TFC_INVALID_ARGUMENT = 1,    /* a bad parameter: NULL, index out of range */
  TFC_NOT_FOUND = 2,           /* a file, symbol or tensor that is absent */
  TFC_IO_ERROR = 3,            /* open/read/write/map failed */
  TFC_BAD_FORMAT = 4,          /* a malformed file or manifest */
  TFC_MISMATCH = 5,            /* dtype or shape differs from the manifest */
  TFC_FAILED_PRECONDITION = 6, /* e.g. running with an unbound argument */
  TFC_OUT_OF_MEMORY = 7,
  TFC_UNIMPLEMENTED = 8,
  TFC_INTERNAL = 9,
} tfc_status_code;

typedef struct tfc_status_impl *tfc_status; /* NULL means OK */

TFC_API tfc_status_code tfc_status_get_code(tfc_status status);
/* "" for NULL. Valid until tfc_status_free. */
TFC_API const char *tfc_status_message(tfc_status status);
TFC_API void tfc_status_free(tfc_status status);
/* "OK", "INVALID_ARGUMENT", ... */
TFC_API const char *tfc_status_code_name(tfc_status_code code);

/*===-- Element types -----------------------------------------------------===*/

/* Arrays read from files may hold types beyond tfc_dtype (abi.h). numpy has
 * no bfloat16: bf16 data is stored in .npy as '<u2' and read as
 * TFC_DTYPE_U16, which tfc_model_check_input accepts where bf16 is expected. */
#define TFC_DTYPE_F64 6
#define TFC_DTYPE_I8 7
#define TFC_DTYPE_U8 8
#define TFC_DTYPE_I16 9
#define TFC_DTYPE_U16 10
#define TFC_DTYPE_U32 11
#define TFC_DTYPE_U64 12

/* Bytes per element; 0 for an unknown type. */
TFC_API size_t tfc_dtype_size(int32_t dtype);
/* "f32", "bf16", "bool", ...; "?" for an unknown type. */
TFC_API const char *tfc_dtype_name(int32_t dtype);
/* Bytes of a dense tensor; 0 for an invalid one (or an empty one). */
TFC_API size_t tfc_tensor_desc_nbytes(const tfc_tensor_desc *desc);

/*===-- Models ------------------------------------------------------------===*/

typedef struct tfc_model tfc_model;

/* dlopens `path` and checks the two ABI symbols, the manifest's magic, ABI
 * version, target and descriptors. NOT_FOUND for a missing file, BAD_FORMAT
 * for a library that is not a tfc model ("not a tfc model: m.so: missing
 * symbol tfc_model_manifest"), that dlopen refuses ("cannot load model m.so:
 * ...") or whose target is neither "cpu" nor "nvptx", or whose variants
 * (abi.h "Variants") are not one cpu model at several batch sizes and
 * lengths ("model m.so: variant of length 4: input 'mask' is f32 [3, 7],
 * ..."),
 * MISMATCH for another ABI version. For an "nvptx" model it also opens the
 * CUDA driver, loads the model's kernels and allocates its device buffers:
 * FAILED_PRECONDITION without a driver ("cannot run model m.so: target
 * nvptx needs a CUDA driver: no CUDA driver (...)") or when the driver
 * refuses the kernels ("cannot load model m.so: cuModuleLoadData failed:
 * ..."), OUT_OF_MEMORY when device memory runs out. */
TFC_API tfc_status tfc_model_load(const char *path, tfc_model **out);
TFC_API void tfc_model_destroy(tfc_model *model);

/* The model's manifest: the library's, or for a model built for several
 * batch sizes or lengths the runtime's copy of it with the shapes of the
 * current ones (tfc_model_set_batch and tfc_model_set_length change them in
 * place). */
TFC_API const tfc_manifest *tfc_model_manifest_of(const tfc_model *model);
TFC_API const char *tfc_model_path(const tfc_model *model);
/* The manifest's target: "cpu" or "nvptx" ("" for NULL). */
TFC_API const char *tfc_model_target(const tfc_model *model);
TFC_API int32_t tfc_model_num_inputs(const tfc_model *model);
TFC_API int32_t tfc_model_num_weights(const tfc_model *model);
TFC_API int32_t tfc_model_num_outputs(const tfc_model *model);
/* NULL when the index is out of range. The descriptors live as long as the
 * model; the shapes of a model built for several batch sizes or lengths are
 * those of the current ones (tfc_model_set_batch and tfc_model_set_length
 * update them in place). */
TFC_API const tfc_tensor_desc *tfc_model_input(const tfc_model *model,
                                               int32_t index);
TFC_API const tfc_tensor_desc *tfc_model_weight(const tfc_model *model,
                                                int32_t index);
TFC_API const tfc_tensor_desc *tfc_model_output(const tfc_model *model,
                                                int32_t index);
/* Index of the weight called `name`, or -1. */
TFC_API int32_t tfc_model_find_weight(const tfc_model *model, const char *name);

/* Memory-maps a safetensors file and binds every weight by name, checking its
 * dtype and shape (MISMATCH names the tensor; NOT_FOUND for a weight the file
 * lacks). A model compiled from an ONNX file binds from that file instead
 * (and its external data files, next to it): each weight where the compiler
 * found it (abi.h, "Weights in the model's own file"); another file is
 * refused (BAD_FORMAT naming the tensor or the initializer that differs). An
 * f32, f16 or bf16 tensor binds to a weight of another of these types through a
 * converted copy (narrowing rounds to nearest even), made once: here for an
 * nvptx model; for a cpu model on first need (the first run,
 * tfc_model_weight_data, saving packed weights), on the threads
 * tfc_set_num_threads asked for, or never where a packed weights file loaded
 * before holds it converted (below; an OUT_OF_MEMORY then comes from the run).
 * Tensors of the weight's dtype aligned to their element size in the file are
 * used in place, and so are a cpu model's weights at any offset that only its
 * matmul kernel reads, packing them (abi.h, "Weights at any address"); others
 * are copied once into an aligned buffer. The mapping
 * lives until the model is destroyed or weights are bound again. Extra tensors
 * in the file are ignored. The file must not change while it is bound: every
 * run of a CPU model first checks it (one fstat: size, modification and
 * change times), and one written, truncated or extended since fails the run
 * with FAILED_PRECONDITION ("weights file w.safetensors changed after it was
 * bound (was ...; now ...): bind it again"); so does a changed packed weights
 * file. A file changed while a run reads it is undefined behaviour (the map
 * can raise SIGBUS), as with any memory-mapped weights. */
TFC_API tfc_status tfc_model_bind_weights(tfc_model *model,
                                          const char *safetensors_path);
/* Binds one weight to a caller buffer (64-byte aligned, the manifest's dtype
 * and shape), which must outlive the runs. (An nvptx model copies weights
 * to the device here, in both functions: bind again after changing them.) */
TFC_API tfc_status tfc_model_bind_weight(tfc_model *model, int32_t index,
                                         const void *data);

/* Packed weights (CPU models; abi.h, "Packed weights"). A model packs each
 * weight it multiplies by on its first use, quantizing it there for
 * --quantize-weights, so a process's first run takes longer than the rest.
 * tfc_model_save_packed_weights writes the copies the model holds to `path`
 * (through a temporary file renamed into place), with the weights bound
 * through a conversion (an f32 checkpoint for a bf16 model) as converted; in a
 * later process, tfc_model_load_packed_weights maps such a file read-only and
 * hands its copies to the model, which then packs none of them and converts
 * none of those weights: they are read from the map in place (the page cache's
 * pages, shared by the processes that map the file). Both need every weight
 * bound from one file (tfc_model_bind_weights; FAILED_PRECONDITION otherwise).
 * The packed file records that file's size and modification time, the model
 * library's size and a hash of its bytes (only the library knows which weights
 * its products quantize, and how), the kernels' packing format, and the name,
 * dtype and shape of each copy's weight, and loading checks them all: MISMATCH
 * naming what differs ("packed weights file p.packed was packed from other
 * weights (a file of 100 bytes, modified ...; w.safetensors is ...): save it
 * again"). Its header and table are hashed (BAD_FORMAT when damaged, or for a
 * file that is not one); the packed bytes are not: a file altered after it was
 * saved gives wrong outputs. Saving before the model has run is
 * FAILED_PRECONDITION ("model m.so has packed no weights yet: run it once,
 * then save them"); a model that packs nothing (nvptx, or built without the
 * CPU micro-kernels) gives UNIMPLEMENTED; IO_ERROR when writing fails. A model
 * loads one packed file per binding of its weights (FAILED_PRECONDITION for a
 * second). The map lives until weights are bound again or the model is
 * destroyed. */
TFC_API tfc_status tfc_model_save_packed_weights(tfc_model *model,
                                                 const char *path);
TFC_API tfc_status tfc_model_load_packed_weights(tfc_model *model,
                                                 const char *path);

/* The buffer bound to weight `index` (inside the weights file's mapping when
 * the tensor was aligned there, inside a packed weights file's for a
 * conversion it held), or NULL; a conversion not made yet is made here
 * (NULL when memory runs out). */
TFC_API const void *tfc_model_weight_data(const tfc_model *model,
                                          int32_t index);
/* Caller buffers, 64-byte aligned, dense, of the manifest's dtype and shape;
 * they must stay valid while the model runs. Binding replaces an earlier
 * binding. */
TFC_API tfc_status tfc_model_bind_input(tfc_model *model, int32_t index,
                                        const void *data);
TFC_API tfc_status tfc_model_bind_output(tfc_model *model, int32_t index,
                                         void *data);

/* Checks an array against input `index` (MISMATCH otherwise, naming the
 * input and both types); U16 passes for bf16. */
TFC_API tfc_status tfc_model_check_input(const tfc_model *model, int32_t index,
                                         int32_t dtype, int32_t rank,
                                         const int64_t *shape);

/* Batch sizes and sequence lengths (a model built for several, abi.h
 * "Variants"). The number of batch sizes and of lengths the model was built
 * for (0 for one), and the i-th of them, increasing (0 when out of
 * range). */
TFC_API int32_t tfc_model_num_batches(const tfc_model *model);
TFC_API int64_t tfc_model_built_batch(const tfc_model *model, int32_t index);
TFC_API int32_t tfc_model_num_lengths(const tfc_model *model);
TFC_API int64_t tfc_model_built_length(const tfc_model *model, int32_t index);
/* The number of sequences and of new tokens per sequence the model takes
 * now (the largest and longest built at load); 0 for a model of one batch
 * size (length). */
TFC_API int64_t tfc_model_batch(const tfc_model *model);
TFC_API int64_t tfc_model_length(const tfc_model *model);
/* Makes the model take `length` new tokens per sequence, any of 1 to the
 * longest built: it runs as the shortest built length of at least
 * `length`, its inputs padded with zeros and its outputs cut (copies in
 * tfc_model_invoke and tfc_model_time, which time them too). The
 * descriptors of inputs and outputs then have the new extent on their
 * sequence axis, and earlier bindings of inputs and outputs are dropped
 * (bind buffers of the new shapes); weights stay bound. Setting the current
 * length again changes nothing and keeps the bindings. A length that runs
 * padded goes through runtime buffers of the built shape, allocated on its
 * variant's first padded run and kept (OUT_OF_MEMORY when they cannot
 * be); their outputs are filled with 0xFF bytes before every run, so that
 * an element the model does not write shows in the caller's outputs.
 * INVALID_ARGUMENT outside [1, longest] ("model m.so: length 200 is longer
 * than the longest it was built for, 128"; "model m.so: length 0 is less
 * than 1"); FAILED_PRECONDITION for a model of one length
 * ("model m.so was built for one sequence length; compile it with
 * --seq-len L1,L2,... to run other lengths"). */
TFC_API tfc_status tfc_model_set_length(tfc_model *model, int64_t length);
/* Makes the model take `batch` sequences, any number from 1: it runs as the
 * smallest built batch size of at least `batch`, padded and cut as for a
 * length; a batch larger than the largest built runs in slices of the
 * largest, the last as the smallest built batch that holds it (slices that
 * need no padding run on the caller's buffers, without copies, where the
 * batch axis is a tensor's first). Bindings, staging buffers and errors as
 * for tfc_model_set_length: INVALID_ARGUMENT for a batch below 1 or one
 * whose tensors' sizes overflow, FAILED_PRECONDITION for a model of one
 * batch size ("model m.so was built for one batch size; compile it with
 * --batch B1,B2,... to run other batch sizes"). */
TFC_API tfc_status tfc_model_set_batch(tfc_model *model, int64_t batch);
/* The batch (sequence) axis of input or output `index`: the axis whose
 * extent follows the batch size (the length); -1 for a tensor without one,
 * an index out of range or a model of one batch size and length. */
TFC_API int32_t tfc_model_input_batch_axis(const tfc_model *model,
                                           int32_t index);
TFC_API int32_t tfc_model_output_batch_axis(const tfc_model *model,
                                            int32_t index);
TFC_API int32_t tfc_model_input_length_axis(const tfc_model *model,
                                            int32_t index);
TFC_API int32_t tfc_model_output_length_axis(const tfc_model *model,
                                             int32_t index);

/* Runs the model once. FAILED_PRECONDITION when an argument or result is not
 * bound; INVALID_ARGUMENT, before anything runs, when an input with bounds
 * (tfc_tensor_desc.bounds: token ids) holds a value outside them ("m.so:
 * input 0 'input_ids' holds 50300 at [0, 5], outside [0, 50257)"). (Named
 * invoke rather than run: `tfc_model_run` is the symbol every compiled model
 * exports, see abi.h.) An nvptx model's inputs are copied to the device, its
 * outputs' device buffers filled with 0xFF bytes (NaN, -1: an element the model
 * does not write shows), the model run and waited for, and its outputs copied
 * back; a failed CUDA call gives INTERNAL (or OUT_OF_MEMORY) naming the model
 * and the call ("model m.so: cuLaunchKernel failed for kernel 'k':
 * CUDA_ERROR_LAUNCH_FAILED (unspecified launch failure)"). A cpu model whose
 * temporary cannot be allocated stops and gives OUT_OF_MEMORY naming its size
 * (its outputs then are not all written). */
TFC_API tfc_status tfc_model_invoke(tfc_model *model);

/* Runs the model `warmup` untimed times, then `runs` times, and stores the
 * milliseconds of each timed run in ms[0..runs-1]: the model's own compute.
 * Outputs are filled with 0xFF bytes before every run, outside the timing.
 * A cpu model is timed with a steady clock around each run; an nvptx model
 * gets its inputs copied once, each run bracketed by CUDA events on the
 * runtime's stream, and its outputs copied back once at the end. A batch
 * size or length that runs padded (tfc_model_set_batch,
 * tfc_model_set_length) has its padding and cutting copies timed with each
 * run. Errors as
 * for tfc_model_invoke; INVALID_ARGUMENT for runs < 1, warmup < 0 or a NULL
 * `ms`. */
TFC_API tfc_status tfc_model_time(tfc_model *model, int32_t warmup,
                                  int32_t runs, double *ms);

/*===-- Execution contexts ------------------------------------------------===*/

/* A context serves one request of a loaded CPU model at a time: it holds its
 * own bindings of the inputs and outputs (and, for a model built for several
 * batch sizes or lengths, its own shape and padded buffers), while the
 * library, the weights (mapped, converted and packed once) and the kernels'
 * packed copies stay the model's, shared read-only. Any number of contexts of
 * one model run at once, each from one thread at a time (a second call on a
 * context while one is under way is refused with FAILED_PRECONDITION, as
 * for a model), and beside the model's own runs.
 *
 *   tfc_context *c;
 *   tfc_status s = tfc_context_create(model, &c);      // weights bound
 *   if (!s) s = tfc_context_bind_input(c, 0, x);
 *   if (!s) s = tfc_context_bind_output(c, 0, y);
 *   if (!s) s = tfc_context_invoke(c);
 *   tfc_context_destroy(c);
 *
 * Creating a context makes the weights ready (the conversions deferred by
 * tfc_model_bind_weights) and needs every weight bound (FAILED_PRECONDITION
 * otherwise); an nvptx model gives UNIMPLEMENTED (the GPU serves one call at
 * a time). While a model has contexts, the calls that would rebind its
 * weights (tfc_model_bind_weights, tfc_model_bind_weight,
 * tfc_model_load_packed_weights) fail with FAILED_PRECONDITION ("model m.so
 * has 2 contexts, which share its weights read-only: destroy them before
 * binding weights again"). tfc_model_destroy of a model with contexts leaves
 * it to the destroy of its last context. */
typedef struct tfc_context tfc_context;
TFC_API tfc_status tfc_context_create(tfc_model *model, tfc_context **out);
TFC_API void tfc_context_destroy(tfc_context *context);
/* The context's descriptors of input or output `index` (its current batch
 * size and length), or NULL when out of range. */
TFC_API const tfc_tensor_desc *tfc_context_input(const tfc_context *context,
                                                 int32_t index);
TFC_API const tfc_tensor_desc *tfc_context_output(const tfc_context *context,
                                                  int32_t index);
/* As tfc_model_batch, tfc_model_length, tfc_model_check_input,
 * tfc_model_set_batch and tfc_model_set_length, for this context (which
 * starts at the largest batch size and the longest length built). */
TFC_API int64_t tfc_context_batch(const tfc_context *context);
TFC_API int64_t tfc_context_length(const tfc_context *context);
TFC_API tfc_status tfc_context_check_input(const tfc_context *context,
                                           int32_t index, int32_t dtype,
                                           int32_t rank, const int64_t *shape);
TFC_API tfc_status tfc_context_set_batch(tfc_context *context, int64_t batch);
TFC_API tfc_status tfc_context_set_length(tfc_context *context, int64_t length);
/* As tfc_model_bind_input and tfc_model_bind_output, for this context. */
TFC_API tfc_status tfc_context_bind_input(tfc_context *context, int32_t index,
                                          const void *data);
TFC_API tfc_status tfc_context_bind_output(tfc_context *context, int32_t index,
                                           void *data);
/* Runs the model once on the context's bindings; errors as
 * tfc_model_invoke. */
TFC_API tfc_status tfc_context_invoke(tfc_context *context);

/*===-- Host arrays (.npy) ------------------------------------------------===*/

/* A dense host array with 64-byte aligned data, pre-faulted. */
typedef struct tfc_array tfc_array;

/* Zero-filled. */
TFC_API tfc_status tfc_array_create(int32_t dtype, int32_t rank,
                                    const int64_t *shape, tfc_array **out);
/* Reads a .npy file (see runtime/README.md for the accepted types). */
TFC_API tfc_status tfc_array_read_npy(const char *path, tfc_array **out);
/* bf16 is written as '<u2'. */
TFC_API tfc_status tfc_array_write_npy(const tfc_array *array,
                                       const char *path);
TFC_API void tfc_array_destroy(tfc_array *array);
TFC_API int32_t tfc_array_dtype(const tfc_array *array);
TFC_API int32_t tfc_array_rank(const tfc_array *array);
TFC_API const int64_t *tfc_array_shape(const tfc_array *array);
TFC_API void *tfc_array_data(tfc_array *array);
TFC_API size_t tfc_array_nbytes(const tfc_array *array);

/*===-- Allocator ---------------------------------------------------------===*/

/* Counters of the caching allocator behind _mlir_memref_to_llvm_*. */
typedef struct tfc_allocator_stats {
  uint64_t alloc_calls;   /* allocations requested by compiled code */
  uint64_t free_calls;    /* frees requested by compiled code */
  uint64_t fresh_allocs;  /* blocks obtained from the system */
  uint64_t fresh_bytes;   /* their bytes, in total */
  uint64_t reused_allocs; /* requests served from a free list */
  uint64_t live_blocks;   /* handed out and not yet freed */
  uint64_t live_bytes;
  uint64_t cached_blocks; /* on free lists */
  uint64_t cached_bytes;
  uint64_t foreign_frees; /* frees of pointers the allocator did not make */
} tfc_allocator_stats;

TFC_API void tfc_allocator_get_stats(tfc_allocator_stats *stats);
/* Returns every cached block to the system. */
TFC_API void tfc_allocator_trim(void);

/*===-- GPU ---------------------------------------------------------------===*/

/* Opens the CUDA driver if needed and writes a one-line description of the
 * runtime's device into buf (at most n bytes, NUL-terminated): "NVIDIA H200
 * (sm_90), driver 13.0". FAILED_PRECONDITION without a driver ("no CUDA
 * driver (...)"). */
TFC_API tfc_status tfc_device_describe(char *buf, size_t n);

/* Counters of the caching device allocator behind mgpuMemAlloc and the
 * runtime's own device buffers (the fields as for tfc_allocator_stats;
 * foreign_frees counts pointers it did not make, passed to cuMemFree). All
 * zero while no GPU model has run. */
TFC_API void tfc_device_allocator_get_stats(tfc_allocator_stats *stats);
/* Returns every cached device block to the driver (cuMemFree), after the
 * runtime's stream drains; nothing to do before the driver is opened. */
TFC_API void tfc_device_allocator_trim(void);

/*===-- Device tensors ----------------------------------------------------===*/

/* A dense tensor in device memory of the runtime's CUDA device (from its
 * caching device allocator, 256-byte aligned, zero-filled), so that an
 * nvptx model's inputs and outputs stay on the device between runs (a
 * decoder's KV cache, say): bound with tfc_model_bind_input_tensor /
 * bind_output_tensor, it is used in place, without the copies of host
 * buffers. Creating one opens the CUDA driver (FAILED_PRECONDITION without
 * one, as tfc_device_describe; contexts run cpu models only, so device
 * tensors bind to models); INVALID_ARGUMENT for an unknown dtype, a
 * negative rank or extent, a NULL shape of a positive rank;
 * OUT_OF_MEMORY when device memory runs out. */
typedef struct tfc_device_tensor tfc_device_tensor;
TFC_API tfc_status tfc_device_tensor_create(int32_t dtype, int32_t rank,
                                            const int64_t *shape,
                                            tfc_device_tensor **out);
/* Waits for the runtime's stream, then gives the memory back. A model the
 * tensor is bound to must not run again before another buffer is bound in
 * its place. */
TFC_API void tfc_device_tensor_destroy(tfc_device_tensor *tensor);
TFC_API int32_t tfc_device_tensor_dtype(const tfc_device_tensor *tensor);
TFC_API int32_t tfc_device_tensor_rank(const tfc_device_tensor *tensor);
TFC_API const int64_t *tfc_device_tensor_shape(const tfc_device_tensor *tensor);
TFC_API size_t tfc_device_tensor_nbytes(const tfc_device_tensor *tensor);
/* Its device address (a CUdeviceptr), for other CUDA code. */
TFC_API uint64_t tfc_device_tensor_pointer(const tfc_device_tensor *tensor);
/* Copy `nbytes` bytes between the tensor and host memory, from or at byte
 * `offset` of the tensor, and wait for the copy (INVALID_ARGUMENT when the
 * range passes the tensor's end or `host` is NULL; INTERNAL naming the call
 * when the driver fails). */
TFC_API tfc_status tfc_device_tensor_copy_from_host(tfc_device_tensor *tensor,
                                                    size_t offset,
                                                    const void *host,
                                                    size_t nbytes);
TFC_API tfc_status tfc_device_tensor_copy_to_host(
    const tfc_device_tensor *tensor, size_t offset, void *host, size_t nbytes);
/* Copies `nbytes` bytes on the device, from byte `src_offset` of `src` to
 * byte `dst_offset` of `dst` (a new token's keys into a cache, say); the
 * copy is queued on the runtime's stream, ordered with runs, and waited
 * for. */
TFC_API tfc_status tfc_device_tensor_copy(tfc_device_tensor *dst,
                                          size_t dst_offset,
                                          const tfc_device_tensor *src,
                                          size_t src_offset, size_t nbytes);
/* Copies `height` rows of `width_bytes` bytes on the device, row r from byte
 * src_offset + r * src_pitch of `src` to byte dst_offset + r * dst_pitch of
 * `dst` (a step's new keys [N, heads, 1, D] into slot s of a cache
 * [N, heads, slots, D]: pitches D and slots * D elements, all rows in one
 * copy), queued on the runtime's stream and waited for as
 * tfc_device_tensor_copy. INVALID_ARGUMENT for a NULL tensor, a width
 * beyond a pitch (more than one row), or rows outside either tensor;
 * INTERNAL naming the call when the driver fails. Overlapping rows of one
 * tensor give undefined contents. */
TFC_API tfc_status tfc_device_tensor_copy_2d(
    tfc_device_tensor *dst, size_t dst_offset, size_t dst_pitch,
    const tfc_device_tensor *src, size_t src_offset, size_t src_pitch,
    size_t width_bytes, size_t height);

/* Bind input or output `index` of an nvptx model to a device tensor of its
 * dtype and shape (U16 passes for bf16), which must stay alive while the
 * model runs: runs read and write it in place, and an output so bound is
 * not copied to the host; the model's own device buffer for it is freed
 * meanwhile. A bound output is still filled with 0xFF bytes before each
 * run; the bounds of a bounded input (token ids) are not
 * checked, its elements staying on the device. Binding a host buffer
 * (tfc_model_bind_input / bind_output) replaces a device binding and the
 * other way round; tfc_model_set_batch and set_length drop both. Errors,
 * one line each: FAILED_PRECONDITION for a cpu model ("model m.so is a cpu
 * model: device buffers bind to nvptx models only"), MISMATCH for another
 * dtype or shape ("m.so: output 0 'y': expected f32 [2, 3], got the device
 * tensor's f32 [3, 2]"), INVALID_ARGUMENT for an index out of range or a
 * NULL tensor. */
TFC_API tfc_status tfc_model_bind_input_tensor(tfc_model *model, int32_t index,
                                               const tfc_device_tensor *tensor);
TFC_API tfc_status tfc_model_bind_output_tensor(tfc_model *model, int32_t index,
                                                tfc_device_tensor *tensor);
/* The same for device memory of the caller's (a CUdeviceptr from
 * cuMemAlloc or another CUDA library in the runtime's context, the
 * primary context of device 0), which it says holds a dense tensor of
 * `dtype`, `rank` and `shape`: checked as for a device tensor, and the
 * pointer must be non-zero and 64-byte aligned (INVALID_ARGUMENT). */
TFC_API tfc_status tfc_model_bind_input_device(tfc_model *model, int32_t index,
                                               uint64_t device_ptr,
                                               int32_t dtype, int32_t rank,
                                               const int64_t *shape);
TFC_API tfc_status tfc_model_bind_output_device(tfc_model *model, int32_t index,
                                                uint64_t device_ptr,
                                                int32_t dtype, int32_t rank,
                                                const int64_t *shape);

/*===-- CUDA graphs -------------------------------------------------------===*/

/* An nvptx model's run (its kernel launches, copies and memsets) is
 * captured into a CUDA graph on its first run on a set of device buffers
 * (the model's own and those bound to it) and replayed by one
 * cuGraphLaunch on later runs on the same buffers; binding other device
 * buffers captures again (a few graphs are kept per model, the least
 * recently used dropped). Inputs and outputs bound to host buffers are
 * copied outside the graph, so they may change between runs. The
 * temporaries of a captured run stay allocated with its graph. Graphs are
 * on by default, off for models loaded while $TFC_CUDA_GRAPHS is 0, off or
 * false; they are not used where the driver lacks the graph entry points
 * (drivers before CUDA 11.4), and a run that a graph cannot hold (one that
 * asks for TMA tensor maps) or whose capture fails runs kernel by kernel,
 * as do the model's later runs. */
typedef struct tfc_cuda_graph_stats {
  uint64_t captures;         /* runs captured into a new graph (and run) */
  uint64_t replays;          /* runs that launched a graph captured before */
  uint64_t plain_runs;       /* runs launched kernel by kernel */
  uint64_t capture_failures; /* captures given up: the run went plain */
  uint64_t graphs;           /* graphs the model holds now */
} tfc_cuda_graph_stats;

/* Turns graphs on (enable != 0) or off for the model; off drops its
 * graphs. FAILED_PRECONDITION for a cpu model. */
TFC_API tfc_status tfc_model_set_cuda_graphs(tfc_model *model, int32_t enable);
/* The model's counters; FAILED_PRECONDITION for a cpu model. */
TFC_API tfc_status tfc_model_get_cuda_graph_stats(tfc_model *model,
                                                  tfc_cuda_graph_stats *stats);
/* "" while graphs run the model's runs, or can; otherwise why not ("turned
 * off", "the CUDA driver has no graph entry points", "the model uses TMA
 * tensor maps", ...); "" for a cpu model, or while another thread's call
 * holds the model. Valid until the next call on the model. */
TFC_API const char *tfc_model_cuda_graphs_off_reason(tfc_model *model);

/*===-- Threads -----------------------------------------------------------===*/

/* Sets the number of threads compiled CPU code uses: sets OMP_NUM_THREADS,
 * calls omp_set_num_threads when an OpenMP runtime is in the global scope
 * (dlsym(RTLD_DEFAULT)), and again through the handle of every model loaded
 * later (an OpenMP runtime a model pulls in stays local to it). Returns 1
 * when an OpenMP runtime was found now, else 0; -1, changing nothing, for a
 * count below 1 or above 8 per core (std::thread::hardware_concurrency). */
TFC_API int tfc_set_num_threads(int32_t num_threads);

#ifdef __cplusplus
}
#endif

#endif /* TFC_RUNTIME_API_H */
