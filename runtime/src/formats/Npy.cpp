//===- Npy.cpp - Reading and writing numpy .npy files ---------------------===//

#include "tfc/runtime/npy.h"

#include "MappedFile.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace tfc {

namespace {

const char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

struct DescrSpelling {
  const char *code; // without the byte-order character
  DType dtype;
};

constexpr DescrSpelling kDescrs[] = {
    {"f4", DType::F32}, {"f2", DType::F16}, {"f8", DType::F64},
    {"i8", DType::I64}, {"i4", DType::I32}, {"i2", DType::I16},
    {"i1", DType::I8},  {"u1", DType::U8},  {"u2", DType::U16},
    {"u4", DType::U32}, {"u8", DType::U64}, {"b1", DType::Bool},
};

/// A cursor over the header: a Python dict literal such as
/// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
public:
  HeaderParser(const char *text, size_t size) : cur(text), end(text + size) {}

  bool parse(std::string &descr, bool &fortranOrder,
             std::vector<int64_t> &shape, std::string &error) {
    bool sawDescr = false, sawOrder = false, sawShape = false;
    skipSpace();
    if (!consume('{'))
      return fail("header is not a dict", error);
    while (true) {
      skipSpace();
      if (consume('}'))
        break;
      std::string key;
      if (!parseString(key))
        return fail("expected a quoted key in the header", error);
      skipSpace();
      if (!consume(':'))
        return fail("expected ':' after '" + key + "'", error);
      skipSpace();
      if (key == "descr") {
        if (sawDescr)
          return fail("duplicate key 'descr'", error);
        sawDescr = true;
        if (!parseString(descr))
          return fail("'descr' must be a string (structured arrays are not "
                      "supported)",
                      error);
      } else if (key == "fortran_order") {
        if (sawOrder)
          return fail("duplicate key 'fortran_order'", error);
        sawOrder = true;
        if (word("True"))
          fortranOrder = true;
        else if (word("False"))
          fortranOrder = false;
        else
          return fail("'fortran_order' must be True or False", error);
      } else if (key == "shape") {
        if (sawShape)
          return fail("duplicate key 'shape'", error);
        sawShape = true;
        if (!parseShape(shape, error))
          return false;
      } else {
        return fail("unexpected key '" + key + "' in the header", error);
      }
      skipSpace();
      if (consume(','))
        continue;
      skipSpace();
      if (consume('}'))
        break;
      return fail("expected ',' or '}' in the header", error);
    }
    skipSpace();
    if (cur != end)
      return fail("unexpected data after the header dict", error);
    if (!sawDescr || !sawOrder || !sawShape)
      return fail(std::string("header lacks '") +
                      (!sawDescr   ? "descr"
                       : !sawOrder ? "fortran_order"
                                   : "shape") +
                      "'",
                  error);
    return true;
  }

private:
  const char *cur;
  const char *end;

  static bool fail(const std::string &message, std::string &error) {
    error = message;
    return false;
  }

  void skipSpace() {
    while (cur != end && (*cur == ' ' || *cur == '\t' || *cur == '\n' ||
                          *cur == '\r' || *cur == '\0'))
      ++cur;
  }

  bool consume(char c) {
    if (cur == end || *cur != c)
      return false;
    ++cur;
    return true;
  }

  bool word(const char *text) {
    size_t n = std::strlen(text);
    if (static_cast<size_t>(end - cur) < n || std::memcmp(cur, text, n) != 0)
      return false;
    cur += n;
    return true;
  }

  bool parseString(std::string &out) {
    if (cur == end || (*cur != '\'' && *cur != '"'))
      return false;
    char quote = *cur++;
    out.clear();
    while (cur != end && *cur != quote) {
      if (*cur == '\\' || *cur == '\n')
        return false;
      out += *cur++;
    }
    return consume(quote);
  }

  bool parseShape(std::vector<int64_t> &shape, std::string &error) {
    shape.clear();
    if (!consume('('))
      return fail("'shape' must be a tuple", error);
    while (true) {
      skipSpace();
      if (consume(')'))
        return true;
      if (cur == end || *cur < '0' || *cur > '9')
        return fail("'shape' must hold non-negative integers", error);
      int64_t dim = 0;
      while (cur != end && *cur >= '0' && *cur <= '9') {
        if (__builtin_mul_overflow(dim, int64_t(10), &dim) ||
            __builtin_add_overflow(dim, int64_t(*cur - '0'), &dim))
          return fail("a dimension in 'shape' is too large", error);
        ++cur;
      }
      consume('L'); // Python 2 longs
      if (shape.size() >= 64)
        return fail("'shape' has more than 64 dimensions", error);
      shape.push_back(dim);
      skipSpace();
      if (consume(','))
        continue;
      if (consume(')'))
        return true;
      return fail("expected ',' or ')' in 'shape'", error);
    }
  }
};

bool lookupDescr(const std::string &descr, DType &dtype, std::string &error) {
  if (descr.size() != 3) {
    error = "unsupported dtype '" + descr + "'";
    return false;
  }
  char order = descr[0];
  std::string code = descr.substr(1);
  if (order == '>' && code[1] != '1') {
    error = "big-endian dtype '" + descr + "' is not supported (use astype('<" +
            code + "'))";
    return false;
  }
  if (order != '<' && order != '|' && order != '=' && order != '>') {
    error = "unsupported dtype '" + descr + "'";
    return false;
  }
  for (const DescrSpelling &spelling : kDescrs)
    if (code == spelling.code) {
      dtype = spelling.dtype;
      return true;
    }
  error = "unsupported dtype '" + descr + "'";
  return false;
}

} // namespace

const char *npyDescr(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "<f4";
  case DType::F16:
    return "<f2";
  case DType::F64:
    return "<f8";
  case DType::I64:
    return "<i8";
  case DType::I32:
    return "<i4";
  case DType::I16:
    return "<i2";
  case DType::I8:
    return "|i1";
  case DType::U8:
    return "|u1";
  case DType::BF16:
  case DType::U16:
    return "<u2";
  case DType::U32:
    return "<u4";
  case DType::U64:
    return "<u8";
  case DType::Bool:
    return "|b1";
  case DType::F8E4M3:
  case DType::F8E5M2:
    return nullptr;
  }
  return nullptr;
}

bool parseNpyHeader(const uint8_t *data, size_t size, NpyHeader &header,
                    std::string &error) {
  if (size < kMagicSize + 2 || std::memcmp(data, kMagic, kMagicSize) != 0) {
    error = "not a .npy file (bad magic)";
    return false;
  }
  uint8_t major = data[6];
  size_t headerLength, headerStart;
  if (major == 1) {
    if (size < 10) {
      error = "truncated header";
      return false;
    }
    headerLength = size_t(data[8]) | (size_t(data[9]) << 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) {
      error = "truncated header";
      return false;
    }
    headerLength = size_t(data[8]) | (size_t(data[9]) << 8) |
                   (size_t(data[10]) << 16) | (size_t(data[11]) << 24);
    headerStart = 12;
  } else {
    error = "unsupported .npy version " + std::to_string(major) + "." +
            std::to_string(data[7]);
    return false;
  }
  if (headerLength > size - headerStart) {
    error = "truncated header (announces " + std::to_string(headerLength) +
            " bytes, " + std::to_string(size - headerStart) + " left)";
    return false;
  }
  std::string descr;
  bool fortranOrder = false;
  std::string headerError;
  HeaderParser parser(reinterpret_cast<const char *>(data + headerStart),
                      headerLength);
  if (!parser.parse(descr, fortranOrder, header.shape, headerError)) {
    error = "bad header: " + headerError;
    return false;
  }
  if (!lookupDescr(descr, header.dtype, error))
    return false;
  if (fortranOrder && header.shape.size() > 1) {
    error = "fortran_order arrays are not supported (save a C-order array, "
            "e.g. np.ascontiguousarray(a))";
    return false;
  }
  std::optional<size_t> nbytes =
      tensorBytes(header.shape, dtypeSize(header.dtype));
  if (!nbytes) {
    error = "shape " + shapeString(header.shape) + " is too large";
    return false;
  }
  header.nbytes = *nbytes;
  header.dataOffset = headerStart + headerLength;
  size_t available = size - header.dataOffset;
  if (available < header.nbytes) {
    error = "truncated data (shape " + shapeString(header.shape) + " of " +
            descr + " needs " + std::to_string(header.nbytes) +
            " bytes, the file has " + std::to_string(available) + ")";
    return false;
  }
  if (available > header.nbytes) {
    error = std::to_string(available - header.nbytes) +
            " unexpected bytes after the data (shape " +
            shapeString(header.shape) + " of " + descr + ")";
    return false;
  }
  return true;
}

bool parseNpy(const uint8_t *data, size_t size, NpyArray &array,
              std::string &error) {
  NpyHeader header;
  if (!parseNpyHeader(data, size, header, error))
    return false;
  if (!array.data.allocate(header.nbytes)) {
    error = "out of memory for " + std::to_string(header.nbytes) + " bytes";
    return false;
  }
  if (header.nbytes)
    std::memcpy(array.data.data(), data + header.dataOffset, header.nbytes);
  array.dtype = header.dtype;
  array.shape = std::move(header.shape);
  return true;
}

bool readNpy(const std::string &path, NpyArray &array, std::string &error) {
  const uint8_t *data;
  size_t size;
  if (!mapFile(path, data, size, error))
    return false;
  std::string message;
  bool ok = parseNpy(data, size, array, message);
  unmapFile(data, size);
  if (!ok)
    error = path + ": " + message;
  return ok;
}

bool writeNpy(const std::string &path, DType dtype,
              const std::vector<int64_t> &shape, const void *data,
              std::string &error) {
  const char *descr = npyDescr(dtype);
  if (!descr) {
    error = path + ": dtype " + dtypeName(dtype) + " cannot be stored in .npy";
    return false;
  }
  std::optional<size_t> nbytes = tensorBytes(shape, dtypeSize(dtype));
  if (!nbytes) {
    error = path + ": invalid shape " + shapeString(shape);
    return false;
  }
  std::string dict = std::string("{'descr': '") + descr +
                     "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i)
    dict += std::to_string(shape[i]) + (shape.size() == 1      ? ","
                                        : i + 1 < shape.size() ? ", "
                                                               : "");
  dict += "), }";
  // Pad with spaces and end with '\n' so that the data starts on a 64-byte
  // boundary, as numpy does.
  bool v2 = dict.size() + 1 + 10 > 65535;
  size_t prefix = v2 ? 12 : 10;
  size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict += '\n';
  uint8_t head[12];
  std::memcpy(head, kMagic, kMagicSize);
  head[6] = v2 ? 2 : 1;
  head[7] = 0;
  for (size_t i = 0; i < prefix - 8; ++i)
    head[8 + i] = static_cast<uint8_t>(dict.size() >> (8 * i));
  return writeFile(
      path, {{head, prefix}, {dict.data(), dict.size()}, {data, *nbytes}},
      error);
}

} // namespace tfc
