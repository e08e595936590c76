//===- ModelFileWeights.cpp - Weights in a model's own file -----------===//

#include "ModelFileWeights.h"

#include "formats/MappedFile.h"

#include <algorithm>
#include <cstring>
#include <map>

namespace tfc {

namespace {

/// The files of one binding, each mapped once.
class Files {
public:
  explicit Files(const std::string &path) : path_(path) {
    size_t slash = path.rfind('/');
    folder_ = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  }

  /// The bytes of `range`, or null with `error` set.
  const uint8_t *bytes(const tfc_file_range &range, std::string &error) {
    std::string name = range.file && *range.file ? folder_ + range.file : path_;
    auto it = maps_.find(name);
    if (it == maps_.end()) {
      std::unique_ptr<MappedFile> map = MappedFile::open(name, error);
      if (!map)
        return nullptr;
      it = maps_.emplace(name, std::move(map)).first;
    }
    const MappedFile &map = *it->second;
    if (range.offset < 0 || range.nbytes < 0 ||
        uint64_t(range.offset) + uint64_t(range.nbytes) > map.size()) {
      error = name + " has " + std::to_string(map.size()) +
              " bytes, short of offset " + std::to_string(range.offset) +
              " + " + std::to_string(range.nbytes);
      return nullptr;
    }
    return map.data() + range.offset;
  }

  std::vector<std::unique_ptr<MappedFile>> release() {
    std::vector<std::unique_ptr<MappedFile>> out;
    for (auto &entry : maps_)
      out.push_back(std::move(entry.second));
    return out;
  }

private:
  std::string path_, folder_;
  std::map<std::string, std::unique_ptr<MappedFile>> maps_;
};

} // namespace

std::unique_ptr<SafetensorsFile>
openModelFileWeights(const std::string &path, const tfc_weight_file &where,
                     const std::vector<const tfc_tensor_desc *> &weights,
                     const std::string &model, std::string &error) {
  auto fail = [&](const std::string &message) {
    error = path + ": " + message;
    return nullptr;
  };
  if (size_t(where.num_weights) != weights.size())
    return fail("model " + model + " records the places of " +
                std::to_string(where.num_weights) + " weights for " +
                std::to_string(weights.size()));
  Files files(path);
  std::string why;
  std::string other = ": the file is not the one model " + model +
                      " was compiled from (compile it from this file)";
  std::vector<SafetensorsTensor> tensors;
  for (size_t i = 0; i < weights.size(); ++i) {
    const tfc_tensor_desc &desc = *weights[i];
    const tfc_weight_location &w = where.weights[i];
    std::string tensor = "tensor '" + std::string(desc.name) + "'";
    // The file's elements: the weight's type, or a float type that binding
    // converts to it (an f32 file for a model compiled with --dtype bf16).
    DType stored = static_cast<DType>(w.dtype);
    if (w.dtype != desc.dtype &&
        (!isValidDType(w.dtype) ||
         !isFloatConvertible(stored, static_cast<DType>(desc.dtype))))
      return fail(tensor + ": model " + model + " records elements of dtype " +
                  (isValidDType(w.dtype) ? std::string(dtypeName(stored))
                                         : std::to_string(w.dtype)) +
                  " in the file for a weight of " +
                  dtypeName(static_cast<DType>(desc.dtype)));
    uint64_t elements = tfc_tensor_desc_nbytes(&desc) /
                        std::max<size_t>(tfc_dtype_size(desc.dtype), 1);
    uint64_t want = elements * tfc_dtype_size(w.dtype);
    if (uint64_t(w.data.nbytes) != want)
      return fail(tensor + ": model " + model + " records " +
                  std::to_string(w.data.nbytes) + " bytes for it, its shape " +
                  std::to_string(want));
    const uint8_t *data = files.bytes(w.data, why);
    if (!data)
      return fail(tensor + ": " + why);
    // The TensorProto's own field headers right before the data.
    if (w.check_size > 0) {
      tfc_file_range header{w.data.file, w.data.offset - w.check_size,
                            w.check_size};
      const uint8_t *before =
          header.offset >= 0 ? files.bytes(header, why) : nullptr;
      if (!before || std::memcmp(before, w.check, size_t(w.check_size)) != 0)
        return fail(tensor + " is not at offset " +
                    std::to_string(w.data.offset) + other);
    }
    SafetensorsTensor t;
    t.name = desc.name;
    t.dtype = stored;
    t.shape.assign(desc.shape, desc.shape + desc.rank);
    t.data = data;
    t.nbytes = size_t(w.data.nbytes);
    t.fileOffset = size_t(w.data.offset);
    tensors.push_back(std::move(t));
  }
  for (int32_t i = 0; i < where.num_folded; ++i) {
    const tfc_folded_tensor &f = where.folded[i];
    const uint8_t *bytes = files.bytes(f.bytes, why);
    std::string what = f.name;
    if (!bytes)
      return fail(what + ": " + why);
    if (tfc_hash_bytes_(0xcbf29ce484222325ull, bytes, size_t(f.bytes.nbytes)) !=
        f.hash)
      return fail("the bytes of " + what + " are not those model " + model +
                  " was compiled with" + other);
  }
  return SafetensorsFile::fromMappedTensors(path, files.release(),
                                            std::move(tensors));
}

} // namespace tfc
