//===- Variants.cpp - Models built for several shapes ---------------------===//

#include "Variants.h"

#include "tfc/runtime/dtype.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

namespace tfc {

namespace {

std::string quote(const char *name) {
  return std::string("'") + (name ? name : "<null>") + "'";
}

/// "f32 [2, 7]"; the shape must be valid for the rank.
std::string describe(const tfc_tensor_desc &desc) {
  return std::string(isValidDType(desc.dtype) ? dtypeName(DType(desc.dtype))
                                              : "?") +
         " " + shapeString(desc.shape, size_t(desc.rank));
}

/// "input 'ids'", "weight 'w'", "output 'y'": the library manifest's tensor
/// (already checked), as a caller knows it.
std::string tensorName(const tfc_tensor_desc &desc) {
  const char *kind = desc.role == TFC_ROLE_INPUT    ? "input"
                     : desc.role == TFC_ROLE_WEIGHT ? "weight"
                                                    : "output";
  return std::string(kind) + " " + quote(desc.name);
}

const tfc_tensor_desc &slotDesc(const tfc_manifest &manifest, size_t slot) {
  size_t numArgs = size_t(manifest.num_args);
  return slot < numArgs ? manifest.args[slot]
                        : manifest.results[slot - numArgs];
}

bool sameBounds(const tfc_tensor_desc &a, const tfc_tensor_desc &b) {
  if (!a.bounds || !b.bounds)
    return !a.bounds && !b.bounds;
  return a.bounds[0] == b.bounds[0] && a.bounds[1] == b.bounds[1];
}

/// Copies the elements two dense tensors of `rank` axes share, from `src`
/// (extents `srcShape`) to `dst` (extents `dstShape`): along `axis` the
/// source starts at `srcFirst` and the destination at `dstFirst`, along the
/// others both at 0, and along each axis as many elements are copied as both
/// have from there. With `zeroRest` the destination's other elements become
/// zero (padding an input); without, they are left (cutting an output).
class BoxCopy {
public:
  BoxCopy(const int64_t *srcShape, const int64_t *dstShape, size_t rank,
          int32_t axis, int64_t srcFirst, int64_t dstFirst, size_t elementBytes,
          bool zeroRest)
      : srcShape_(srcShape), dstShape_(dstShape), axis_(axis),
        srcFirst_(srcFirst), dstFirst_(dstFirst), zeroRest_(zeroRest),
        srcStep_(rank), dstStep_(rank), contiguous_(rank) {
    size_t srcBytes = elementBytes, dstBytes = elementBytes;
    bool same = true; // the axes after k have the same extents, unshifted
    for (size_t k = rank; k-- > 0;) {
      srcStep_[k] = srcBytes;
      dstStep_[k] = dstBytes;
      contiguous_[k] = same;
      srcBytes *= size_t(srcShape[k]);
      dstBytes *= size_t(dstShape[k]);
      same = same && srcShape[k] == dstShape[k] && int32_t(k) != axis;
    }
  }

  void copy(const uint8_t *src, uint8_t *dst) const { copyAxis(0, src, dst); }

private:
  void copyAxis(size_t k, const uint8_t *src, uint8_t *dst) const {
    bool shifted = int32_t(k) == axis_;
    int64_t srcFirst = shifted ? srcFirst_ : 0;
    int64_t dstFirst = shifted ? dstFirst_ : 0;
    int64_t count = std::min(srcShape_[k] - srcFirst, dstShape_[k] - dstFirst);
    size_t srcStep = srcStep_[k], dstStep = dstStep_[k];
    const uint8_t *from = src + size_t(srcFirst) * srcStep;
    uint8_t *to = dst + size_t(dstFirst) * dstStep;
    if (contiguous_[k]) {
      // The same layout from here on: one block.
      if (count > 0)
        std::memcpy(to, from, size_t(count) * dstStep);
    } else {
      for (int64_t i = 0; i < count; ++i)
        copyAxis(k + 1, from + size_t(i) * srcStep, to + size_t(i) * dstStep);
    }
    if (zeroRest_) {
      std::memset(dst, 0, size_t(dstFirst) * dstStep);
      std::memset(to + size_t(count) * dstStep, 0,
                  size_t(dstShape_[k] - dstFirst - count) * dstStep);
    }
  }

  const int64_t *srcShape_, *dstShape_;
  int32_t axis_;
  int64_t srcFirst_, dstFirst_;
  bool zeroRest_;
  std::vector<size_t> srcStep_, dstStep_; // bytes of one step along an axis
  std::vector<bool> contiguous_;
};

std::string join(const std::vector<int64_t> &sizes) {
  std::string out;
  for (int64_t n : sizes)
    out += (out.empty() ? "" : ", ") + std::to_string(n);
  return out;
}

} // namespace

std::unique_ptr<ModelVariants>
ModelVariants::create(const std::string &file, const tfc_manifest &main,
                      const tfc_model_variant *variants, int32_t count,
                      std::string &error) {
  std::string model = "model " + file;
  // The GPU path owns one device buffer per tensor, of one shape.
  if (std::strcmp(main.target, "cpu") != 0) {
    error = model + ": variants are for cpu models, not " + main.target;
    return nullptr;
  }
  if (count < 2) {
    error = model + ": tfc_model_variants returns " + std::to_string(count) +
            " variant" + (count == 1 ? "" : "s") +
            "; a model built for several shapes has at least 2";
    return nullptr;
  }
  if (!variants) {
    error = model + ": tfc_model_variants returns " + std::to_string(count) +
            " variants but no array";
    return nullptr;
  }
  std::unique_ptr<ModelVariants> grid(new ModelVariants());
  grid->variants_.assign(variants, variants + count);
  grid->numArgs_ = size_t(main.num_args);
  error = grid->checkGrid(file);
  if (error.empty())
    error = grid->check(file, main);
  if (!error.empty())
    return nullptr;
  grid->copyDescriptors(main);
  grid->staging_.resize(grid->variants_.size());
  grid->call_.resize(grid->slots_.size());
  grid->batch_ = grid->batches_.back();
  grid->length_ = grid->lengths_.back();
  return grid;
}

std::string ModelVariants::checkGrid(const std::string &file) {
  std::string model = "model " + file;
  auto at = [&](size_t v) {
    return model + ": variant " + std::to_string(v) + " (batch " +
           std::to_string(variants_[v].batch) + ", length " +
           std::to_string(variants_[v].length) + ")";
  };
  const char *order = " (the variants are every built batch size with every "
                      "built length, ordered by batch size, then length, "
                      "both increasing)";
  for (size_t v = 0; v < variants_.size(); ++v)
    if (variants_[v].batch < 1 || variants_[v].length < 1)
      return at(v) + ": a batch size and a length are at least 1";
  // The lengths are those of the first batch size's variants.
  size_t numLengths = 1;
  while (numLengths < variants_.size() &&
         variants_[numLengths].batch == variants_[0].batch)
    ++numLengths;
  for (size_t v = 0; v < numLengths; ++v) {
    if (v > 0 && variants_[v].length <= variants_[v - 1].length)
      return at(v) + " follows one of length " +
             std::to_string(variants_[v - 1].length) + order;
    lengths_.push_back(variants_[v].length);
  }
  for (size_t v = 0; v < variants_.size(); v += numLengths) {
    if (v > 0 && variants_[v].batch <= variants_[v - numLengths].batch)
      return at(v) + " follows one of batch " +
             std::to_string(variants_[v - numLengths].batch) + order;
    batches_.push_back(variants_[v].batch);
  }
  for (size_t v = 0; v < variants_.size(); ++v) {
    int64_t batch = batches_[v / numLengths], length = lengths_[v % numLengths];
    if (variants_[v].batch != batch || variants_[v].length != length)
      return at(v) + " is not batch " + std::to_string(batch) + ", length " +
             std::to_string(length) + order;
  }
  if (variants_.size() % numLengths != 0)
    return model + ": its " + std::to_string(variants_.size()) +
           " variants are not the batch sizes " + join(batches_) +
           " each with the lengths " + join(lengths_) + order;
  return "";
}

std::string ModelVariants::check(const std::string &file,
                                 const tfc_manifest &main) {
  std::string model = "model " + file;
  // "length 4", "batch 8", "batch 8 and length 4": the sizes that vary.
  auto sizes = [&](size_t v) {
    std::string batch = "batch " + std::to_string(variants_[v].batch);
    std::string length = "length " + std::to_string(variants_[v].length);
    if (batches_.size() == 1)
      return length;
    if (lengths_.size() == 1)
      return batch;
    return batch + " and " + length;
  };
  auto variantWhere = [&](size_t v) {
    return model + ": variant of " + sizes(v);
  };
  size_t last = variants_.size() - 1;
  size_t numSlots = size_t(main.num_args) + size_t(main.num_results);

  // Each variant on its own: a valid manifest of the same tensors.
  for (size_t v = 0; v < variants_.size(); ++v) {
    const tfc_model_variant &variant = variants_[v];
    std::string where = variantWhere(v);
    if (!variant.manifest)
      return where + " has no manifest";
    if (!variant.run)
      return where + " has no run function";
    const tfc_manifest &m = *variant.manifest;
    if (m.magic != TFC_MANIFEST_MAGIC) {
      char buf[96];
      std::snprintf(buf, sizeof(buf),
                    ": bad manifest magic 0x%08x, expected 0x%08x", m.magic,
                    TFC_MANIFEST_MAGIC);
      return where + buf;
    }
    if (m.abi_version != TFC_ABI_VERSION)
      return where + ": ABI version " + std::to_string(m.abi_version) +
             ", this runtime supports " + std::to_string(TFC_ABI_VERSION);
    if (!m.target || std::strcmp(m.target, "cpu") != 0)
      return where + ": target " + quote(m.target) +
             " (variants are for cpu models)";
    if (m.num_args != main.num_args || m.num_results != main.num_results ||
        (m.num_args > 0 && !m.args) || (m.num_results > 0 && !m.results))
      return where + " has " + std::to_string(m.num_args) + " arguments and " +
             std::to_string(m.num_results) + " results, the model " +
             std::to_string(main.num_args) + " and " +
             std::to_string(main.num_results);
    for (size_t s = 0; s < numSlots; ++s) {
      const tfc_tensor_desc &d = slotDesc(m, s), &ref = slotDesc(main, s);
      std::string tensor = where + ": " + tensorName(ref);
      if (!d.name || std::strcmp(d.name, ref.name) != 0)
        return where + ": " +
               (s < numArgs_ ? "argument " + std::to_string(s)
                             : "result " + std::to_string(s - numArgs_)) +
               " is " + quote(d.name) + ", the model's " + quote(ref.name);
      if (d.role != ref.role)
        return tensor + " has role " + std::to_string(d.role) +
               ", the model's " + std::to_string(ref.role);
      if (d.rank < 0 || d.rank > 64 || (d.rank > 0 && !d.shape))
        return tensor + ": invalid rank " + std::to_string(d.rank);
      if (std::any_of(d.shape, d.shape + d.rank,
                      [](int64_t extent) { return extent < 0; }))
        return tensor + ": invalid shape " +
               shapeString(d.shape, size_t(d.rank));
      if (d.dtype != ref.dtype || d.rank != ref.rank)
        return tensor + " is " + describe(d) + ", the model's " + describe(ref);
      if (!sameBounds(d, ref))
        return tensor + " has other bounds than the model's";
    }
  }

  // The last variant is the library's manifest.
  const tfc_manifest &lastManifest = *variants_[last].manifest;
  for (size_t s = 0; s < numSlots && &lastManifest != &main; ++s) {
    const tfc_tensor_desc &d = slotDesc(lastManifest, s),
                          &ref = slotDesc(main, s);
    if (!std::equal(d.shape, d.shape + d.rank, ref.shape))
      return variantWhere(last) +
             ", the last, is not the model's manifest "
             "(tfc_model_manifest): " +
             tensorName(ref) + " is " + describe(d) + " there, " +
             describe(ref) + " in the manifest";
  }

  // The axes of each tensor: its sequence axis is the one axis in which the
  // variants of the largest batch size differ from the last, its batch axis
  // the one in which those of the longest length do.
  size_t numLengths = lengths_.size();
  int64_t largest = batches_.back(), longest = lengths_.back();
  slots_.resize(numSlots);
  for (size_t s = 0; s < numSlots; ++s) {
    const tfc_tensor_desc &ref = slotDesc(main, s);
    std::string name = tensorName(ref);
    Slot &slot = slots_[s];
    auto findAxis = [&](int32_t &axis, size_t first, size_t step,
                        const char *kind) -> std::string {
      size_t axisFrom = 0; // the variant that showed the axis
      for (size_t v = first; v <= last; v += step) {
        const tfc_tensor_desc &d = slotDesc(*variants_[v].manifest, s);
        for (int32_t k = 0; k < d.rank; ++k) {
          if (d.shape[k] == ref.shape[k] || k == axis)
            continue;
          std::string differs = variantWhere(v) + ": " + name + " is " +
                                describe(d) + ", at " + sizes(last) + " " +
                                describe(ref);
          if (ref.role == TFC_ROLE_WEIGHT)
            return differs + " (weights are the same in every variant)";
          if (axis < 0) {
            axis = k;
            axisFrom = v;
            continue;
          }
          std::string axes =
              axisFrom == v
                  ? "axes " + std::to_string(axis) + " and " + std::to_string(k)
                  : "axis " + std::to_string(k) + ", the variant of " +
                        sizes(axisFrom) + " in axis " + std::to_string(axis);
          return differs + ": it differs in " + axes + " (only the " + kind +
                 " axis may differ)";
        }
      }
      return "";
    };
    std::string error =
        findAxis(slot.lengthAxis, last + 1 - numLengths, 1, "sequence");
    if (error.empty())
      error = findAxis(slot.batchAxis, numLengths - 1, numLengths, "batch");
    if (!error.empty())
      return error;
    if (slot.lengthAxis >= 0 && slot.lengthAxis == slot.batchAxis)
      return model + ": " + name + " varies with the batch size and the " +
             "length in one axis, " + std::to_string(slot.lengthAxis) +
             " (they must be two)";
    if (batches_.size() > 1 && slot.batchAxis < 0 &&
        ref.role != TFC_ROLE_WEIGHT)
      return model + ": " + name + " has no batch axis (it is " +
             describe(ref) +
             " at every batch size; with several batch sizes every input "
             "and output has one)";
    if (slot.lengthAxis >= 0) {
      slot.offset = ref.shape[slot.lengthAxis] - longest;
      if (slot.offset < 0)
        return variantWhere(last) + ": " + name + " has extent " +
               std::to_string(ref.shape[slot.lengthAxis]) +
               " on its sequence axis " + std::to_string(slot.lengthAxis) +
               ", less than the length";
    }
    if (slot.batchAxis >= 0) {
      int64_t extent = ref.shape[slot.batchAxis];
      if (extent % largest != 0)
        return variantWhere(last) + ": " + name + " has extent " +
               std::to_string(extent) + " on its batch axis " +
               std::to_string(slot.batchAxis) +
               ", not a multiple of the batch size";
      slot.factor = extent / largest;
    }
    // The longest variant's shape is valid (the manifest's).
    slot.shape.assign(ref.shape, ref.shape + ref.rank);
    slot.elementBytes = dtypeSize(DType(ref.dtype));
    // Every variant: the extents its batch size and length make.
    for (size_t v = 0; v < last; ++v) {
      const tfc_tensor_desc &d = slotDesc(*variants_[v].manifest, s);
      std::vector<int64_t> want =
          shapeAt(s, variants_[v].batch, variants_[v].length);
      for (int32_t k = 0; k < d.rank; ++k) {
        if (d.shape[k] == want[size_t(k)])
          continue;
        std::string extent = variantWhere(v) + ": " + name + " has extent " +
                             std::to_string(d.shape[k]);
        if (k == slot.lengthAxis)
          return extent + " on its sequence axis " + std::to_string(k) +
                 ", not " + std::to_string(want[size_t(k)]) + " (" +
                 std::to_string(slot.offset) + " plus the length, as at " +
                 sizes(last) + ")";
        if (k == slot.batchAxis)
          return extent + " on its batch axis " + std::to_string(k) + ", not " +
                 std::to_string(want[size_t(k)]) + " (" +
                 std::to_string(slot.factor) + " times the batch size, as at " +
                 sizes(last) + ")";
        return extent + " in axis " + std::to_string(k) + ", not " +
               std::to_string(want[size_t(k)]) +
               " (only the batch and sequence axes may differ)";
      }
    }
    if (slot.batchAxis >= 0)
      for (int32_t k = 0; k < slot.batchAxis; ++k)
        if (k == slot.lengthAxis || ref.shape[k] != 1)
          batchOutermost_ = false;
  }
  return "";
}

void ModelVariants::copyDescriptors(const tfc_manifest &main) {
  args_.assign(main.args, main.args + main.num_args);
  results_.assign(main.results, main.results + main.num_results);
  for (size_t s = 0; s < slots_.size(); ++s) {
    tfc_tensor_desc &desc = s < numArgs_ ? args_[s] : results_[s - numArgs_];
    desc.shape = slots_[s].shape.data();
  }
  manifest_ = main;
  manifest_.args = args_.data();
  manifest_.results = results_.data();
}

std::vector<int64_t> ModelVariants::shapeAt(size_t slot, int64_t batch,
                                            int64_t length) const {
  const Slot &info = slots_[slot];
  std::vector<int64_t> shape = info.shape;
  if (info.batchAxis >= 0)
    shape[size_t(info.batchAxis)] = info.factor * batch;
  if (info.lengthAxis >= 0)
    shape[size_t(info.lengthAxis)] = info.offset + length;
  return shape;
}

bool ModelVariants::fits(int64_t batch) const {
  for (const Slot &slot : slots_) {
    int64_t bytes = int64_t(slot.elementBytes);
    for (size_t k = 0; k < slot.shape.size(); ++k) {
      int64_t extent = slot.shape[k];
      if (int32_t(k) == slot.batchAxis &&
          __builtin_mul_overflow(slot.factor, batch, &extent))
        return false;
      if (__builtin_mul_overflow(bytes, extent, &bytes))
        return false;
    }
  }
  return true;
}

size_t ModelVariants::variantFor(int64_t batch, int64_t length) const {
  size_t b = size_t(std::lower_bound(batches_.begin(), batches_.end(), batch) -
                    batches_.begin());
  size_t l = size_t(std::lower_bound(lengths_.begin(), lengths_.end(), length) -
                    lengths_.begin());
  return b * lengths_.size() + l;
}

bool ModelVariants::staged(size_t variant, int64_t batch, int64_t length,
                           bool whole) const {
  return variants_[variant].batch != batch ||
         variants_[variant].length != length || (!whole && !batchOutermost_);
}

bool ModelVariants::allocateStaging(size_t variant) {
  // Allocated once per variant, when it first runs staged, and kept.
  std::vector<AlignedBuffer> &staging = staging_[variant];
  if (!staging.empty())
    return true;
  staging.resize(slots_.size());
  const tfc_manifest &m = *variants_[variant].manifest;
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (!slots_[s].varies())
      continue;
    const tfc_tensor_desc &d = slotDesc(m, s);
    size_t nbytes = slots_[s].elementBytes;
    for (int32_t k = 0; k < d.rank; ++k)
      nbytes *= size_t(d.shape[k]);
    if (!staging[s].allocate(nbytes)) {
      staging.clear();
      return false;
    }
  }
  return true;
}

bool ModelVariants::setShape(int64_t batch, int64_t length) {
  // The variants that run it: the largest for the slices of a batch beyond
  // it, and the smallest that holds the rest.
  int64_t largest = batches_.back();
  bool whole = batch <= largest;
  if (!whole) {
    size_t v = variantFor(largest, length);
    if (staged(v, largest, length, false) && !allocateStaging(v))
      return false;
  }
  if (int64_t rest = whole ? batch : batch % largest) {
    size_t v = variantFor(rest, length);
    if (staged(v, rest, length, whole) && !allocateStaging(v))
      return false;
  }
  for (size_t s = 0; s < slots_.size(); ++s)
    slots_[s].shape = shapeAt(s, batch, length);
  // The descriptors point at the shapes, which may have moved.
  for (size_t s = 0; s < slots_.size(); ++s)
    (s < numArgs_ ? args_[s] : results_[s - numArgs_]).shape =
        slots_[s].shape.data();
  batch_ = batch;
  length_ = length;
  return true;
}

void ModelVariants::run(void **buffers) {
  int64_t largest = batches_.back();
  for (int64_t first = 0; first < batch_; first += largest) {
    int64_t count = std::min(largest, batch_ - first);
    runSlice(buffers, variantFor(count, length_), first, count);
  }
}

void ModelVariants::runSlice(void **buffers, size_t variant, int64_t first,
                             int64_t count) {
  const tfc_model_variant &built = variants_[variant];
  bool whole = count == batch_;
  if (!staged(variant, count, length_, whole)) {
    if (whole) {
      built.run(buffers);
      return;
    }
    // A slice of sequences is a contiguous range of each buffer.
    for (size_t s = 0; s < slots_.size(); ++s) {
      const Slot &slot = slots_[s];
      call_[s] = buffers[s];
      if (slot.batchAxis < 0)
        continue;
      size_t sequenceBytes = slot.elementBytes * size_t(slot.factor);
      for (size_t k = size_t(slot.batchAxis) + 1; k < slot.shape.size(); ++k)
        sequenceBytes *= size_t(slot.shape[k]);
      call_[s] =
          static_cast<uint8_t *>(buffers[s]) + size_t(first) * sequenceBytes;
    }
    built.run(call_.data());
    return;
  }
  std::vector<AlignedBuffer> &staging = staging_[variant];
  for (size_t s = 0; s < slots_.size(); ++s) {
    const Slot &slot = slots_[s];
    if (!slot.varies()) {
      call_[s] = buffers[s];
      continue;
    }
    call_[s] = staging[s].data();
    if (s >= numArgs_) {
      std::memset(staging[s].data(), 0xff, staging[s].size());
      continue;
    }
    BoxCopy(slot.shape.data(), slotDesc(*built.manifest, s).shape,
            slot.shape.size(), slot.batchAxis, first * slot.factor, 0,
            slot.elementBytes, /*zeroRest=*/true)
        .copy(static_cast<const uint8_t *>(buffers[s]), staging[s].data());
  }
  built.run(call_.data());
  for (size_t s = numArgs_; s < slots_.size(); ++s) {
    const Slot &slot = slots_[s];
    if (slot.varies())
      BoxCopy(slotDesc(*built.manifest, s).shape, slot.shape.data(),
              slot.shape.size(), slot.batchAxis, 0, first * slot.factor,
              slot.elementBytes, /*zeroRest=*/false)
          .copy(staging[s].data(), static_cast<uint8_t *>(buffers[s]));
  }
}

} // namespace tfc
