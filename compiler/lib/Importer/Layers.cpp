//===- Layers.cpp - Transformer building blocks as TOSA primitives --------===//

#include "Layers.h"

#include "TensorParallel.h"

#include "tfc/ukernels/symbols.h"

#include "mlir/Dialect/Tosa/IR/TosaOps.h"

#include "llvm/ADT/StringSwitch.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace llvm;

namespace tfc::importer {

static RankedTensorType typeOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// `value` as a [1 x ... x 1] constant of x's element type and rank.
static Value scalarLike(TosaBuilder &tb, double value, Value x) {
  RankedTensorType t = typeOf(x);
  return tb.splat(value, t.getElementType(), t.getRank());
}

/// `compute` on x in f32, the result rounded back to x's element type:
/// PyTorch's f16/bf16 kernels compute LayerNorm statistics and activation
/// functions in f32 (their "opmath" type). Plain `compute(x)` for f32.
static Value inF32(TosaBuilder &tb, Value x,
                   llvm::function_ref<Value(Value)> compute) {
  Type t = typeOf(x).getElementType();
  if (t.isF32())
    return compute(x);
  return tb.cast(compute(tb.cast(x, tb.builder().getF32Type())), t);
}

FailureOr<Activation> parseActivation(StringRef name) {
  std::optional<Activation> act =
      llvm::StringSwitch<std::optional<Activation>>(name)
          .Case("gelu", Activation::GeluErf)
          .Case("gelu_new", Activation::GeluTanh)
          .Case("gelu_pytorch_tanh", Activation::GeluTanh)
          .Case("gelu_fast", Activation::GeluTanh)
          .Case("relu", Activation::Relu)
          .Case("silu", Activation::Silu)
          .Case("swish", Activation::Silu)
          .Case("quick_gelu", Activation::QuickGelu)
          .Default(std::nullopt);
  if (!act)
    return failure();
  return *act;
}

FailureOr<Activation> readActivation(const JsonConfig &config, StringRef field,
                                     StringRef fallback, std::string &error) {
  FailureOr<std::string> name = config.string(field, error, fallback.str());
  if (failed(name))
    return failure();
  FailureOr<Activation> act = parseActivation(*name);
  if (failed(act))
    (void)config.fieldError(
        field,
        "unsupported activation \"" + *name +
            "\" (supported: gelu, gelu_new, "
            "gelu_pytorch_tanh, gelu_fast, relu, silu, swish, quick_gelu)",
        error);
  return act;
}

LogicalResult readPositiveInts(const JsonConfig &config,
                               ArrayRef<std::pair<StringRef, int64_t *>> fields,
                               std::string &error) {
  for (auto [field, out] : fields) {
    FailureOr<int64_t> v = config.positiveInt(field, error);
    if (failed(v))
      return failure();
    *out = *v;
  }
  return success();
}

LogicalResult readModelSizes(const JsonConfig &config, ModelSizes &sizes,
                             std::string &error) {
  return readPositiveInts(config,
                          {{"hidden_size", &sizes.hidden},
                           {"num_hidden_layers", &sizes.layers},
                           {"num_attention_heads", &sizes.heads},
                           {"intermediate_size", &sizes.intermediate},
                           {"vocab_size", &sizes.vocab},
                           {"max_position_embeddings", &sizes.positions}},
                          error);
}

/// x [..., in] as [1, rows, in] times `w` [1, in, out], reshaped back to
/// [..., out], plus `bias` [out]. f16/bf16 products accumulate in f32 and
/// are rounded once, as cuBLAS does for PyTorch. The product is reshaped
/// before its rounding and bias, so that those and what follows them in
/// x's shape (an activation, a residual add) are one elementwise chain,
/// which the CPU pipeline fuses into one loop. With `reduce` (a
/// row-parallel projection's part), the f32 products are summed over the
/// ranks before they are rounded: rounded once, as one rank rounds them,
/// and the bias added once.
static Value project(TosaBuilder &tb, Value x, Value w, Value bias, int64_t out,
                     bool reduce = false) {
  RankedTensorType t = typeOf(x);
  int64_t in = t.getShape().back();
  SmallVector<int64_t> shape(t.getShape());
  shape.back() = out;
  Value y =
      tb.reshape(tb.matmul(tb.reshape(x, {1, t.getNumElements() / in, in}), w,
                           tb.builder().getF32Type()),
                 shape);
  if (reduce)
    y = allReduce(tb, y);
  y = tb.cast(y, t.getElementType());
  if (bias) {
    SmallVector<int64_t> biasShape(shape.size(), 1);
    biasShape.back() = out;
    y = tb.add(y, tb.reshape(bias, biasShape));
  }
  return y;
}

/// `w` [out, in] as the [1, in, out] operand of project.
static Value transposed(TosaBuilder &tb, Value w) {
  ArrayRef<int64_t> shape = typeOf(w).getShape();
  return tb.transpose(tb.reshape(w, {1, shape[0], shape[1]}), {0, 2, 1});
}

Value linearWith(TosaBuilder &tb, Value x, Value w, Value bias) {
  return project(tb, x, transposed(tb, w), bias, typeOf(w).getDimSize(0));
}

/// With --quantize-activations, that a row-parallel projection `name`
/// whose rank holds `in` of its `whole` inputs quantizes its input as the
/// 1-rank build does: in blocks of TFC_UK_QUANTIZE_BLOCK values of a row,
/// which a rank must hold whole. Failure with a one-line error naming both
/// flags otherwise. (The weights' scales need no such check: each rank's
/// kernels scale its part of the inputs, docs/tensor-parallel.md.)
static LogicalResult checkQuantizedRows(ModelBuilder &mb, StringRef name,
                                        int64_t in, int64_t whole) {
  if (!mb.quantizesActivations() || in % TFC_UK_QUANTIZE_BLOCK == 0)
    return success();
  return mb.fail("--tensor-parallel=" + Twine(mb.ranks()) +
                 " --quantize-activations=int8: the activations are "
                 "quantized in blocks of " +
                 Twine(TFC_UK_QUANTIZE_BLOCK) +
                 " inputs, which the ranks split in " + mb.getPrefix() + name +
                 ".weight (" + Twine(in) + " of its " + Twine(whole) +
                 " inputs on each rank): each rank needs a multiple of " +
                 Twine(TFC_UK_QUANTIZE_BLOCK));
}

/// The weight `name`.weight of a projection with `in` and `out` features
/// (its whole shape `shape(in, out)`, the axes of in and out `inAxis`,
/// 1 - inAxis) and its bias `name`.bias when `bias`, split as `p` asks:
/// {weight, bias (null without one)}.
static FailureOr<std::pair<Value, Value>>
projectionWeights(ModelBuilder &mb, StringRef name, int64_t in, int64_t out,
                  int64_t inAxis, bool bias, Parallel p) {
  bool split = p.kind != Parallel::None && mb.ranks() > 1;
  bool rows = split && p.kind == Parallel::Rows;
  int64_t whole = rows ? in * mb.ranks() : in;
  if (rows && failed(checkQuantizedRows(mb, name, in, whole)))
    return failure();
  SmallVector<int64_t> shape = {out, out};
  shape[inAxis] = whole;
  WeightSplit ws;
  if (split)
    ws = {rows ? inAxis : 1 - inAxis, p.groups};
  FailureOr<Value> w =
      mb.weight((name + ".weight").str(), shape, /*prefixed=*/true, ws);
  if (failed(w))
    return failure();
  Value b;
  if (bias) {
    WeightSplit bs;
    if (split && !rows)
      bs = {0, p.groups};
    FailureOr<Value> bv =
        mb.weight((name + ".bias").str(), {out}, /*prefixed=*/true, bs);
    if (failed(bv))
      return failure();
    b = *bv;
  }
  return std::make_pair(*w, b);
}

FailureOr<Value> linear(ModelBuilder &mb, TosaBuilder &tb, Value x,
                        StringRef name, int64_t out, bool bias, Parallel p) {
  int64_t in = typeOf(x).getShape().back();
  auto wb = projectionWeights(mb, name, in, out, /*inAxis=*/1, bias, p);
  if (failed(wb))
    return failure();
  bool reduce = p.kind == Parallel::Rows && mb.ranks() > 1;
  return project(tb, x, transposed(tb, wb->first), wb->second,
                 typeOf(wb->first).getDimSize(0), reduce);
}

FailureOr<Value> conv1d(ModelBuilder &mb, TosaBuilder &tb, Value x,
                        StringRef name, int64_t out, Parallel p) {
  int64_t in = typeOf(x).getShape().back();
  auto wb = projectionWeights(mb, name, in, out, /*inAxis=*/0, true, p);
  if (failed(wb))
    return failure();
  ArrayRef<int64_t> shape = typeOf(wb->first).getShape(); // [in, out]
  Value w = tb.reshape(wb->first, {1, shape[0], shape[1]});
  bool reduce = p.kind == Parallel::Rows && mb.ranks() > 1;
  return project(tb, x, w, wb->second, shape[1], reduce);
}

/// The parameter `name`.`part` of a norm over the last axis of x [..., N]:
/// [N].
static FailureOr<Value> normWeight(ModelBuilder &mb, Value x, StringRef name,
                                   StringRef part = "weight") {
  return mb.weight((name + "." + part).str(), {typeOf(x).getShape().back()});
}

FailureOr<Value> layerNorm(ModelBuilder &mb, TosaBuilder &tb, Value x,
                           StringRef name, double eps) {
  RankedTensorType t = typeOf(x);
  int64_t rank = t.getRank(), n = t.getShape().back();
  FailureOr<Value> gamma = normWeight(mb, x, name);
  if (failed(gamma))
    return failure();
  FailureOr<Value> beta = normWeight(mb, x, name, "bias");
  if (failed(beta))
    return failure();
  int32_t axis = rank - 1;
  Type f32 = tb.builder().getF32Type();
  return inF32(tb, x, [&](Value x) {
    Value invN = scalarLike(tb, 1.0 / static_cast<double>(n), x);
    Value mean = tb.mul(tb.reduceSum(x, axis), invN);
    Value centred = tb.sub(x, mean);
    Value var = tb.mul(tb.reduceSum(tb.mul(centred, centred), axis), invN);
    Value inv = tb.rsqrt(tb.add(var, scalarLike(tb, eps, x)));
    Value y = tb.mul(centred, inv);
    y = tb.mul(y, tb.expandToRank(tb.cast(*gamma, f32), rank));
    return tb.add(y, tb.expandToRank(tb.cast(*beta, f32), rank));
  });
}

/// x * rsqrt(mean(x * x) + eps) over the last axis, in f32 (x cast in).
static Value rmsNormalised(TosaBuilder &tb, Value x, double eps) {
  Value x32 = tb.cast(x, tb.builder().getF32Type());
  int64_t rank = typeOf(x).getRank(), n = typeOf(x).getShape().back();
  Value invN = scalarLike(tb, 1.0 / static_cast<double>(n), x32);
  Value var = tb.mul(tb.reduceSum(tb.mul(x32, x32), rank - 1), invN);
  return tb.mul(x32, tb.rsqrt(tb.add(var, scalarLike(tb, eps, x32))));
}

/// LlamaRMSNorm, or with `gemma` GemmaRMSNorm (rmsNorm, gemmaRmsNorm).
static FailureOr<Value> rmsNormOf(ModelBuilder &mb, TosaBuilder &tb, Value x,
                                  StringRef name, double eps, bool gemma) {
  FailureOr<Value> gamma = normWeight(mb, x, name);
  if (failed(gamma))
    return failure();
  RankedTensorType t = typeOf(x);
  Value y = rmsNormalised(tb, x, eps);
  if (!gemma) {
    Value g = tb.expandToRank(*gamma, t.getRank());
    return tb.mul(g, tb.cast(y, t.getElementType()));
  }
  Value g32 = tb.cast(*gamma, tb.builder().getF32Type());
  Value g = tb.expandToRank(tb.add(g32, scalarLike(tb, 1.0, g32)), t.getRank());
  return tb.cast(tb.mul(y, g), t.getElementType());
}

FailureOr<Value> rmsNorm(ModelBuilder &mb, TosaBuilder &tb, Value x,
                         StringRef name, double eps) {
  return rmsNormOf(mb, tb, x, name, eps, /*gemma=*/false);
}

FailureOr<Value> gemmaRmsNorm(ModelBuilder &mb, TosaBuilder &tb, Value x,
                              StringRef name, double eps) {
  return rmsNormOf(mb, tb, x, name, eps, /*gemma=*/true);
}

/// rope_scaling: absent/null or rope_type "default" (none), "linear"
/// (positions divided by factor, i.e. every frequency), "llama3" (Llama
/// 3.1's per-band rescaling, as transformers'
/// _compute_llama3_parameters), "longrope" (Phi-3's, see
/// readRotaryFrequencies). Applied to `f` in place; `exponents` are the
/// 2i / D of its frequencies and `theta` their base.
static LogicalResult applyRopeScaling(const JsonConfig &c, double theta,
                                      ArrayRef<float> exponents,
                                      const RotaryPositions &positions,
                                      RotaryFrequencies &f,
                                      std::string &error) {
  MutableArrayRef<float> invFreq = f.invFreq;
  const json::Value *v = c.object().get("rope_scaling");
  if (!v || v->kind() == json::Value::Null)
    return success();
  const json::Object *o = v->getAsObject();
  if (!o)
    return c.fieldError("rope_scaling", "expected an object or null", error);
  std::optional<StringRef> type = o->getString("rope_type");
  if (!type)
    type = o->getString("type");
  if (!type)
    return c.fieldError("rope_scaling", "missing string \"rope_type\"", error);
  auto number = [&](StringRef key) -> FailureOr<double> {
    std::optional<double> n = o->getNumber(key);
    if (!n || !(*n > 0)) {
      (void)c.fieldError("rope_scaling",
                         "\"" + key + "\" must be a positive number", error);
      return failure();
    }
    return *n;
  };
  if (*type == "default")
    return success();
  if (*type == "linear") {
    FailureOr<double> factor = number("factor");
    if (failed(factor))
      return failure();
    for (float &f : invFreq)
      f = static_cast<float>(f / *factor);
    return success();
  }
  if (*type == "longrope") {
    // transformers' _compute_longrope_parameters with the dynamic update of
    // its rotary embedding: short_factor while the positions stay within
    // original_max_position_embeddings, long_factor past it, and cos and sin
    // scaled by attention_factor (default sqrt(1 + ln(factor) /
    // ln(original)), factor = max_position_embeddings / original).
    auto factors = [&](StringRef key) -> FailureOr<SmallVector<double>> {
      const json::Array *a = o->getArray(key);
      SmallVector<double> out;
      if (a)
        for (const json::Value &x : *a)
          if (std::optional<double> n = x.getAsNumber(); n && *n > 0)
            out.push_back(*n);
      if (!a || out.size() != a->size() || out.size() != invFreq.size()) {
        (void)c.fieldError("rope_scaling",
                           "\"" + key + "\" must be " + Twine(invFreq.size()) +
                               " positive numbers (half the rotary dimension)",
                           error);
        return failure();
      }
      return out;
    };
    FailureOr<SmallVector<double>> shortFactor = factors("short_factor");
    if (failed(shortFactor))
      return failure();
    FailureOr<SmallVector<double>> longFactor = factors("long_factor");
    if (failed(longFactor))
      return failure();
    FailureOr<double> maxPositions = c.number("max_position_embeddings", error);
    if (failed(maxPositions))
      return failure();
    double original = *maxPositions, factor = 1;
    if (c.has("original_max_position_embeddings")) {
      FailureOr<double> o = c.number("original_max_position_embeddings", error);
      if (failed(o))
        return failure();
      if (!(*o > 1))
        return c.fieldError("original_max_position_embeddings",
                            "expected a number above 1", error);
      original = *o;
      factor = *maxPositions / original;
    } else if (std::optional<double> given = o->getNumber("factor")) {
      factor = *given;
    }
    f.scaling = static_cast<float>(
        factor <= 1 ? 1.0
                    : std::sqrt(1 + std::log(factor) / std::log(original)));
    if (std::optional<double> given = o->getNumber("attention_factor"))
      f.scaling = static_cast<float>(*given);
    bool useLong = static_cast<double>(positions.count) > original;
    if (useLong && positions.given)
      return c.fieldError(
          "rope_scaling",
          "longrope uses long_factor past original_max_position_embeddings "
          "(" +
              Twine(static_cast<int64_t>(original)) +
              ") only when a position there occurs, which --position-ids "
              "leaves to run time: compile for at most that many positions",
          error);
    ArrayRef<double> ext = useLong ? *longFactor : *shortFactor;
    for (auto [i, x] : llvm::enumerate(invFreq)) {
      float base = static_cast<float>(std::pow(theta, double(exponents[i])));
      x = 1.0f / (static_cast<float>(ext[i]) * base);
    }
    return success();
  }
  if (*type == "llama3") {
    FailureOr<double> factor = number("factor"),
                      low = number("low_freq_factor"),
                      high = number("high_freq_factor"),
                      original = number("original_max_position_embeddings");
    if (failed(factor) || failed(low) || failed(high) || failed(original))
      return failure();
    if (!(*high > *low))
      return c.fieldError(
          "rope_scaling",
          "\"high_freq_factor\" must exceed \"low_freq_factor\"", error);
    double lowWavelen = *original / *low, highWavelen = *original / *high;
    for (float &f : invFreq) {
      double wavelen = 2 * M_PI / f;
      if (wavelen < highWavelen)
        continue; // high frequencies keep theirs
      if (wavelen > lowWavelen) {
        f = static_cast<float>(f / *factor);
        continue;
      }
      double smooth = (*original / wavelen - *low) / (*high - *low);
      f = static_cast<float>((1 - smooth) * f / *factor + smooth * f);
    }
    return success();
  }
  return c.fieldError("rope_scaling",
                      "unsupported rope_type \"" + *type +
                          "\" (supported: default, linear, llama3, longrope)",
                      error);
}

FailureOr<RotaryFrequencies>
readRotaryFrequencies(const JsonConfig &c, int64_t dim, StringRef thetaField,
                      double thetaDefault, bool scaled,
                      const RotaryPositions &positions, std::string &error) {
  FailureOr<double> theta = c.number(thetaField, error, thetaDefault);
  if (failed(theta))
    return failure();
  if (*theta <= 1) {
    (void)c.fieldError(thetaField, "expected a number above 1", error);
    return failure();
  }
  // inv_freq = 1 / theta^(2i / D), in f32 as transformers computes it.
  RotaryFrequencies f;
  SmallVector<float> exponents;
  for (int64_t i = 0; i < dim / 2; ++i) {
    exponents.push_back(static_cast<float>(2 * i) / static_cast<float>(dim));
    f.invFreq.push_back(
        1.0f / static_cast<float>(std::pow(*theta, double(exponents.back()))));
  }
  if (scaled &&
      failed(applyRopeScaling(c, *theta, exponents, positions, f, error)))
    return failure();
  return f;
}

RotaryTables rotaryTables(TosaBuilder &tb, const RotaryFrequencies &f,
                          int64_t first, int64_t seqLen, Type type) {
  ArrayRef<float> invFreq = f.invFreq;
  int64_t half = invFreq.size(), d = 2 * half;
  const fltSemantics &sem = cast<FloatType>(type).getFloatSemantics();
  SmallVector<APFloat> cosValues, sinValues;
  cosValues.reserve(seqLen * d);
  sinValues.reserve(seqLen * d);
  for (int64_t p = 0; p < seqLen; ++p) {
    for (int64_t j = 0; j < d; ++j) {
      float angle = static_cast<float>(first + p) * invFreq[j % half];
      // cos/sin of the f32 angle, rounded to f32, times the scaling in f32,
      // then rounded to the type.
      for (auto [values, v] :
           {std::pair{&cosValues, std::cos(static_cast<double>(angle))},
            std::pair{&sinValues, std::sin(static_cast<double>(angle))}}) {
        APFloat value(static_cast<float>(v) * f.scaling);
        bool lost;
        value.convert(sem, APFloat::rmNearestTiesToEven, &lost);
        values->push_back(value);
      }
    }
  }
  auto tableType = RankedTensorType::get({1, 1, seqLen, d}, type);
  OpBuilder &b = tb.builder();
  auto table = [&](ArrayRef<APFloat> values) -> Value {
    return tosa::ConstOp::create(b, tb.getLoc(), tableType,
                                 DenseElementsAttr::get(tableType, values));
  };
  return {table(cosValues), table(sinValues)};
}

RotaryTables gatherRotary(TosaBuilder &tb, const RotaryTables &tables,
                          Value positions) {
  ArrayRef<int64_t> t = typeOf(tables.cos).getShape(); // [1, 1, N, D]
  ArrayRef<int64_t> p = typeOf(positions).getShape();  // [B, S]
  auto rows = [&](Value table) {
    Value g = embeddingLookup(tb, tb.reshape(table, {t[2], t[3]}), positions);
    return tb.reshape(g, {p[0], 1, p[1], t[3]});
  };
  Value cos = rows(tables.cos);
  return {cos, rows(tables.sin)};
}

Value applyRotary(TosaBuilder &tb, Value x, const RotaryTables &tables) {
  ArrayRef<int64_t> s = typeOf(x).getShape();
  int64_t half = s[3] / 2;
  Value x1 = tb.slice(x, {0, 0, 0, 0}, {s[0], s[1], s[2], half});
  Value x2 = tb.slice(x, {0, 0, 0, half}, {s[0], s[1], s[2], half});
  Value rotated = tb.concat({tb.mul(x2, scalarLike(tb, -1.0, x2)), x1}, 3);
  Value xCos = tb.mul(x, tables.cos);
  return tb.add(xCos, tb.mul(rotated, tables.sin));
}

Value repeatKV(TosaBuilder &tb, Value x, int64_t groups) {
  if (groups == 1)
    return x;
  ArrayRef<int64_t> s = typeOf(x).getShape();
  Value split = tb.reshape(x, {s[0], s[1], 1, s[2], s[3]});
  Value tiled = tb.tile(split, {1, 1, groups, 1, 1});
  return tb.reshape(tiled, {s[0], s[1] * groups, s[2], s[3]});
}

static Value activationF32(TosaBuilder &tb, Value x, Activation act) {
  auto c = [&](double value) { return scalarLike(tb, value, x); };
  switch (act) {
  case Activation::GeluErf: {
    // 0.5 * x * (1 + erf(x / sqrt(2)))
    Value e = tb.erf(tb.mul(x, c(1.0 / std::sqrt(2.0))));
    Value half = tb.mul(c(0.5), x);
    return tb.mul(half, tb.add(c(1.0), e));
  }
  case Activation::GeluTanh: {
    // 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
    Value x3 = tb.mul(tb.mul(x, x), x);
    Value inner = tb.add(x, tb.mul(c(0.044715), x3));
    Value th = tb.tanh(tb.mul(c(std::sqrt(2.0 / M_PI)), inner));
    Value half = tb.mul(c(0.5), x);
    return tb.mul(half, tb.add(c(1.0), th));
  }
  case Activation::Relu:
    return tb.maximum(x, c(0.0));
  case Activation::Silu:
    return tb.mul(x, tb.sigmoid(x));
  case Activation::QuickGelu:
    // x * sigmoid(1.702 * x)
    return tb.mul(x, tb.sigmoid(tb.mul(c(1.702), x)));
  }
  llvm_unreachable("unknown activation");
}

Value activation(TosaBuilder &tb, Value x, Activation act) {
  return inF32(tb, x, [&](Value x) { return activationF32(tb, x, act); });
}

Value embeddingLookup(TosaBuilder &tb, Value table, Value ids) {
  RankedTensorType tt = typeOf(table), it = typeOf(ids);
  int64_t vocab = tt.getDimSize(0), hidden = tt.getDimSize(1);
  int64_t b = it.getDimSize(0), s = it.getDimSize(1);
  Value idx = tb.reshape(tb.cast(ids, tb.builder().getI32Type()), {1, b * s});
  Value rows = tb.gather(tb.reshape(table, {1, vocab, hidden}), idx);
  return tb.reshape(rows, {b, s, hidden});
}

Value tableRows(TosaBuilder &tb, Value table, int64_t first, int64_t count) {
  int64_t hidden = typeOf(table).getDimSize(1);
  return tb.reshape(tb.slice(table, {first, 0}, {count, hidden}),
                    {1, count, hidden});
}

Value splitHeads(TosaBuilder &tb, Value x, int64_t heads) {
  ArrayRef<int64_t> s = typeOf(x).getShape();
  Value v = tb.reshape(x, {s[0], s[1], heads, s[2] / heads});
  return tb.transpose(v, {0, 2, 1, 3});
}

Value mergeHeads(TosaBuilder &tb, Value x) {
  ArrayRef<int64_t> s = typeOf(x).getShape(); // [B, H, S, dh]
  Value v = tb.transpose(x, {0, 2, 1, 3});
  return tb.reshape(v, {s[0], s[2], s[1] * s[3]});
}

/// finfo(type).min, what transformers' masks hide keys with: -65504 in f16.
static double lowestOf(Type type) {
  return APFloat::getLargest(cast<FloatType>(type).getFloatSemantics(),
                             /*Negative=*/true)
      .convertToDouble();
}

Value extendedAttentionMask(TosaBuilder &tb, Value mask, Type type) {
  ArrayRef<int64_t> s = typeOf(mask).getShape();
  Value m = tb.reshape(tb.cast(mask, type), {s[0], 1, 1, s[1]});
  Value inverted = tb.sub(scalarLike(tb, 1.0, m), m);
  return tb.mul(inverted, scalarLike(tb, lowestOf(type), m));
}

Value extendedAttentionMask(ModelBuilder &mb, StringRef scope, Value mask) {
  TosaBuilder tb = mb.at(scope);
  return extendedAttentionMask(tb, mask, mb.getComputeType());
}

Value slidingWindowMask(TosaBuilder &tb, Value mask, int64_t pastLen,
                        int64_t seqLen, int64_t window, Value positions) {
  OpBuilder &ob = tb.builder();
  int64_t keys = pastLen + seqLen;
  auto vector = [&](ArrayRef<int64_t> shape, ArrayRef<float> values) {
    auto type = RankedTensorType::get(shape, ob.getF32Type());
    return tosa::ConstOp::create(ob, tb.getLoc(), type,
                                 DenseElementsAttr::get(type, values))
        .getResult();
  };
  // A key at position k is hidden from a query at p when p - window >= k.
  Value limit, keyPosition;
  if (!positions) {
    SmallVector<float> limits, slots;
    for (int64_t i = 0; i < seqLen; ++i)
      limits.push_back(static_cast<float>(pastLen + i - window));
    for (int64_t j = 0; j < keys; ++j)
      slots.push_back(static_cast<float>(j));
    limit = vector({1, 1, seqLen, 1}, limits);
    keyPosition = vector({1, 1, 1, keys}, slots);
  } else {
    int64_t batch = typeOf(positions).getDimSize(0);
    Value p = tb.cast(positions, ob.getF32Type()); // exact below 2^24
    limit = tb.reshape(tb.sub(p, vector({1, 1}, {float(window)})),
                       {batch, 1, seqLen, 1});
    Value k = p;
    if (pastLen > 0) {
      SmallVector<float> slots;
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t j = 0; j < pastLen; ++j)
          slots.push_back(static_cast<float>(j));
      k = tb.concat({vector({batch, pastLen}, slots), p}, 1);
    }
    keyPosition = tb.reshape(k, {batch, 1, 1, keys});
  }
  Value hidden = tb.greaterEqual(limit, keyPosition);
  Type type = typeOf(mask).getElementType();
  Value band = tb.select(
      hidden, tb.splat(-std::numeric_limits<double>::infinity(), type, 4),
      tb.splat(0.0, type, 4));
  return tb.add(mask, band);
}

Value softcapped(TosaBuilder &tb, Value x, double cap) {
  return tb.mul(tb.tanh(tb.mul(x, scalarLike(tb, 1.0 / cap, x))),
                scalarLike(tb, cap, x));
}

Value scaledDotProductAttention(TosaBuilder &tb, Value q, Value k, Value v,
                                Value mask, double scale, bool causal,
                                double softcap, Value *probsOut) {
  ArrayRef<int64_t> qs = typeOf(q).getShape(), ks = typeOf(k).getShape(),
                    vs = typeOf(v).getShape();
  int64_t b = qs[0], h = qs[1], sq = qs[2], d = qs[3], skv = ks[2], dv = vs[3];
  // scores = Q @ K^T, batched over B*H.
  Value kt = tb.transpose(k, {0, 1, 3, 2});
  Value q3 = tb.reshape(q, {b * h, sq, d});
  Value kt3 = tb.reshape(kt, {b * h, d, skv});
  Value scores = tb.matmul(q3, kt3);
  scores = tb.reshape(scores, {b, h, sq, skv});
  scores = tb.mul(scores, scalarLike(tb, scale, scores));
  if (softcap > 0)
    scores = softcapped(tb, scores, softcap);
  if (causal) {
    // Key j is visible to query i iff j <= i + skv - sq.
    OpBuilder &ob = tb.builder();
    auto type = RankedTensorType::get({1, 1, sq, skv}, ob.getI1Type());
    SmallVector<bool> visible;
    visible.reserve(sq * skv);
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t j = 0; j < skv; ++j)
        visible.push_back(j <= i + skv - sq);
    Value tril = tosa::ConstOp::create(ob, tb.getLoc(), type,
                                       DenseElementsAttr::get(type, visible));
    scores = tb.select(
        tril, scores,
        scalarLike(tb, -std::numeric_limits<double>::infinity(), scores));
  }
  if (mask)
    scores = tb.add(scores, mask);
  // softmax over the last axis.
  Value shifted = tb.sub(scores, tb.reduceMax(scores, 3));
  Value e = tb.exp(shifted);
  Value probs = tb.mul(e, tb.reciprocal(tb.reduceSum(e, 3)));
  if (probsOut)
    *probsOut = probs;
  Value p3 = tb.reshape(probs, {b * h, sq, skv});
  Value v3 = tb.reshape(v, {b * h, skv, dv});
  Value ctx = tb.matmul(p3, v3);
  return tb.reshape(ctx, {b, h, sq, dv});
}

Value meanPool(TosaBuilder &tb, Value hidden, Value mask) {
  ArrayRef<int64_t> s = typeOf(hidden).getShape(); // [B, S, H]
  Value m = tb.reshape(tb.cast(mask, typeOf(hidden).getElementType()),
                       {s[0], s[1], 1});
  Value sum = tb.reduceSum(tb.mul(hidden, m), 1); // [B, 1, H]
  Value count = tb.reduceSum(m, 1);               // [B, 1, 1]
  count = tb.maximum(count, scalarLike(tb, 1e-9, count));
  Value pooled = tb.mul(sum, tb.reciprocal(count));
  return tb.reshape(pooled, {s[0], s[2]});
}

Value clsPool(TosaBuilder &tb, Value hidden) {
  ArrayRef<int64_t> s = typeOf(hidden).getShape();
  return tb.reshape(tb.slice(hidden, {0, 0, 0}, {s[0], 1, s[2]}), {s[0], s[2]});
}

Value l2Normalize(TosaBuilder &tb, Value x) {
  Value sq = tb.reduceSum(tb.mul(x, x), 1);
  Value inv = tb.rsqrt(tb.maximum(sq, scalarLike(tb, 1e-24, sq)));
  return tb.mul(x, inv);
}

} // namespace tfc::importer
