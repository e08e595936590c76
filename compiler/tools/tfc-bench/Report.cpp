//===- Report.cpp - tfc-bench's table and JSON file -----------------------===//

#include "Bench.h"

namespace tfc::bench {

namespace {

/// Attention's variant for the title: " (causal, window 5, softcap 50)", or
/// nothing.
std::string variantText(const Options &o) {
  std::vector<std::string> parts;
  if (o.causal)
    parts.push_back("causal");
  if (o.window > 0)
    parts.push_back("window " + std::to_string(o.window));
  if (o.softcap > 0) {
    char cap[64];
    std::snprintf(cap, sizeof cap, "softcap %g", o.softcap);
    parts.push_back(cap);
  }
  std::string variant;
  for (size_t i = 0; i < parts.size(); ++i)
    variant += (i ? ", " : " (") + parts[i];
  if (!parts.empty())
    variant += ")";
  return variant;
}

} // namespace

void printTable(const Options &o, const std::vector<Row> &rows,
                bool haveSgemm) {
  bool matmul = o.matmul(), att = o.computeBound();
  std::string variant = att ? variantText(o) : "";
  if (o.gpu())
    std::printf("tfc-bench: %s%s, nvptx %s, median of %d interleaved runs "
                "(kernels, CUDA events)\n",
                o.kernel.c_str(), variant.c_str(), o.dtype.c_str(), o.repeat);
  else
    std::printf("tfc-bench: %s%s, %s%d thread%s, median of %d interleaved "
                "runs\n",
                o.kernel.c_str(), variant.c_str(),
                o.dtype == "f32" ? "" : (o.dtype + ", ").c_str(), o.threads,
                o.threads == 1 ? "" : "s", o.repeat);
  if (matmul)
    std::printf("| shape MxKxN | tfc ms | tfc GFLOP/s | sgemm ms | sgemm "
                "GFLOP/s | of sgemm | MiB |\n|---|---|---|---|---|---|---|\n");
  else if (att)
    std::printf("| shape BxHxSxD, BxHxSqxSkvxD or BxHqxHkvxSqxSkvxD | fused ms "
                "| unfused ms | "
                "speedup | fused "
                "GFLOP/s | sgemm GFLOP/s | of sgemm | fused MiB | unfused "
                "MiB |\n|---|---|---|---|---|---|---|---|---|\n");
  else
    std::printf("| shape RxN | fused ms | unfused ms | speedup | fused GB/s "
                "| copy GB/s | time / copy | fused MiB | unfused MiB |\n"
                "|---|---|---|---|---|---|---|---|---|\n");
  for (const Row &r : rows) {
    if (matmul) {
      if (o.gpu())
        std::printf("| %s | %.3f | %.1f | — | — | — | — |\n", r.shape.c_str(),
                    r.fusedMs, r.gflops);
      else
        std::printf("| %s | %.3f | %.1f | %.3f | %.1f | %.0f%% | %.1f |\n",
                    r.shape.c_str(), r.fusedMs, r.gflops, r.refMs, r.refRate,
                    r.fraction * 100, r.fusedMiB);
      continue;
    }
    std::printf("| %s | %.3f | %.3f | %.2fx | %.1f |", r.shape.c_str(),
                r.fusedMs, r.unfusedMs, r.unfusedMs / r.fusedMs, r.gflops);
    if (o.gpu()) // no host reference, the device memory is not counted
      std::printf(" — | — | — | — |\n");
    else
      std::printf(" %.1f | %.2f%s | %.1f | %.1f |\n", r.refRate,
                  att ? r.fraction * 100 : r.fraction, att ? "%" : "x",
                  r.fusedMiB, r.unfusedMiB);
  }
  if (att && !haveSgemm && !o.gpu())
    std::printf("(oneDNN not found: no sgemm reference)\n");
}

void writeJson(const Options &o, const std::vector<Row> &rows, FILE *f) {
  bool matmul = o.matmul(), att = o.computeBound();
  char softcapJson[32] = "null";
  if (o.softcap > 0)
    std::snprintf(softcapJson, sizeof softcapJson, "%.9g", o.softcap);
  std::string windowJson =
      o.window > 0 ? std::to_string(o.window) : std::string("null");
  std::fprintf(f,
               "{\"kernel\": \"%s\", \"causal\": %s, \"softcap\": %s, "
               "\"window\": %s, \"threads\": %d, \"repeat\": %d, "
               "\"target\": \"%s\", \"dtype\": \"%s\", \"rows\": [\n",
               o.kernel.c_str(), o.causal ? "true" : "false", softcapJson,
               windowJson.c_str(), o.threads, o.repeat, o.target.c_str(),
               o.dtype.c_str());
  // GPU builds: no host reference and no memory count (null); a matmul
  // has no unfused build (null) and is checked against float64.
  auto value = [](bool known, double v, const char *format) {
    char buf[64] = "null";
    if (known)
      std::snprintf(buf, sizeof buf, format, v);
    return std::string(buf);
  };
  auto host = [&](double v, const char *format) {
    return value(!o.gpu(), v, format);
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row &r = rows[i];
    std::fprintf(
        f,
        "  {\"shape\": \"%s\", \"fused_ms\": %.6f, \"unfused_ms\": %s, "
        "\"speedup\": %s, \"%s\": %.3f, \"%s\": %s, \"%s\": %s, "
        "\"fused_peak_mib\": %s, \"unfused_peak_mib\": %s, "
        "\"%s\": %.3g}%s\n",
        r.shape.c_str(), r.fusedMs, value(!matmul, r.unfusedMs, "%.6f").c_str(),
        value(!matmul, r.unfusedMs / r.fusedMs, "%.4f").c_str(),
        att ? "fused_gflops" : "fused_gbps", r.gflops,
        att ? "sgemm_gflops" : "copy_gbps", host(r.refRate, "%.3f").c_str(),
        att ? "fraction_of_sgemm" : "time_over_copy",
        host(r.fraction, "%.4f").c_str(), host(r.fusedMiB, "%.3f").c_str(),
        value(!o.gpu() && !matmul, r.unfusedMiB, "%.3f").c_str(),
        matmul ? "rel_error_vs_float64" : "fused_vs_unfused_rel_error", r.error,
        i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, "]}\n");
  closeOrDie(f, o.json);
}

} // namespace tfc::bench
