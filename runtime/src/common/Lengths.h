//===- Lengths.h - Models built for several sequence lengths -*- C++ -*-===//
//
// A model library that exports tfc_model_variants (abi.h "Sequence lengths")
// holds the same model compiled for several lengths. SequenceLengths checks
// the variants against the library's manifest, finds the sequence axis of
// every tensor, keeps the descriptors at the length the caller chose, and
// runs that length as the shortest variant of at least that length: inputs
// padded with zeros along their sequence axis into staging buffers, outputs
// computed into staging buffers and cut back into the caller's.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_COMMON_LENGTHS_H
#define TFC_RUNTIME_COMMON_LENGTHS_H

#include "tfc/runtime/abi.h"
#include "tfc/runtime/buffer.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tfc {

class SequenceLengths {
public:
  /// Checks the `count` variants that tfc_model_variants of the model `file`
  /// returned against `main`, the library's manifest (already checked, target
  /// "cpu"). Null and a one-line error naming the file, the variant's length
  /// and the tensor when they do not describe one model at several lengths.
  /// Starts at the longest length.
  static std::unique_ptr<SequenceLengths>
  create(const std::string &file, const tfc_manifest &main,
         const tfc_model_variant *variants, int32_t count, std::string &error);

  SequenceLengths(const SequenceLengths &) = delete;
  SequenceLengths &operator=(const SequenceLengths &) = delete;

  /// The library's manifest with the shapes of the current length; owned
  /// here, at a fixed address (setLength changes the shapes in place).
  const tfc_manifest &manifest() const { return manifest_; }

  size_t numLengths() const { return variants_.size(); }
  int64_t builtLength(size_t index) const { return variants_[index].length; }
  int64_t longest() const { return variants_.back().length; }
  /// The length the model takes now, and the built length it runs as.
  int64_t length() const { return length_; }
  int64_t runLength() const { return variants_[selected_].length; }

  /// The sequence axis of argument or result `slot` (arguments, then
  /// results, as in tfc_model_run's buffers), or -1.
  int32_t axis(size_t slot) const { return slots_[slot].axis; }

  /// Takes `length` (1 to longest()) from now on: selects the shortest
  /// variant of at least that length, allocating its staging buffers if it
  /// runs padded, and sets the descriptors' extents. False, with nothing
  /// changed, when the staging buffers cannot be allocated.
  bool setLength(int64_t length);

  /// Fills the staging buffers of the outputs with 0xFF bytes, so that an
  /// element the variant does not write shows in the caller's outputs as it
  /// does without staging. Nothing to do when the length runs unpadded.
  void poisonStagedOutputs();

  /// Runs the current length on the caller's `buffers` (arguments, then
  /// results, in the current shapes): directly when it is a built length,
  /// else through the staging buffers.
  void run(void **buffers);

private:
  /// What the runtime knows of one argument or result.
  struct Slot {
    int32_t axis = -1;
    int64_t offset = 0;    // its extent on the axis minus the length
    size_t outer = 0;      // elements before the axis (their count)
    size_t innerBytes = 0; // bytes of one step along the axis
  };

  SequenceLengths() = default;
  std::string check(const std::string &file, const tfc_manifest &main);
  void copyDescriptors(const tfc_manifest &main);

  std::vector<tfc_model_variant> variants_;
  std::vector<Slot> slots_;
  size_t numArgs_ = 0;
  int64_t length_ = 0;
  size_t selected_ = 0;

  tfc_manifest manifest_{};
  std::vector<tfc_tensor_desc> args_, results_;
  std::vector<std::vector<int64_t>> shapes_; // per slot

  /// staging_[variant][slot]: the variant's buffer for a slot with an axis
  /// (empty for the others and for variants not run padded yet).
  std::vector<std::vector<AlignedBuffer>> staging_;
  std::vector<void *> call_; // the buffers handed to a padded run
};

} // namespace tfc

#endif // TFC_RUNTIME_COMMON_LENGTHS_H
