//===- PackedWeightFiles.cpp - Saving and loading packed weights ----------===//
//
// tfc_model_save_packed_weights and tfc_model_load_packed_weights: the
// copies a CPU model's kernels packed from its weights (and the weights it
// converted to its float type), kept in a file that a later process maps
// instead of packing them again (formats/PackedWeights.h).
//
//===----------------------------------------------------------------------===//

#include "ModelImpl.h"

#include "tfc/runtime/parallel.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

using namespace tfc::rt;

namespace {

/// The kind of a packed weights file's entry that holds a weight bound
/// through a conversion, as converted (not a kernel's packed copy).
constexpr int32_t kConvertedKind = -1;

/// UNIMPLEMENTED for a model that packs no weights, FAILED_PRECONDITION for
/// weights not all bound from one file; null when packed weights can be
/// saved or loaded for `model`.
tfc_status checkPackable(const tfc_model *model) {
  if (!model->packedWeights)
    return makeStatus(TFC_UNIMPLEMENTED,
                      "model " + model->path +
                          " packs no weights (a GPU model, or one built "
                          "without the CPU micro-kernels)");
  if (int32_t ranks = tfc_model_ranks(model); ranks > 1)
    return makeStatus(
        TFC_FAILED_PRECONDITION,
        "model " + model->path + ": built for " + std::to_string(ranks) +
            " ranks (tfc-compile --tensor-parallel=" + std::to_string(ranks) +
            "): each rank packs its own part of the weights, "
            "which a packed weights file does not hold");
  if (model->weightsIdentity.empty())
    return makeStatus(TFC_FAILED_PRECONDITION,
                      "model " + model->path +
                          ": packed weights go with weights bound from a file "
                          "(tfc_model_bind_weights); bind them first");
  return nullptr;
}

} // namespace

namespace tfc::rt {

void dropPackedFile(tfc_model *model) {
  if (model->weightsChanged)
    model->weightsChanged();
  for (const auto &p : model->fromPackedFile) {
    model->buffers[model->weightArgs[p.first]] = nullptr;
    model->pendingConversions.push_back(p);
  }
  model->fromPackedFile.clear();
  model->packedFile.reset();
}

} // namespace tfc::rt

extern "C" {

tfc_status tfc_model_save_packed_weights(tfc_model *model, const char *path) {
  if (!model || !path)
    return makeStatus(
        TFC_INVALID_ARGUMENT,
        "tfc_model_save_packed_weights: model and path must not be NULL");
  const char *fn = "tfc_model_save_packed_weights";
  return onModel(model, fn, false, [&]() -> tfc_status {
    if (tfc_status s = checkPackable(model))
      return s;
    std::vector<tfc_packed_weight> copies(
        size_t(std::max(model->packedWeights(nullptr, 0), 0)));
    copies.resize(size_t(
        std::clamp(model->packedWeights(copies.data(), int32_t(copies.size())),
                   0, int32_t(copies.size()))));
    // Conversions not made yet are made now: the file keeps them.
    if (tfc_status s = convertPendingWeights(model))
      return s;
    // Each copy names the bytes it was packed from: a bound weight's (a B
    // computed by the model, were there one, would be left out).
    std::vector<tfc::PackedEntry> entries;
    auto entryOf = [&](int32_t i) {
      const tfc_tensor_desc &desc = *tfc_model_weight(model, i);
      tfc::PackedEntry e;
      e.weight = desc.name;
      e.dtype = desc.dtype;
      e.shape.assign(desc.shape, desc.shape + desc.rank);
      return e;
    };
    for (const tfc_packed_weight &c : copies) {
      const auto *source = static_cast<const char *>(c.source);
      for (int32_t i = 0; i < tfc_model_num_weights(model); ++i) {
        const tfc_tensor_desc &desc = *tfc_model_weight(model, i);
        const auto *data =
            static_cast<const char *>(model->buffers[model->weightArgs[i]]);
        if (!data || source < data ||
            source >= data + tfc_tensor_desc_nbytes(&desc))
          continue;
        tfc::PackedEntry e = entryOf(i);
        e.offset = uint64_t(source - data);
        e.kind[0] = c.kind[0];
        e.kind[1] = c.kind[1];
        e.k = c.k;
        e.n = c.n;
        e.strides[0] = c.strides[0];
        e.strides[1] = c.strides[1];
        e.data = c.data;
        e.bytes = c.bytes;
        entries.push_back(std::move(e));
        break;
      }
    }
    if (entries.empty())
      return makeStatus(TFC_FAILED_PRECONDITION,
                        "model " + model->path +
                            " has packed no weights yet: run it once, then "
                            "save them");
    // The weights bound through a conversion, as converted: a later
    // process maps them instead of converting them again.
    for (int32_t i = 0; i < tfc_model_num_weights(model); ++i) {
      if (!model->converted[size_t(i)])
        continue;
      tfc::PackedEntry e = entryOf(i);
      e.kind[0] = e.kind[1] = kConvertedKind;
      e.data = model->buffers[model->weightArgs[i]];
      e.bytes = tfc_tensor_desc_nbytes(tfc_model_weight(model, i));
      entries.push_back(std::move(e));
    }
    std::string error;
    if (!tfc::writePackedWeights(path, model->packedFormat(),
                                 tfc::fileContentIdentity(model->path),
                                 model->weightsIdentity, entries, error))
      return makeStatus(TFC_IO_ERROR, "packed weights file " + error);
    return nullptr;
  });
}

tfc_status tfc_model_load_packed_weights(tfc_model *model, const char *path) {
  if (!model || !path)
    return makeStatus(
        TFC_INVALID_ARGUMENT,
        "tfc_model_load_packed_weights: model and path must not be NULL");
  const char *fn = "tfc_model_load_packed_weights";
  return onModel(model, fn, true, [&]() -> tfc_status {
    if (tfc_status s = checkPackable(model))
      return s;
    std::string where = std::string("packed weights file ") + path;
    if (model->packedFile)
      return makeStatus(TFC_FAILED_PRECONDITION,
                        where + ": model " + model->path + " holds those of " +
                            model->packedFile->path() +
                            " already; bind its weights again first");
    if (tfc_status s = checkPath(path, where))
      return s;
    std::string error;
    std::unique_ptr<tfc::PackedWeightsFile> file =
        tfc::PackedWeightsFile::open(path, error);
    if (!file)
      return makeStatus(TFC_BAD_FORMAT, "packed weights file " + error);
    std::string format = model->packedFormat();
    if (file->format() != format)
      return makeStatus(TFC_MISMATCH, where + " was packed by kernels '" +
                                          file->format() + "', model " +
                                          model->path + "'s are '" + format +
                                          "'");
    // The same kernels pack the same bytes, but only the model library
    // knows which products quantize which weights (int8 or int4 builds of
    // one checkpoint hold the same weights).
    std::string modelIdentity = tfc::fileContentIdentity(model->path);
    if (file->modelIdentity() != modelIdentity)
      return makeStatus(TFC_MISMATCH, where +
                                          " was saved by another model "
                                          "library (" +
                                          file->modelIdentity() + "; " +
                                          model->path + " is " + modelIdentity +
                                          "): save it again");
    if (file->weightsIdentity() != model->weightsIdentity)
      return makeStatus(TFC_MISMATCH,
                        where + " was packed from other weights (a file of " +
                            file->weightsIdentity() + "; " +
                            model->weightsFile->path() + " is " +
                            model->weightsIdentity + "): save it again");
    // Every entry names one of the model's weights as it is now.
    std::vector<int32_t> weightOf;
    for (const tfc::PackedEntry &e : file->entries()) {
      int32_t i = tfc_model_find_weight(model, e.weight.c_str());
      if (i < 0)
        return makeStatus(TFC_MISMATCH,
                          where + ": weight " + quote(e.weight.c_str()) +
                              " is not one of model " + model->path + "'s");
      const tfc_tensor_desc &desc = *tfc_model_weight(model, i);
      if (e.dtype != desc.dtype || e.shape.size() != size_t(desc.rank) ||
          !std::equal(e.shape.begin(), e.shape.end(), desc.shape))
        return makeStatus(
            TFC_MISMATCH,
            where + ": weight " + quote(desc.name) + " is " +
                describe(e.dtype, int32_t(e.shape.size()), e.shape.data()) +
                " there, model " + model->path + " has " + describe(desc));
      size_t nbytes = tfc_tensor_desc_nbytes(&desc);
      bool isConversion = e.kind[0] == kConvertedKind;
      if (isConversion ? !model->converted[size_t(i)] || e.offset != 0 ||
                             e.bytes != nbytes
                       : e.offset >= nbytes)
        return makeStatus(TFC_BAD_FORMAT,
                          where + ": weight " + quote(desc.name) + ": " +
                              (isConversion
                                   ? "a converted copy of " +
                                         std::to_string(e.bytes) + " bytes"
                                   : "offset " + std::to_string(e.offset)) +
                              " does not fit it");
      weightOf.push_back(i);
    }
    // What the model holds now goes; the file's converted weights are
    // bound in place of the conversions not made yet, then its packed
    // copies come in (their keys name the weights' bytes as bound), all or
    // none.
    if (model->weightsChanged)
      model->weightsChanged();
    model->packedFile = std::move(file);
    const std::vector<tfc::PackedEntry> &entries = model->packedFile->entries();
    auto &pending = model->pendingConversions;
    for (size_t k = 0; k < entries.size(); ++k) {
      auto it =
          std::find_if(pending.begin(), pending.end(),
                       [&](const auto &p) { return p.first == weightOf[k]; });
      if (entries[k].kind[0] != kConvertedKind || it == pending.end())
        continue;
      model->buffers[model->weightArgs[weightOf[k]]] =
          const_cast<void *>(entries[k].data);
      model->fromPackedFile.push_back(*it);
      pending.erase(it);
    }
    for (size_t k = 0; k < entries.size(); ++k) {
      const tfc::PackedEntry &e = entries[k];
      if (e.kind[0] == kConvertedKind)
        continue;
      const auto *data =
          static_cast<const char *>(tfc_model_weight_data(model, weightOf[k]));
      tfc_packed_weight copy = {data + e.offset,
                                {e.kind[0], e.kind[1]},
                                e.k,
                                e.n,
                                {e.strides[0], e.strides[1]},
                                e.data,
                                e.bytes};
      if (!data || model->adoptPackedWeight(&copy) != 0) {
        dropPackedFile(model);
        return makeStatus(
            data ? TFC_BAD_FORMAT : TFC_OUT_OF_MEMORY,
            where + ": entry " + std::to_string(k) + " (weight " +
                quote(e.weight.c_str()) + ", " + std::to_string(e.k) + " x " +
                std::to_string(e.n) + ") " +
                (data ? "is not a copy model " + model->path + "'s kernels make"
                      : "cannot be converted: out of memory"));
      }
    }
    return nullptr;
  });
}

} // extern "C"
