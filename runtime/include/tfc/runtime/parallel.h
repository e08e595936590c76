/*===- parallel.h - Tensor-parallel models in the C API ----------*- C -*-===*
 *
 * A model built with tfc-compile --tensor-parallel=N runs as the N ranks
 * of an MPI job (mpirun -np N), each process loading the same library:
 * tfc_model_load joins the job (Open MPI, opened at run time; abi.h,
 * "Tensor parallelism") and fails with one line when the job does not
 * have N ranks or MPI cannot be opened; tfc_model_bind_weights binds this
 * rank's part of each split weight from the whole tensors of the file
 * (tfc_model_bind_weight takes the part). Split inputs and outputs (a KV
 * cache's heads) are the rank's part: a
 * caller holding the whole tensors takes the rank's part of an input with
 * tfc_model_input_part and puts the outputs' parts together with
 * tfc_model_gather_output. A model runs one call at a time: every rank
 * runs the same calls in the same order (they meet in each all-reduce),
 * on no more than one context at a time.
 *
 *===----------------------------------------------------------------------===*/

#ifndef TFC_RUNTIME_PARALLEL_H
#define TFC_RUNTIME_PARALLEL_H

#include "tfc/runtime/api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The ranks the model is split across (1 for a model that is not), and
 * this process's rank among them (0 for such a model). */
TFC_API int32_t tfc_model_ranks(const tfc_model *model);
TFC_API int32_t tfc_model_rank(const tfc_model *model);

/* How input or output `index` is split ({-1, 1}: not split; abi.h's
 * tfc_tensor_split); {-1, 1} for an index out of range too. */
TFC_API tfc_tensor_split tfc_model_input_split(const tfc_model *model,
                                               int32_t index);
TFC_API tfc_tensor_split tfc_model_output_split(const tfc_model *model,
                                                int32_t index);

/* This rank's part of `whole`, a whole tensor for input `index` (its split
 * axis `ranks` times the model's), as a new array in *part; for an input
 * that is not split, a copy. MISMATCH naming the input when `whole`'s
 * split axis is not the whole one. */
TFC_API tfc_status tfc_model_input_part(const tfc_model *model, int32_t index,
                                        const tfc_array *whole,
                                        tfc_array **part);

/* The whole of output `index` from every rank's `part` (each rank calls it,
 * in the same order: a collective), as a new array in *whole; for an
 * output that is not split, a copy. */
TFC_API tfc_status tfc_model_gather_output(tfc_model *model, int32_t index,
                                           const tfc_array *part,
                                           tfc_array **whole);

/* The bytes of the weights bound on this rank (its parts of the split
 * weights, all of the others); 0 before any are bound. */
TFC_API uint64_t tfc_model_weight_bytes(const tfc_model *model);

#ifdef __cplusplus
}
#endif

#endif /* TFC_RUNTIME_PARALLEL_H */
