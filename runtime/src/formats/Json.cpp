//===- Json.cpp - A small, strict JSON parser -----------------------------===//

#include "Json.h"

namespace tfc {
namespace json {

namespace {

class Parser {
public:
  Parser(const char *text, size_t size)
      : begin(text), cur(text), end(text + size) {}

  bool parseDocument(Value &result) {
    skipSpace();
    if (!parseValue(result, 0))
      return false;
    skipSpace();
    if (cur != end)
      return fail("unexpected data after the JSON value");
    return true;
  }

  std::string error;

private:
  const char *begin;
  const char *cur;
  const char *end;

  bool fail(const std::string &message) {
    error = "at byte " + std::to_string(cur - begin) + ": " + message;
    return false;
  }

  void skipSpace() {
    while (cur != end &&
           (*cur == ' ' || *cur == '\t' || *cur == '\n' || *cur == '\r'))
      ++cur;
  }

  bool literal(const char *word) {
    const char *p = cur;
    for (; *word; ++word, ++p)
      if (p == end || *p != *word)
        return false;
    cur = p;
    return true;
  }

  bool parseValue(Value &value, int depth) {
    if (cur == end)
      return fail("unexpected end of input");
    switch (*cur) {
    case '{':
      return parseObject(value, depth + 1);
    case '[':
      return parseArray(value, depth + 1);
    case '"':
      value.kind = Value::Kind::String;
      return parseString(value.text);
    case 't':
    case 'f':
      value.boolean = *cur == 't';
      if (!literal(value.boolean ? "true" : "false"))
        return fail("invalid literal");
      value.kind = Value::Kind::Bool;
      return true;
    case 'n':
      if (!literal("null"))
        return fail("invalid literal");
      value.kind = Value::Kind::Null;
      return true;
    default:
      if (*cur == '-' || (*cur >= '0' && *cur <= '9'))
        return parseNumber(value);
      return fail("expected a value");
    }
  }

  static bool isDigit(char c) { return c >= '0' && c <= '9'; }

  /// Skips the digits at `cur`; false when there is none.
  bool skipDigits() {
    const char *start = cur;
    while (cur != end && isDigit(*cur))
      ++cur;
    return cur != start;
  }

  bool parseNumber(Value &value) {
    const char *start = cur;
    if (cur != end && *cur == '-')
      ++cur;
    // No leading zero: "0" or a digit 1-9 and any more.
    if (cur != end && *cur == '0')
      ++cur;
    else if (!skipDigits())
      return fail("invalid number");
    if (cur != end && *cur == '.') {
      ++cur;
      if (!skipDigits())
        return fail("invalid number");
    }
    if (cur != end && (*cur == 'e' || *cur == 'E')) {
      ++cur;
      if (cur != end && (*cur == '+' || *cur == '-'))
        ++cur;
      if (!skipDigits())
        return fail("invalid number");
    }
    value.kind = Value::Kind::Number;
    value.text.assign(start, cur);
    return true;
  }

  static int hexValue(char c) {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
      return c - 'A' + 10;
    return -1;
  }

  bool parseHex4(uint32_t &code) {
    if (end - cur < 4)
      return fail("truncated \\u escape");
    code = 0;
    for (int i = 0; i < 4; ++i) {
      int digit = hexValue(cur[i]);
      if (digit < 0)
        return fail("invalid \\u escape");
      code = code * 16 + static_cast<uint32_t>(digit);
    }
    cur += 4;
    return true;
  }

  static void appendUtf8(std::string &out, uint32_t code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  bool parseString(std::string &out) {
    ++cur; // '"'
    out.clear();
    while (true) {
      if (cur == end)
        return fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(*cur);
      if (c == '"') {
        ++cur;
        return true;
      }
      if (c < 0x20)
        return fail("control character in string");
      if (c != '\\') {
        out += static_cast<char>(c);
        ++cur;
        continue;
      }
      ++cur;
      if (cur == end)
        return fail("unterminated string");
      char e = *cur++;
      switch (e) {
      case '"':
      case '\\':
      case '/':
        out += e;
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        uint32_t code;
        if (!parseHex4(code))
          return false;
        if (code >= 0xDC00 && code <= 0xDFFF)
          return fail("lone low surrogate in \\u escape");
        if (code >= 0xD800 && code <= 0xDBFF) {
          if (end - cur < 2 || cur[0] != '\\' || cur[1] != 'u')
            return fail("lone high surrogate in \\u escape");
          cur += 2;
          uint32_t low;
          if (!parseHex4(low))
            return false;
          if (low < 0xDC00 || low > 0xDFFF)
            return fail("invalid surrogate pair in \\u escape");
          code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
        }
        appendUtf8(out, code);
        break;
      }
      default:
        --cur;
        return fail("invalid escape in string");
      }
    }
  }

  /// An array or an object at `cur` ('[' or '{') into `value`, of `kind`:
  /// each element parsed by `element` where it starts (spaces skipped), up
  /// to `close`; `what` names the container in errors.
  template <typename Element>
  bool parseContainer(Value &value, Value::Kind kind, int depth, char close,
                      const char *what, Element element) {
    if (depth > kMaxDepth)
      return fail("nesting deeper than " + std::to_string(kMaxDepth));
    ++cur;
    value.kind = kind;
    skipSpace();
    if (cur != end && *cur == close) {
      ++cur;
      return true;
    }
    while (true) {
      skipSpace();
      if (!element())
        return false;
      skipSpace();
      if (cur == end)
        return fail(std::string("unterminated ") + what);
      if (*cur == ',') {
        ++cur;
        continue;
      }
      if (*cur == close) {
        ++cur;
        return true;
      }
      return fail(std::string("expected ',' or '") + close + "'");
    }
  }

  bool parseArray(Value &value, int depth) {
    return parseContainer(value, Value::Kind::Array, depth, ']', "array", [&] {
      value.items.emplace_back();
      return parseValue(value.items.back(), depth);
    });
  }

  bool parseObject(Value &value, int depth) {
    auto member = [&] {
      if (cur == end || *cur != '"')
        return fail("expected a string key");
      value.members.emplace_back();
      auto &[key, item] = value.members.back();
      if (!parseString(key))
        return false;
      skipSpace();
      if (cur == end || *cur != ':')
        return fail("expected ':'");
      ++cur;
      skipSpace();
      return parseValue(item, depth);
    };
    return parseContainer(value, Value::Kind::Object, depth, '}', "object",
                          member);
  }
};

} // namespace

bool parse(const char *text, size_t size, Value &result, std::string &error) {
  Parser parser(text, size);
  result = Value();
  if (parser.parseDocument(result))
    return true;
  error = parser.error;
  return false;
}

IntResult asUInt64(const Value &value, uint64_t &result) {
  if (value.kind != Value::Kind::Number)
    return IntResult::NotAnInteger;
  const std::string &text = value.text;
  if (!text.empty() && text[0] == '-') {
    // "-0" is zero; anything else below zero is negative.
    if (text.find_first_of(".eE") != std::string::npos)
      return IntResult::NotAnInteger;
    return text == "-0" ? (result = 0, IntResult::Ok) : IntResult::Negative;
  }
  uint64_t total = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return IntResult::NotAnInteger;
    if (__builtin_mul_overflow(total, uint64_t(10), &total) ||
        __builtin_add_overflow(total, uint64_t(c - '0'), &total))
      return IntResult::TooLarge;
  }
  result = total;
  return IntResult::Ok;
}

const char *kindName(Value::Kind kind) {
  switch (kind) {
  case Value::Kind::Null:
    return "null";
  case Value::Kind::Bool:
    return "a boolean";
  case Value::Kind::Number:
    return "a number";
  case Value::Kind::String:
    return "a string";
  case Value::Kind::Array:
    return "an array";
  case Value::Kind::Object:
    return "an object";
  }
  return "?";
}

} // namespace json
} // namespace tfc
