//===- Json.h - A small, strict JSON parser for file headers -----*- C++
//-*-===//
//
// Parses RFC 8259 JSON into a tree. Built for untrusted input: it never reads
// past the given range, limits nesting depth, rejects control characters in
// strings, lone surrogates and trailing garbage. Numbers keep their text;
// asUInt64() reads a non-negative integer exactly.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_FORMATS_JSON_H
#define TFC_RUNTIME_FORMATS_JSON_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tfc {
namespace json {

struct Value {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  /// The string's value, or the number's text.
  std::string text;
  std::vector<Value> items;
  /// In document order; duplicates kept (callers decide).
  std::vector<std::pair<std::string, Value>> members;

  bool isObject() const { return kind == Kind::Object; }
  bool isArray() const { return kind == Kind::Array; }
  bool isString() const { return kind == Kind::String; }
  bool isNumber() const { return kind == Kind::Number; }
};

constexpr int kMaxDepth = 64;

/// Parses `text[0, size)`; whitespace may surround the value. On failure
/// returns false and sets `error` ("at byte 17: expected ':'").
bool parse(const char *text, size_t size, Value &result, std::string &error);

enum class IntResult { Ok, NotAnInteger, Negative, TooLarge };
/// Reads a Number holding a non-negative integer (no fraction or exponent).
IntResult asUInt64(const Value &value, uint64_t &result);

/// "a string", "an object", ... for messages.
const char *kindName(Value::Kind kind);

} // namespace json
} // namespace tfc

#endif // TFC_RUNTIME_FORMATS_JSON_H
