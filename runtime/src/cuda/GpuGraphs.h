//===- GpuGraphs.h - CUDA graphs of a model's runs --------------*- C++ -*-===//
//
// A run of a GPU model is a chain of kernel launches, copies and memsets on
// the runtime's one stream. GraphCache captures the chain of one run
// (cuStreamBeginCapture in relaxed mode, the model's tfc_model_run,
// cuStreamEndCapture, cuGraphInstantiate) and launches the instantiated graph
// for every later run on the same device pointers: one driver call instead
// of one per launch. The graph holds the pointers it was captured with, so
// graphs are kept by the device pointers of the run (the model's buffers and
// the device buffers bound to it): a run on other pointers captures anew,
// and a few graphs are kept, the least recently used dropped.
//
// The capture goes to a stream of the model's own (non-blocking), so that
// other threads' work on the runtime's stream stays out of the graph; the
// graph is launched on the runtime's stream, after the copies of the run's
// inputs. While a run is captured (Capture), the mgpu* functions behave as
// a graph needs: mgpuStreamCreate hands out the capture stream,
// synchronisations are skipped (the stream orders everything), the
// temporaries generated code frees stay allocated, as the graph's, until
// the graph is dropped, constants copied from the library's image go to
// device blocks of the graph's once, and a request that a graph cannot
// hold (a TMA
// tensor map, cached by address and reused across runs) abandons the
// capture: the run then goes kernel by kernel, and so do the model's later
// runs.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_CUDA_GPUGRAPHS_H
#define TFC_RUNTIME_CUDA_GPUGRAPHS_H

#include "CudaDriver.h"

#include "tfc/runtime/abi.h"
#include "tfc/runtime/api.h"

#include <string>
#include <vector>

namespace tfc::cuda {

/// A run being captured on this thread.
struct Capture {
  /// The stream being captured: generated code's stream while capturing.
  CUstream stream = nullptr;
  /// The blocks the run freed, and its constants' device copies: the
  /// graph's until it is dropped.
  std::vector<CUdeviceptr> deferredFrees;
  /// Why the run cannot become a graph; empty while it can.
  std::string abandoned;
};

/// The capture under way on this thread, or null.
Capture *activeCapture();

/// Whether `ptr` lies in the image of a loaded library (a model's
/// constants, which its host code copies to the device on every run).
bool inLoadedImage(const void *ptr);
/// mgpuMemcpy of `bytes` of such a constant at `host` to `dst` while
/// `capture` runs: copied now to a device block of the graph's, which the
/// graph copies from (a graph copies no pageable host memory); failures
/// are recorded (Failure.h).
void copyConstant(Capture &capture, void *dst, const void *host, size_t bytes);

/// Whether graphs are on for models loaded from now: not when
/// $TFC_CUDA_GRAPHS is "0", "off" or "false".
bool graphsEnabledByEnvironment();

class GraphCache {
public:
  static constexpr size_t kCapacity = 4;

  explicit GraphCache(const Driver &driver) : driver_(driver) {}
  ~GraphCache();
  GraphCache(const GraphCache &) = delete;
  GraphCache &operator=(const GraphCache &) = delete;

  enum class Outcome {
    Launched, // the graph of these pointers is queued on the stream
    Plain,    // no graph: run the model kernel by kernel (nothing queued)
    Failed,   // cuGraphLaunch failed: `*error` holds its result
  };
  /// Queues one run of `run` on `pointers` as a graph: the one captured
  /// for these pointers, or one captured now. Plain when the driver has no
  /// graphs, graphs are off, or the capture was abandoned or failed (then
  /// for good: `reason()` says why).
  Outcome launch(tfc_model_run_fn run, const std::vector<void *> &pointers,
                 CUresult *error);
  /// Drops every graph (after the stream drains) and frees their blocks.
  void clear();

  void setEnabled(bool enabled);
  bool enabled() const { return enabled_; }
  /// Why graphs are off for this model; empty while they are on.
  std::string reason() const;
  tfc_cuda_graph_stats stats() const;
  /// Counts a run that went kernel by kernel.
  void countPlain() { ++stats_.plain_runs; }

private:
  struct Graph {
    tfc_model_run_fn run = nullptr;
    std::vector<void *> pointers;
    CUgraphExec exec = nullptr;
    std::vector<CUdeviceptr> blocks; // freed by the run while captured
  };
  /// Captures and instantiates a graph of `run` on `pointers`; null when
  /// that fails (broken_ says why).
  Graph *capture(tfc_model_run_fn run, const std::vector<void *> &pointers);
  void release(Graph &graph);

  const Driver &driver_;
  bool enabled_ = graphsEnabledByEnvironment();
  CUstream captureStream_ = nullptr; // created by the first capture
  std::string broken_;               // why a capture failed, for good
  std::vector<Graph> graphs_;        // most recently used last
  tfc_cuda_graph_stats stats_ = {};
};

} // namespace tfc::cuda

#endif // TFC_RUNTIME_CUDA_GPUGRAPHS_H
