//===- Shapes.cpp - Batch sizes and sequence lengths ----------------------===//
//
// The C API of a model built for several batch sizes or sequence lengths
// (Variants.h): the sizes it was built for, the one it runs at now, the
// batch and sequence axes of its inputs and outputs.
//
//===----------------------------------------------------------------------===//

#include "ModelImpl.h"

using namespace tfc::rt;

namespace {

/// The variants of a model built for several batch sizes (`batches`) or
/// lengths, or null.
const tfc::ModelVariants *severalOf(const tfc_model *model, bool batches) {
  if (!model || !model->variants)
    return nullptr;
  const tfc::ModelVariants &v = *model->variants;
  return (batches ? v.batches() : v.lengths()).size() > 1 ? &v : nullptr;
}

int32_t numBuilt(const tfc_model *model, bool batches) {
  const tfc::ModelVariants *v = severalOf(model, batches);
  return v ? int32_t((batches ? v->batches() : v->lengths()).size()) : 0;
}

int64_t builtAt(const tfc_model *model, bool batches, int32_t index) {
  if (index < 0 || index >= numBuilt(model, batches))
    return 0;
  const tfc::ModelVariants &v = *model->variants;
  return (batches ? v.batches() : v.lengths())[size_t(index)];
}

/// The batch or sequence axis of input or output `index`, or -1.
int32_t axisOf(const tfc_model *model, bool input, int32_t index, bool batch) {
  if (!model || !model->variants || index < 0)
    return -1;
  size_t slot;
  if (input) {
    if (size_t(index) >= model->inputArgs.size())
      return -1;
    slot = size_t(model->inputArgs[size_t(index)]);
  } else {
    if (index >= model->manifest->num_results)
      return -1;
    slot = size_t(model->manifest->num_args) + size_t(index);
  }
  return batch ? model->variants->batchAxis(slot)
               : model->variants->lengthAxis(slot);
}

/// tfc_model_set_batch (`batch`) and tfc_model_set_length.
tfc_status setShape(tfc_model *model, bool batch, int64_t size) {
  const char *fn = batch ? "tfc_model_set_batch" : "tfc_model_set_length";
  if (!model)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      std::string(fn) + ": model must not be NULL");
  return onModel(model, fn, false, [&]() -> tfc_status {
    tfc::ModelVariants *variants = model->variants.get();
    if (!severalOf(model, batch))
      return makeStatus(
          TFC_FAILED_PRECONDITION,
          "model " + model->path +
              (batch ? " was built for one batch size; compile it with "
                       "--batch B1,B2,... to run other batch sizes"
                     : " was built for one sequence length; compile it "
                       "with --seq-len L1,L2,... to run other lengths"));
    bool changed = false;
    if (tfc_status s =
            setVariantsShape(model->path, *variants, batch, size, changed))
      return s;
    // The same shape again keeps the bindings: nothing changed.
    if (!changed)
      return nullptr;
    // The caller's buffers have the old shapes.
    for (int32_t arg : model->inputArgs)
      model->buffers[size_t(arg)] = nullptr;
    size_t numArgs = size_t(model->manifest->num_args);
    for (int32_t i = 0; i < model->manifest->num_results; ++i)
      model->buffers[numArgs + size_t(i)] = nullptr;
    return nullptr;
  });
}

} // namespace

namespace tfc::rt {

tfc_status setVariantsShape(const std::string &path,
                            tfc::ModelVariants &variants, bool batch,
                            int64_t size, bool &changed) {
  changed = false;
  std::string where = "model " + path + (batch ? ": batch " : ": length ") +
                      std::to_string(size);
  if (size < 1)
    return makeStatus(TFC_INVALID_ARGUMENT, where + " is less than 1");
  if (!batch && size > variants.lengths().back())
    return makeStatus(TFC_INVALID_ARGUMENT,
                      where +
                          " is longer than the longest it was built "
                          "for, " +
                          std::to_string(variants.lengths().back()));
  if (batch && !variants.fits(size))
    return makeStatus(TFC_INVALID_ARGUMENT,
                      where + " makes tensors of more than 2^63 bytes");
  int64_t newBatch = batch ? size : variants.batch();
  int64_t newLength = batch ? variants.length() : size;
  if (newBatch == variants.batch() && newLength == variants.length())
    return nullptr;
  if (!variants.setShape(newBatch, newLength))
    return makeStatus(TFC_OUT_OF_MEMORY,
                      where + ": out of memory for its padded buffers");
  changed = true;
  return nullptr;
}

} // namespace tfc::rt

extern "C" {

int32_t tfc_model_num_batches(const tfc_model *model) {
  return numBuilt(model, true);
}

int64_t tfc_model_built_batch(const tfc_model *model, int32_t index) {
  return builtAt(model, true, index);
}

int32_t tfc_model_num_lengths(const tfc_model *model) {
  return numBuilt(model, false);
}

int64_t tfc_model_built_length(const tfc_model *model, int32_t index) {
  return builtAt(model, false, index);
}

int64_t tfc_model_batch(const tfc_model *model) {
  return severalOf(model, true) ? model->variants->batch() : 0;
}

int64_t tfc_model_length(const tfc_model *model) {
  return severalOf(model, false) ? model->variants->length() : 0;
}

tfc_status tfc_model_set_batch(tfc_model *model, int64_t batch) {
  return setShape(model, true, batch);
}

tfc_status tfc_model_set_length(tfc_model *model, int64_t length) {
  return setShape(model, false, length);
}

int32_t tfc_model_input_batch_axis(const tfc_model *model, int32_t index) {
  return axisOf(model, true, index, true);
}

int32_t tfc_model_output_batch_axis(const tfc_model *model, int32_t index) {
  return axisOf(model, false, index, true);
}

int32_t tfc_model_input_length_axis(const tfc_model *model, int32_t index) {
  return axisOf(model, true, index, false);
}

int32_t tfc_model_output_length_axis(const tfc_model *model, int32_t index) {
  return axisOf(model, false, index, false);
}

} // extern "C"
