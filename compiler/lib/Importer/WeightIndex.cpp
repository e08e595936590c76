//===- WeightIndex.cpp - The tensors a model directory holds --------------===//

#include "WeightIndex.h"
#include "Config.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace llvm;

namespace tfc::importer {

static LogicalResult addFile(StringRef path, StringMap<WeightInfo> &weights,
                             std::string &error) {
  std::string why;
  std::unique_ptr<SafetensorsFile> file =
      SafetensorsFile::open(path.str(), why);
  if (!file) {
    // The runtime's messages usually name the file already.
    error = StringRef(why).starts_with(path) ? why : (path + ": " + why).str();
    return failure();
  }
  for (const SafetensorsTensor &t : file->tensors())
    weights[t.name] = WeightInfo{t.name, t.dtype, t.shape, path.str()};
  return success();
}

FailureOr<WeightIndex> WeightIndex::load(StringRef dir, std::string &error) {
  WeightIndex index;
  SmallString<256> single(dir);
  sys::path::append(single, "model.safetensors");
  SmallString<256> indexPath(dir);
  sys::path::append(indexPath, "model.safetensors.index.json");
  index.primary = std::string(single);

  if (sys::fs::exists(single) || !sys::fs::exists(indexPath)) {
    if (!sys::fs::exists(single)) {
      error = (single + ": no such file (the importer reads safetensors "
                        "weights; convert pytorch_model.bin first)")
                  .str();
      return failure();
    }
    if (failed(addFile(single, index.weights, error)))
      return failure();
    return index;
  }

  // Sharded: {"weight_map": {"name": "model-00001-of-00002.safetensors"}}.
  FailureOr<JsonConfig> json = JsonConfig::load(indexPath, error);
  if (failed(json))
    return failure();
  index.primary = std::string(indexPath);
  const json::Object *map = json->object().getObject("weight_map");
  if (!map) {
    (void)json->fieldError("weight_map", "expected an object", error);
    return failure();
  }
  llvm::StringSet<> shards;
  for (const auto &kv : *map) {
    std::optional<StringRef> shard = kv.second.getAsString();
    if (!shard || shard->contains('/') || shard->empty()) {
      (void)json->fieldError(
          "weight_map",
          "entry \"" + kv.first.str() + "\": expected a file name", error);
      return failure();
    }
    shards.insert(*shard);
  }
  for (const auto &shard : shards) {
    SmallString<256> path(dir);
    sys::path::append(path, shard.getKey());
    if (failed(addFile(path, index.weights, error)))
      return failure();
  }
  return index;
}

const WeightInfo *WeightIndex::lookup(StringRef name) const {
  auto it = weights.find(name);
  return it == weights.end() ? nullptr : &it->second;
}

FailureOr<std::string> WeightIndex::findPrefix(StringRef suffix) const {
  if (weights.count(suffix))
    return std::string();
  // Prefer the shortest prefix that ends at a '.' boundary.
  std::optional<std::string> best;
  for (const auto &kv : weights) {
    StringRef name = kv.getKey();
    if (!name.ends_with(suffix) || name.size() == suffix.size())
      continue;
    StringRef prefix = name.drop_back(suffix.size());
    if (!prefix.ends_with("."))
      continue;
    if (!best || prefix.size() < best->size())
      best = prefix.str();
  }
  if (!best)
    return failure();
  return *best;
}

} // namespace tfc::importer
