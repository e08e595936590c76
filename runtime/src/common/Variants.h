//===- Variants.h - Models built for several shapes ------------*- C++ -*-===//
//
// A model library that exports tfc_model_variants (abi.h "Variants") holds
// the same model compiled for a grid of batch sizes and sequence lengths.
// ModelVariants checks the variants against the library's manifest, finds
// the batch and sequence axes of every tensor, keeps the descriptors at the
// batch size and length the caller chose, and runs them as the variant of
// the smallest built batch and the shortest built length that hold them:
// inputs padded with zeros into staging buffers, outputs computed into
// staging buffers and cut back into the caller's. A batch larger than the
// largest built runs in slices of the largest, the last as the smallest
// built batch that holds it.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_COMMON_VARIANTS_H
#define TFC_RUNTIME_COMMON_VARIANTS_H

#include "tfc/runtime/abi.h"
#include "tfc/runtime/buffer.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tfc {

class ModelVariants {
public:
  /// Checks the `count` variants that tfc_model_variants of the model `file`
  /// returned against `main`, the library's manifest (already checked, target
  /// "cpu"). Null and a one-line error naming the file, the variant and the
  /// tensor when they do not describe one model at several batch sizes and
  /// lengths. Starts at the largest batch and the longest length.
  static std::unique_ptr<ModelVariants>
  create(const std::string &file, const tfc_manifest &main,
         const tfc_model_variant *variants, int32_t count, std::string &error);

  ModelVariants(const ModelVariants &) = delete;
  ModelVariants &operator=(const ModelVariants &) = delete;

  /// The library's manifest with the shapes of the current batch and length;
  /// owned here, at a fixed address (setShape changes the shapes in place).
  const tfc_manifest &manifest() const { return manifest_; }

  /// The built batch sizes and lengths, increasing (one entry where the
  /// model was built for one).
  const std::vector<int64_t> &batches() const { return batches_; }
  const std::vector<int64_t> &lengths() const { return lengths_; }
  /// The batch size and length the model takes now.
  int64_t batch() const { return batch_; }
  int64_t length() const { return length_; }

  /// The batch and sequence axes of argument or result `slot` (arguments,
  /// then results, as in tfc_model_run's buffers), or -1.
  int32_t batchAxis(size_t slot) const { return slots_[slot].batchAxis; }
  int32_t lengthAxis(size_t slot) const { return slots_[slot].lengthAxis; }

  /// Whether every tensor of `batch` sequences at the current length has a
  /// byte size that fits in int64_t (a batch beyond the largest built one
  /// has no other limit).
  bool fits(int64_t batch) const;

  /// Takes `batch` sequences (at least 1, fits()) of `length` tokens (1 to
  /// the longest built) from now on: allocates the staging buffers of the
  /// variants that run them, if they run padded, and sets the descriptors'
  /// extents. False, with nothing changed, when the staging buffers cannot
  /// be allocated.
  bool setShape(int64_t batch, int64_t length);

  /// Runs the current shape on the caller's `buffers` (arguments, then
  /// results, in the current shapes): directly when it is a built one, else
  /// slice by slice, through the staging buffers where a slice is padded.
  /// Staged outputs are filled with 0xFF bytes before each run, so that an
  /// element the variant does not write shows in the caller's outputs as it
  /// does without staging.
  void run(void **buffers);

private:
  /// What the runtime knows of one argument or result.
  struct Slot {
    int32_t batchAxis = -1;
    int64_t factor = 0; // its extent on the batch axis over the batch size
    int32_t lengthAxis = -1;
    int64_t offset = 0; // its extent on the sequence axis minus the length
    size_t elementBytes = 0;
    std::vector<int64_t> shape; // at the current batch size and length
    bool varies() const { return batchAxis >= 0 || lengthAxis >= 0; }
  };

  ModelVariants() = default;
  std::string checkGrid(const std::string &file);
  std::string check(const std::string &file, const tfc_manifest &main);
  void copyDescriptors(const tfc_manifest &main);

  /// The shape of `slot` at `batch` sequences of `length` tokens.
  std::vector<int64_t> shapeAt(size_t slot, int64_t batch,
                               int64_t length) const;
  /// The variant that runs `batch` (at most the largest built) sequences of
  /// `length` tokens, an index into variants_.
  size_t variantFor(int64_t batch, int64_t length) const;
  /// Whether a slice of `batch` sequences at the current length runs through
  /// staging buffers: padded, or not at the start of buffers that have
  /// something before their batch axis.
  bool staged(size_t variant, int64_t batch, int64_t length, bool whole) const;
  bool allocateStaging(size_t variant);
  /// Runs sequences [first, first + count) of the caller's buffers as
  /// `variant`.
  void runSlice(void **buffers, size_t variant, int64_t first, int64_t count);

  std::vector<tfc_model_variant> variants_;
  std::vector<int64_t> batches_, lengths_;
  std::vector<Slot> slots_;
  size_t numArgs_ = 0;
  int64_t batch_ = 0, length_ = 0;
  /// Whether every batch axis is the first axis of extent above 1, so that a
  /// slice of sequences is a contiguous range of each buffer.
  bool batchOutermost_ = true;

  tfc_manifest manifest_{};
  std::vector<tfc_tensor_desc> args_, results_;

  /// staging_[variant][slot]: the variant's buffer for a slot with a batch
  /// or sequence axis (empty for the others and for variants not run
  /// staged yet).
  std::vector<std::vector<AlignedBuffer>> staging_;
  std::vector<void *> call_; // the buffers handed to a variant's run
};

} // namespace tfc

#endif // TFC_RUNTIME_COMMON_VARIANTS_H
