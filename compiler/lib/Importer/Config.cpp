//===- Config.cpp - Typed access to a Hugging Face config.json ------------===//

#include "Config.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>

using namespace mlir;
using namespace llvm;

namespace tfc::importer {

FailureOr<JsonConfig> JsonConfig::load(StringRef path, std::string &error) {
  auto buffer = MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer) {
    error = (path + ": cannot read: " + buffer.getError().message()).str();
    return failure();
  }
  Expected<json::Value> parsed = json::parse((*buffer)->getBuffer());
  if (!parsed) {
    error = (path + ": malformed JSON: " + toString(parsed.takeError())).str();
    return failure();
  }
  json::Object *object = parsed->getAsObject();
  if (!object) {
    error = (path + ": expected a JSON object at the top level").str();
    return failure();
  }
  return JsonConfig(path.str(), std::move(*object));
}

LogicalResult JsonConfig::fieldError(StringRef field, const Twine &message,
                                     std::string &error) const {
  error = (filePath + ": field \"" + field + "\": " + message).str();
  return failure();
}

FailureOr<int64_t> JsonConfig::positiveInt(StringRef field,
                                           std::string &error) const {
  const json::Value *v = root.get(field);
  if (!v) {
    (void)fieldError(field, "missing (expected a positive integer)", error);
    return failure();
  }
  std::optional<int64_t> i = v->getAsInteger();
  if (!i) {
    // 384.0 is accepted; 384.5 and "384" are not.
    std::optional<double> d = v->getAsNumber();
    if (d && std::isfinite(*d) && *d == std::floor(*d) && *d < 9e18)
      i = static_cast<int64_t>(*d);
  }
  if (!i || *i <= 0) {
    (void)fieldError(field, "expected a positive integer", error);
    return failure();
  }
  return *i;
}

FailureOr<double> JsonConfig::number(StringRef field, std::string &error,
                                     std::optional<double> fallback) const {
  const json::Value *v = root.get(field);
  if (!v) {
    if (fallback)
      return *fallback;
    (void)fieldError(field, "missing (expected a number)", error);
    return failure();
  }
  std::optional<double> d = v->getAsNumber();
  if (!d || !std::isfinite(*d)) {
    (void)fieldError(field, "expected a number", error);
    return failure();
  }
  return *d;
}

FailureOr<double> JsonConfig::positiveNumber(StringRef field,
                                             std::string &error,
                                             double fallback) const {
  FailureOr<double> d = number(field, error, fallback);
  if (succeeded(d) && *d <= 0) {
    (void)fieldError(field, "expected a positive number", error);
    return failure();
  }
  return d;
}

FailureOr<std::string>
JsonConfig::string(StringRef field, std::string &error,
                   std::optional<StringRef> fallback) const {
  const json::Value *v = root.get(field);
  if (!v) {
    if (fallback)
      return fallback->str();
    (void)fieldError(field, "missing (expected a string)", error);
    return failure();
  }
  std::optional<StringRef> s = v->getAsString();
  if (!s) {
    (void)fieldError(field, "expected a string", error);
    return failure();
  }
  return s->str();
}

FailureOr<bool> JsonConfig::boolean(StringRef field, std::string &error,
                                    bool fallback) const {
  const json::Value *v = root.get(field);
  if (!v)
    return fallback;
  std::optional<bool> b = v->getAsBoolean();
  if (!b) {
    (void)fieldError(field, "expected true or false", error);
    return failure();
  }
  return *b;
}

FailureOr<std::vector<std::string>>
JsonConfig::stringList(StringRef field, std::string &error) const {
  std::vector<std::string> out;
  const json::Value *v = root.get(field);
  if (!v)
    return out;
  const json::Array *array = v->getAsArray();
  if (!array) {
    (void)fieldError(field, "expected an array of strings", error);
    return failure();
  }
  for (const json::Value &e : *array) {
    std::optional<StringRef> s = e.getAsString();
    if (!s) {
      (void)fieldError(field, "expected an array of strings", error);
      return failure();
    }
    out.push_back(s->str());
  }
  return out;
}

} // namespace tfc::importer
