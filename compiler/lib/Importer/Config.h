//===- Config.h - Typed access to a Hugging Face config.json ----*- C++ -*-===//
//
// Every getter reports a bad or missing field as one line naming the file and
// the field, e.g. `DIR/config.json: field "hidden_size": expected a positive
// integer`.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_LIB_IMPORTER_CONFIG_H
#define TFC_LIB_IMPORTER_CONFIG_H

#include "mlir/Support/LLVM.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tfc::importer {

/// The largest JSON file the importer reads (config.json, modules.json,
/// 1_Pooling/config.json, model.safetensors.index.json): a few KiB in
/// practice, the index of a model with tens of thousands of tensors a few
/// MiB.
constexpr uint64_t kMaxJsonFileBytes = uint64_t(16) << 20;

/// Reads and parses the JSON file `path`. It must be a regular file (a FIFO,
/// a device such as /dev/zero or a directory is refused before anything is
/// read, and nothing blocks) of at most kMaxJsonFileBytes. Errors are one
/// line naming the file: `PATH: not a regular file`, `PATH: N bytes, more
/// than a config file holds (16 MiB)`, `PATH: cannot read: WHY`, `PATH:
/// malformed JSON: WHY`.
mlir::FailureOr<llvm::json::Value> parseJsonFile(llvm::StringRef path,
                                                 std::string &error);

class JsonConfig {
public:
  /// Reads and parses `path`; the top level must be an object.
  static mlir::FailureOr<JsonConfig> load(llvm::StringRef path,
                                          std::string &error);

  const std::string &path() const { return filePath; }
  const llvm::json::Object &object() const { return root; }
  bool has(llvm::StringRef field) const { return root.get(field) != nullptr; }

  /// An integer > 0 (a JSON number with no fraction).
  mlir::FailureOr<int64_t> positiveInt(llvm::StringRef field,
                                       std::string &error) const;
  /// A number; `fallback` when the field is absent (an error when there is
  /// no fallback).
  mlir::FailureOr<double> number(llvm::StringRef field, std::string &error,
                                 std::optional<double> fallback = {}) const;
  /// A number > 0; `fallback` when the field is absent.
  mlir::FailureOr<double> positiveNumber(llvm::StringRef field,
                                         std::string &error,
                                         double fallback) const;
  mlir::FailureOr<std::string>
  string(llvm::StringRef field, std::string &error,
         std::optional<llvm::StringRef> fallback = {}) const;
  /// A boolean; `fallback` when absent.
  mlir::FailureOr<bool> boolean(llvm::StringRef field, std::string &error,
                                bool fallback) const;
  /// An array of strings; empty when absent.
  mlir::FailureOr<std::vector<std::string>>
  stringList(llvm::StringRef field, std::string &error) const;

  /// The object `field` (CLIP's text_config) as a config of its own, whose
  /// errors name its fields "FIELD.NAME"; an error when it is missing or not
  /// an object.
  mlir::FailureOr<JsonConfig> nested(llvm::StringRef field,
                                     std::string &error) const;

  /// Sets `error` to `PATH: field "FIELD": MESSAGE` and returns failure.
  mlir::LogicalResult fieldError(llvm::StringRef field,
                                 const llvm::Twine &message,
                                 std::string &error) const;

private:
  JsonConfig(std::string path, llvm::json::Object root,
             std::string fieldPrefix = "")
      : filePath(std::move(path)), root(std::move(root)),
        fieldPrefix(std::move(fieldPrefix)) {}

  std::string filePath;
  llvm::json::Object root;
  /// "FIELD." for a nested config, before its fields' names in errors.
  std::string fieldPrefix;
};

} // namespace tfc::importer

#endif // TFC_LIB_IMPORTER_CONFIG_H
