//===- Lengths.cpp - Models built for several sequence lengths ------------===//

#include "Lengths.h"

#include "tfc/runtime/dtype.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

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

/// Copies `outer` rows of a dense tensor from rows of `srcRow` bytes to rows
/// of `dstRow` bytes: a shorter destination row takes the start of each
/// source row (cutting an output), a longer one is filled with zeros after
/// it (padding an input).
void copyRows(const uint8_t *src, size_t srcRow, uint8_t *dst, size_t dstRow,
              size_t outer) {
  size_t common = std::min(srcRow, dstRow);
  for (size_t o = 0; o < outer; ++o) {
    if (common)
      std::memcpy(dst + o * dstRow, src + o * srcRow, common);
    if (dstRow > common)
      std::memset(dst + o * dstRow + common, 0, dstRow - common);
  }
}

} // namespace

std::unique_ptr<SequenceLengths>
SequenceLengths::create(const std::string &file, const tfc_manifest &main,
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
            "; a model built for several lengths has at least 2";
    return nullptr;
  }
  if (!variants) {
    error = model + ": tfc_model_variants returns " + std::to_string(count) +
            " variants but no array";
    return nullptr;
  }
  std::unique_ptr<SequenceLengths> lengths(new SequenceLengths());
  lengths->variants_.assign(variants, variants + count);
  lengths->numArgs_ = size_t(main.num_args);
  error = lengths->check(file, main);
  if (!error.empty())
    return nullptr;
  lengths->copyDescriptors(main);
  lengths->staging_.resize(lengths->variants_.size());
  lengths->call_.resize(lengths->slots_.size());
  lengths->length_ = lengths->longest();
  lengths->selected_ = lengths->variants_.size() - 1;
  return lengths;
}

std::string SequenceLengths::check(const std::string &file,
                                   const tfc_manifest &main) {
  std::string model = "model " + file;
  auto variantWhere = [&](size_t v) {
    return model + ": variant of length " + std::to_string(variants_[v].length);
  };
  size_t numSlots = size_t(main.num_args) + size_t(main.num_results);

  // Each variant on its own: a valid manifest of the same tensors.
  for (size_t v = 0; v < variants_.size(); ++v) {
    const tfc_model_variant &variant = variants_[v];
    std::string where = variantWhere(v);
    if (variant.length < 1)
      return where + ": a length is at least 1";
    if (v > 0 && variant.length <= variants_[v - 1].length)
      return where + " follows one of length " +
             std::to_string(variants_[v - 1].length) +
             " (lengths must increase)";
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

  // The longest variant is the library's manifest.
  const tfc_manifest &last = *variants_.back().manifest;
  for (size_t s = 0; s < numSlots && &last != &main; ++s) {
    const tfc_tensor_desc &d = slotDesc(last, s), &ref = slotDesc(main, s);
    if (!std::equal(d.shape, d.shape + d.rank, ref.shape))
      return variantWhere(variants_.size() - 1) +
             ", the longest, is not the model's manifest "
             "(tfc_model_manifest): " +
             tensorName(ref) + " is " + describe(d) + " there, " +
             describe(ref) + " in the manifest";
  }

  // The sequence axis of each tensor: the one axis whose extent differs
  // between variants, a constant plus the length in each.
  int64_t longest = variants_.back().length;
  slots_.resize(numSlots);
  for (size_t s = 0; s < numSlots; ++s) {
    const tfc_tensor_desc &ref = slotDesc(main, s);
    std::string name = tensorName(ref);
    Slot &slot = slots_[s];
    size_t axisFrom = 0; // the variant that showed the axis
    for (size_t v = 0; v < variants_.size(); ++v) {
      const tfc_tensor_desc &d = slotDesc(*variants_[v].manifest, s);
      for (int32_t k = 0; k < d.rank; ++k) {
        if (d.shape[k] == ref.shape[k] || k == slot.axis)
          continue;
        std::string differs = variantWhere(v) + ": " + name + " is " +
                              describe(d) + ", at length " +
                              std::to_string(longest) + " " + describe(ref);
        if (ref.role == TFC_ROLE_WEIGHT)
          return differs + " (weights are the same at every length)";
        if (slot.axis < 0) {
          slot.axis = k;
          axisFrom = v;
          continue;
        }
        std::string axes =
            axisFrom == v
                ? "axes " + std::to_string(slot.axis) + " and " +
                      std::to_string(k)
                : "axis " + std::to_string(k) + ", the variant of length " +
                      std::to_string(variants_[axisFrom].length) + " in axis " +
                      std::to_string(slot.axis);
        return differs + ": it differs in " + axes +
               " (only the sequence axis may differ)";
      }
    }
    if (slot.axis < 0)
      continue;
    size_t axis = size_t(slot.axis);
    slot.offset = ref.shape[axis] - longest;
    if (slot.offset < 0)
      return variantWhere(variants_.size() - 1) + ": " + name + " has extent " +
             std::to_string(ref.shape[axis]) + " on its sequence axis " +
             std::to_string(axis) + ", less than the length";
    for (size_t v = 0; v + 1 < variants_.size(); ++v) {
      int64_t extent = slotDesc(*variants_[v].manifest, s).shape[axis];
      int64_t want = slot.offset + variants_[v].length;
      if (extent != want)
        return variantWhere(v) + ": " + name + " has extent " +
               std::to_string(extent) + " on its sequence axis " +
               std::to_string(axis) + ", not " + std::to_string(want) + " (" +
               std::to_string(slot.offset) + " plus the length, as at length " +
               std::to_string(longest) + ")";
    }
    // The longest variant's shape is valid (the manifest's), so these
    // products do not overflow.
    slot.outer = 1;
    for (size_t k = 0; k < axis; ++k)
      slot.outer *= size_t(ref.shape[k]);
    slot.innerBytes = dtypeSize(DType(ref.dtype));
    for (size_t k = axis + 1; k < size_t(ref.rank); ++k)
      slot.innerBytes *= size_t(ref.shape[k]);
  }
  return "";
}

void SequenceLengths::copyDescriptors(const tfc_manifest &main) {
  args_.assign(main.args, main.args + main.num_args);
  results_.assign(main.results, main.results + main.num_results);
  shapes_.resize(slots_.size());
  for (size_t s = 0; s < slots_.size(); ++s) {
    tfc_tensor_desc &desc = s < numArgs_ ? args_[s] : results_[s - numArgs_];
    shapes_[s].assign(desc.shape, desc.shape + desc.rank);
    desc.shape = shapes_[s].data();
  }
  manifest_ = main;
  manifest_.args = args_.data();
  manifest_.results = results_.data();
}

bool SequenceLengths::setLength(int64_t length) {
  size_t v = 0;
  while (variants_[v].length < length)
    ++v;
  std::vector<AlignedBuffer> &staging = staging_[v];
  if (variants_[v].length != length && staging.empty()) {
    // Allocated once per variant, on its first padded length, and kept.
    staging.resize(slots_.size());
    for (size_t s = 0; s < slots_.size(); ++s) {
      const Slot &slot = slots_[s];
      size_t nbytes = slot.outer * size_t(slot.offset + variants_[v].length) *
                      slot.innerBytes;
      if (slot.axis >= 0 && !staging[s].allocate(nbytes)) {
        staging.clear();
        return false;
      }
    }
  }
  for (size_t s = 0; s < slots_.size(); ++s)
    if (slots_[s].axis >= 0)
      shapes_[s][size_t(slots_[s].axis)] = slots_[s].offset + length;
  length_ = length;
  selected_ = v;
  return true;
}

void SequenceLengths::poisonStagedOutputs() {
  if (runLength() == length_)
    return;
  std::vector<AlignedBuffer> &staging = staging_[selected_];
  for (size_t s = numArgs_; s < slots_.size(); ++s)
    if (slots_[s].axis >= 0)
      std::memset(staging[s].data(), 0xff, staging[s].size());
}

void SequenceLengths::run(void **buffers) {
  const tfc_model_variant &variant = variants_[selected_];
  if (variant.length == length_) {
    variant.run(buffers);
    return;
  }
  std::vector<AlignedBuffer> &staging = staging_[selected_];
  for (size_t s = 0; s < slots_.size(); ++s) {
    const Slot &slot = slots_[s];
    if (slot.axis < 0) {
      call_[s] = buffers[s];
      continue;
    }
    call_[s] = staging[s].data();
    if (s < numArgs_)
      copyRows(
          static_cast<const uint8_t *>(buffers[s]),
          size_t(slot.offset + length_) * slot.innerBytes, staging[s].data(),
          size_t(slot.offset + variant.length) * slot.innerBytes, slot.outer);
  }
  variant.run(call_.data());
  for (size_t s = numArgs_; s < slots_.size(); ++s) {
    const Slot &slot = slots_[s];
    if (slot.axis >= 0)
      copyRows(staging[s].data(),
               size_t(slot.offset + variant.length) * slot.innerBytes,
               static_cast<uint8_t *>(buffers[s]),
               size_t(slot.offset + length_) * slot.innerBytes, slot.outer);
  }
}

} // namespace tfc
