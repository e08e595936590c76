//===- Manifest.cpp - The signature of a compiled model -------------------===//

#include "tfc/Target/Manifest.h"
#include "tfc/runtime/abi.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;

namespace tfc {

static FailureOr<int32_t> dtypeOf(Type t) {
  if (t.isF32())
    return int32_t(TFC_DTYPE_F32);
  if (t.isF16())
    return int32_t(TFC_DTYPE_F16);
  if (t.isBF16())
    return int32_t(TFC_DTYPE_BF16);
  if (t.isInteger(64))
    return int32_t(TFC_DTYPE_I64);
  if (t.isInteger(32))
    return int32_t(TFC_DTYPE_I32);
  if (t.isInteger(1))
    return int32_t(TFC_DTYPE_BOOL);
  return failure();
}

static FailureOr<TensorSpec> specOf(func::FuncOp fn, Type type,
                                    DictionaryAttr attrs, StringRef what,
                                    unsigned index, bool isResult) {
  auto fail = [&]() {
    return fn.emitError() << what << " " << index << " of @" << fn.getSymName()
                          << " ";
  };
  auto tt = dyn_cast<RankedTensorType>(type);
  if (!tt) {
    fail() << "has type " << type << "; tfc compiles ranked tensors";
    return failure();
  }
  if (!tt.hasStaticShape()) {
    fail() << "has dynamic shape " << type
           << "; tfc compiles static shapes (choose them at compile time)";
    return failure();
  }
  FailureOr<int32_t> dtype = dtypeOf(tt.getElementType());
  if (failed(dtype)) {
    fail() << "has element type " << tt.getElementType()
           << "; supported: f32, f16, bf16, i64, i32, i1";
    return failure();
  }
  TensorSpec spec;
  spec.dtype = *dtype;
  spec.shape.assign(tt.getShape().begin(), tt.getShape().end());
  spec.role = isResult ? TFC_ROLE_OUTPUT : TFC_ROLE_INPUT;
  spec.name = (Twine(isResult ? "output" : "input") + Twine(index)).str();
  if (attrs) {
    if (auto name = attrs.getAs<StringAttr>("tfc.name"))
      spec.name = name.str();
    if (auto role = attrs.getAs<StringAttr>("tfc.role")) {
      if (role.getValue() == "weight" && !isResult)
        spec.role = TFC_ROLE_WEIGHT;
      else if (role.getValue() != "input" || isResult) {
        fail() << "has tfc.role \"" << role.getValue()
               << "\"; expected \"input\" or \"weight\"";
        return failure();
      }
    }
  }
  return spec;
}

/// The range [0, rows) that every element of the integer argument `arg` must
/// lie in because it reaches a tosa.gather as an index into a table of
/// `rows` rows, through ops that keep every element's value (reshape,
/// transpose, casts to i32 or i64: a value in range survives them).
/// std::nullopt when no gather indexes with it.
static std::optional<std::pair<int64_t, int64_t>>
gatherBounds(BlockArgument arg) {
  if (!isa<IntegerType>(getElementTypeOrSelf(arg.getType())))
    return std::nullopt;
  std::optional<int64_t> rows;
  SmallVector<Value> worklist{arg};
  llvm::SmallPtrSet<Operation *, 8> seen;
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (!seen.insert(user).second)
        continue;
      if (auto gather = dyn_cast<tosa::GatherOp>(user)) {
        int64_t n = gather.getValues().getType().getDimSize(1);
        if (use.get() == gather.getIndices() && !ShapedType::isDynamic(n))
          rows = std::min(rows.value_or(n), n);
        continue;
      }
      // A cast to i32 or i64 keeps every index a table can have; a
      // narrower one wraps them, and the bounds of its result are not
      // those of its operand.
      bool keepsValues = isa<tosa::ReshapeOp, tosa::TransposeOp>(user);
      if (auto cast = dyn_cast<tosa::CastOp>(user)) {
        auto to = dyn_cast<IntegerType>(getElementTypeOrSelf(cast.getType()));
        keepsValues = to && to.getWidth() >= 32;
      }
      if (keepsValues && use.getOperandNumber() == 0)
        worklist.push_back(user->getResult(0));
    }
  }
  if (!rows)
    return std::nullopt;
  return std::make_pair(int64_t(0), *rows);
}

/// The weights' `tfc.weight_location`s and the module's
/// `tfc.folded_initializers` as m.weightFile.
static LogicalResult extractWeightFile(ModuleOp module, func::FuncOp fn,
                                       Manifest &m) {
  WeightFile file;
  unsigned located = 0, weights = 0;
  auto integer = [](DictionaryAttr d, StringRef key) -> std::optional<int64_t> {
    auto a = d ? d.getAs<IntegerAttr>(key) : nullptr;
    return a ? std::optional<int64_t>(a.getInt()) : std::nullopt;
  };
  auto string = [](DictionaryAttr d,
                   StringRef key) -> std::optional<std::string> {
    auto a = d ? d.getAs<StringAttr>(key) : nullptr;
    return a ? std::optional<std::string>(a.getValue().str()) : std::nullopt;
  };
  for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
    if (m.args[i].role != TFC_ROLE_WEIGHT)
      continue;
    ++weights;
    auto where = fn.getArgAttrOfType<DictionaryAttr>(i, "tfc.weight_location");
    if (!where)
      continue;
    ++located;
    auto f = string(where, "file"), c = string(where, "check");
    auto offset = integer(where, "offset"), nbytes = integer(where, "nbytes");
    // The file's element type, where it is not the weight's.
    FailureOr<int32_t> dtype = m.args[i].dtype;
    if (auto t = where.getAs<TypeAttr>("dtype"))
      dtype = dtypeOf(t.getValue());
    if (!f || !c || !offset || !nbytes || *offset < 0 || *nbytes < 0 ||
        failed(dtype)) {
      fn.emitError() << "argument " << i
                     << ": tfc.weight_location must be {file, offset, "
                        "nbytes, check[, dtype]}";
      return failure();
    }
    file.weights.push_back({*f, *offset, *nbytes, *c, *dtype});
  }
  auto folded = module->getAttrOfType<ArrayAttr>("tfc.folded_initializers");
  if (located == 0 && !folded)
    return success();
  if (located != weights) {
    fn.emitError() << located << " of " << weights
                   << " weights carry tfc.weight_location; all or none must";
    return failure();
  }
  if (folded) {
    for (Attribute a : folded) {
      auto d = dyn_cast<DictionaryAttr>(a);
      auto name = string(d, "name"), f = string(d, "file");
      auto offset = integer(d, "offset"), nbytes = integer(d, "nbytes"),
           hash = integer(d, "hash");
      if (!name || !f || !offset || !nbytes || !hash) {
        module.emitError() << "tfc.folded_initializers entries must be "
                              "{name, file, offset, nbytes, hash}";
        return failure();
      }
      file.folded.push_back({*name, *f, *offset, *nbytes, uint64_t(*hash)});
    }
  }
  m.weightFile = std::move(file);
  return success();
}

/// The module's `tfc.tensor_parallel` and its arguments' and results'
/// `tfc.split`s, checked: each split axis of a tensor of the rank's part;
/// a weight's may name the whole length a padded part is cut from
/// ([axis, 1, whole]: each part ceil(whole / ranks) long).
static LogicalResult extractTensorParallel(ModuleOp module, func::FuncOp fn,
                                           Manifest &m) {
  if (auto ranks = module->getAttrOfType<IntegerAttr>("tfc.tensor_parallel")) {
    if (ranks.getInt() < 1 || ranks.getInt() > 4096)
      return module.emitError()
             << "tfc.tensor_parallel must be a rank count from 1 to 4096";
    m.tensorParallel = int32_t(ranks.getInt());
  }
  auto read = [&](DictionaryAttr attrs, TensorSpec &spec, StringRef what,
                  unsigned i) -> LogicalResult {
    auto split = attrs ? attrs.getAs<DenseI64ArrayAttr>("tfc.split") : nullptr;
    if (!split)
      return success();
    int64_t ranks = m.tensorParallel;
    bool axisOk = split.size() >= 2 && split[0] >= 0 &&
                  split[0] < int64_t(spec.shape.size());
    int64_t part = axisOk ? spec.shape[split[0]] : 0;
    if (ranks == 1 || (split.size() != 2 && split.size() != 3) || !axisOk ||
        split[1] < 1 || part % split[1] != 0)
      return fn.emitError()
             << what << " " << i
             << ": tfc.split must be [axis, groups] of one of its axes, "
                "whose size the groups divide, in a module with "
                "tfc.tensor_parallel";
    int64_t whole = split.size() == 3 ? split[2] : part * ranks;
    if (whole < 1 || (whole + ranks - 1) / ranks != part ||
        (whole != part * ranks &&
         (split[1] != 1 || spec.role != TFC_ROLE_WEIGHT)))
      return fn.emitError()
             << what << " " << i << ": tfc.split's whole length " << whole
             << " is not cut into " << ranks << " parts of " << part
             << " (a padded part: a weight's, of one group)";
    spec.splitAxis = int32_t(split[0]);
    spec.splitGroups = int32_t(split[1]);
    spec.splitWhole = whole;
    return success();
  };
  for (auto [i, spec] : llvm::enumerate(m.args))
    if (failed(read(fn.getArgAttrDict(i), spec, "argument", i)))
      return failure();
  for (auto [i, spec] : llvm::enumerate(m.results))
    if (failed(read(fn.getResultAttrDict(i), spec, "result", i)))
      return failure();
  return success();
}

FailureOr<Manifest> extractManifest(ModuleOp module, StringRef entry) {
  func::FuncOp fn;
  if (!entry.empty()) {
    fn = module.lookupSymbol<func::FuncOp>(entry);
    if (!fn || fn.isExternal()) {
      module.emitError() << "no function @" << entry << " to compile";
      return failure();
    }
  } else {
    for (auto f : module.getOps<func::FuncOp>()) {
      if (f.isPrivate() || f.isExternal())
        continue;
      if (fn) {
        module.emitError() << "several public functions (@" << fn.getSymName()
                           << ", @" << f.getSymName()
                           << "); choose one with --entry";
        return failure();
      }
      fn = f;
    }
    if (!fn) {
      module.emitError() << "no public function to compile";
      return failure();
    }
  }
  Manifest m;
  m.entry = fn.getSymName().str();
  m.target = "cpu";
  FunctionType type = fn.getFunctionType();
  for (unsigned i = 0; i < type.getNumInputs(); ++i) {
    FailureOr<TensorSpec> s =
        specOf(fn, type.getInput(i), fn.getArgAttrDict(i), "argument", i,
               /*isResult=*/false);
    if (failed(s))
      return failure();
    if (s->role == TFC_ROLE_INPUT) {
      s->bounds = gatherBounds(fn.getArgument(i));
      // Bounds an importer states (`tfc.bounds = array<i64: lo, hi>`):
      // with those the gathers imply, the narrower of both.
      if (auto stated =
              fn.getArgAttrOfType<DenseI64ArrayAttr>(i, "tfc.bounds")) {
        auto integer = dyn_cast<IntegerType>(
            cast<ShapedType>(type.getInput(i)).getElementType());
        if (stated.size() != 2 || stated[0] >= stated[1] || !integer ||
            integer.getWidth() < 32) {
          fn.emitError() << "argument " << i
                         << ": tfc.bounds must be [lo, hi] with lo < hi, on "
                            "an i32 or i64 tensor";
          return failure();
        }
        int64_t lo = stated[0], hi = stated[1];
        if (s->bounds) {
          lo = std::max(lo, s->bounds->first);
          hi = std::min(hi, s->bounds->second);
        }
        s->bounds = std::make_pair(lo, std::max(hi, lo + 1));
      }
    }
    m.args.push_back(*s);
  }
  for (unsigned i = 0; i < type.getNumResults(); ++i) {
    FailureOr<TensorSpec> s =
        specOf(fn, type.getResult(i), fn.getResultAttrDict(i), "result", i,
               /*isResult=*/true);
    if (failed(s))
      return failure();
    m.results.push_back(*s);
  }
  if (m.results.empty()) {
    fn.emitError() << "@" << fn.getSymName()
                   << " returns nothing; a model returns at least one tensor";
    return failure();
  }
  if (failed(extractWeightFile(module, fn, m)))
    return failure();
  if (failed(extractTensorParallel(module, fn, m)))
    return failure();
  return m;
}

} // namespace tfc
