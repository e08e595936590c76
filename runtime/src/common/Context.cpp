//===- Context.cpp - Execution contexts: concurrent runs of one model -----===//
//
// A context holds what one request of a loaded model needs of its own: the
// bindings of its inputs and outputs, and for a model built for several
// batch sizes or lengths its current shape and padded staging buffers. The
// library, the weights (mapped, converted and packed once) and the kernels'
// packed copies stay the model's, shared read-only: any number of contexts
// of one model run at once, each on one thread at a time.
//
//===----------------------------------------------------------------------===//

#include "ModelImpl.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

using namespace tfc::rt;

struct tfc_context {
  tfc_model *model = nullptr;
  /// Arguments (the model's weights, the context's inputs), then results.
  std::vector<void *> buffers;
  /// The context's own shape of a model built for several; else null.
  std::unique_ptr<tfc::ModelVariants> variants;
  /// The descriptors the context takes now: its variants', or the
  /// library's.
  const tfc_manifest *manifest = nullptr;
  /// Set while a call on this context is under way: a second one, from
  /// another thread, is refused.
  std::atomic<bool> busy{false};
};

namespace {

/// Runs `body` for `call` with `context` held (Exclusive), its exceptions
/// turned into statuses; INVALID_ARGUMENT for a null context.
template <typename Fn>
tfc_status onContext(tfc_context *context, const char *call, Fn &&body) {
  if (!context)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      std::string(call) + ": context must not be NULL");
  Exclusive held(context->busy, context->model->path, "a context of model ",
                 "a context serves one call at a time: create one per thread");
  if (tfc_status s = held.refusal(call))
    return s;
  return guard(body);
}

/// Input or output `index` of the context's current shapes, or null.
const tfc_tensor_desc *descriptor(const tfc_context *context, bool input,
                                  int32_t index) {
  if (!context || index < 0)
    return nullptr;
  const tfc_model *model = context->model;
  if (input)
    return size_t(index) < model->inputArgs.size()
               ? &context->manifest->args[model->inputArgs[size_t(index)]]
               : nullptr;
  return index < context->manifest->num_results
             ? &context->manifest->results[index]
             : nullptr;
}

} // namespace

namespace tfc::rt {

tfc_status refuseWhileContexts(tfc_model *model, const char *call) {
  std::lock_guard<std::mutex> lock(model->lifetime);
  if (model->contexts == 0)
    return nullptr;
  return makeStatus(TFC_FAILED_PRECONDITION,
                    std::string(call) + ": model " + model->path + " has " +
                        std::to_string(model->contexts) +
                        (model->contexts == 1 ? " context" : " contexts") +
                        ", which share its weights read-only: destroy them "
                        "before binding weights again");
}

} // namespace tfc::rt

extern "C" {

tfc_status tfc_context_create(tfc_model *model, tfc_context **out) {
  if (out)
    *out = nullptr;
  if (!model || !out)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      "tfc_context_create: model and out must not be NULL");
  return onModel(model, "tfc_context_create", false, [&]() -> tfc_status {
    if (model->gpu)
      return makeStatus(TFC_UNIMPLEMENTED,
                        "tfc_context_create: model " + model->path +
                            " runs on the GPU, which serves one call at a "
                            "time: contexts run CPU models");
    // The weights are made ready once, here: the contexts' runs only read
    // them.
    if (tfc_status s = convertPendingWeights(model))
      return s;
    for (size_t i = 0; i < model->weightArgs.size(); ++i)
      if (!model->buffers[model->weightArgs[i]])
        return makeStatus(TFC_FAILED_PRECONDITION,
                          "tfc_context_create: model " + model->path + ": " +
                              roleName(model, TFC_ROLE_WEIGHT, int32_t(i)) +
                              " is not bound (bind the weights first)");
    auto context = std::make_unique<tfc_context>();
    context->model = model;
    context->manifest = model->libraryManifest;
    if (model->variantList) {
      std::string error;
      context->variants = tfc::ModelVariants::create(
          model->path, *model->libraryManifest, model->variantList,
          model->variantCount, error);
      if (!context->variants)
        return makeStatus(TFC_INTERNAL, error);
      context->manifest = &context->variants->manifest();
    }
    context->buffers.assign(model->buffers.size(), nullptr);
    for (int32_t arg : model->weightArgs)
      context->buffers[size_t(arg)] = model->buffers[size_t(arg)];
    {
      std::lock_guard<std::mutex> lock(model->lifetime);
      ++model->contexts;
    }
    *out = context.release();
    return nullptr;
  });
}

void tfc_context_destroy(tfc_context *context) {
  if (!context)
    return;
  tfc_model *model = context->model;
  delete context;
  bool last;
  {
    std::lock_guard<std::mutex> lock(model->lifetime);
    last = --model->contexts == 0 && model->destroyRequested;
  }
  if (last)
    destroyModel(model);
}

const tfc_tensor_desc *tfc_context_input(const tfc_context *context,
                                         int32_t index) {
  return descriptor(context, true, index);
}

const tfc_tensor_desc *tfc_context_output(const tfc_context *context,
                                          int32_t index) {
  return descriptor(context, false, index);
}

static tfc_status setContextShape(tfc_context *context, bool batch,
                                  int64_t size) {
  const char *fn = batch ? "tfc_context_set_batch" : "tfc_context_set_length";
  return onContext(context, fn, [&]() -> tfc_status {
    tfc::ModelVariants *variants = context->variants.get();
    const std::string &path = context->model->path;
    if (!variants ||
        (batch ? variants->batches() : variants->lengths()).size() < 2)
      return makeStatus(
          TFC_FAILED_PRECONDITION,
          "model " + path +
              (batch ? " was built for one batch size; compile it with "
                       "--batch B1,B2,... to run other batch sizes"
                     : " was built for one sequence length; compile it "
                       "with --seq-len L1,L2,... to run other lengths"));
    bool changed = false;
    if (tfc_status s = setVariantsShape(path, *variants, batch, size, changed))
      return s;
    if (changed) {
      // The caller's buffers have the old shapes.
      for (int32_t arg : context->model->inputArgs)
        context->buffers[size_t(arg)] = nullptr;
      size_t numArgs = size_t(context->manifest->num_args);
      for (int32_t i = 0; i < context->manifest->num_results; ++i)
        context->buffers[numArgs + size_t(i)] = nullptr;
    }
    return nullptr;
  });
}

int64_t tfc_context_batch(const tfc_context *context) {
  return context && context->variants && context->variants->batches().size() > 1
             ? context->variants->batch()
             : 0;
}

int64_t tfc_context_length(const tfc_context *context) {
  return context && context->variants && context->variants->lengths().size() > 1
             ? context->variants->length()
             : 0;
}

tfc_status tfc_context_check_input(const tfc_context *context, int32_t index,
                                   int32_t dtype, int32_t rank,
                                   const int64_t *shape) {
  return checkInput(
      "tfc_context_check_input", context ? context->model : nullptr,
      descriptor(context, true, index), index, dtype, rank, shape);
}

tfc_status tfc_context_set_batch(tfc_context *context, int64_t batch) {
  return setContextShape(context, true, batch);
}

tfc_status tfc_context_set_length(tfc_context *context, int64_t length) {
  return setContextShape(context, false, length);
}

static tfc_status bindContext(tfc_context *context, bool input, int32_t index,
                              const void *data) {
  const char *fn = input ? "tfc_context_bind_input" : "tfc_context_bind_output";
  return onContext(context, fn, [&]() -> tfc_status {
    const tfc_model *model = context->model;
    int32_t count = input ? int32_t(model->inputArgs.size())
                          : context->manifest->num_results;
    if (tfc_status s =
            checkBuffer(fn, model, input ? TFC_ROLE_INPUT : TFC_ROLE_OUTPUT,
                        index, count, data))
      return s;
    size_t slot = input ? size_t(model->inputArgs[size_t(index)])
                        : size_t(context->manifest->num_args) + size_t(index);
    context->buffers[slot] = const_cast<void *>(data);
    return nullptr;
  });
}

tfc_status tfc_context_bind_input(tfc_context *context, int32_t index,
                                  const void *data) {
  return bindContext(context, true, index, data);
}

tfc_status tfc_context_bind_output(tfc_context *context, int32_t index,
                                   void *data) {
  return bindContext(context, false, index, data);
}

tfc_status tfc_context_invoke(tfc_context *context) {
  return onContext(context, "tfc_context_invoke", [&]() -> tfc_status {
    tfc_model *model = context->model;
    if (tfc_status s =
            prepareRun(model, context->buffers.data(), context->manifest))
      return s;
    if (tfc_status s =
            runBuffers(model, context->buffers.data(), context->variants.get()))
      return s;
    releaseWeightPages(model);
    return nullptr;
  });
}

} // extern "C"
