"""The GPU builds of tfc's kernels, as the device check makes them and the
numerics tests and instruction counts reuse them: build name -> the
tfc-compile flags, every one spelt out. Standard library only."""

# The default build ("fused") takes tfc-compile's kernels for the chip: on
# sm_90a, its default, wgmma on TMA tiles with two warpgroups per attention
# block (what "tma2" names again, flag by flag: its second time is the
# spread of two timings of one kernel). f16/bf16 attention is also built in
# each of the other kernels, every flag spelt out: "mma" (mma.sync, K and V
# staged through registers, 4-byte fragment loads; sm_90 and 16 rows per
# warp, as tfc built before the device check chose), "ldmatrix" (the same,
# fragments by ldmatrix), "async" (K and V tiles by cp.async into two
# stages, fragments by ldmatrix), "async32" (that with 32 query rows per
# warp, blocks of 128 rows: sm_80's and sm_90's default), "wgmma" and
# "wgmma2" (Hopper's warpgroup MMA on cp.async tiles, one or two warpgroups
# per block), "tma" and "tma2" (the same on tiles copied by TMA: one thread
# per block issues the copies, mbarriers, 128-byte swizzle; the runtime
# makes the tensor maps) and "tma2p" (tma2 with a producer warpgroup that
# issues the copies and hands its registers to the others, setmaxnreg):
# checked like the fused build and timed beside it (the GPU target only;
# the device check's prepare drops them for the CPU). Each names its
# architecture, which replaces TFC_GPU_ARCH's. Build name: tfc-compile
# flags.
MMA_SYNC = ["--gpu-arch=sm_90", "--gpu-async-copy=false", "--gpu-warp-rows=16"]
GPU_VARIANTS = {
    "mma": MMA_SYNC,
    "ldmatrix": MMA_SYNC + ["--gpu-ldmatrix"],
    "async": ["--gpu-arch=sm_90", "--gpu-async-copy", "--gpu-warp-rows=16"],
    "async32": ["--gpu-arch=sm_90", "--gpu-async-copy", "--gpu-warp-rows=32"],
    "wgmma": ["--gpu-arch=sm_90a", "--gpu-wgmma", "--gpu-tma=false",
              "--gpu-wgmma-warpgroups=1"],
    "wgmma2": ["--gpu-arch=sm_90a", "--gpu-wgmma", "--gpu-tma=false",
               "--gpu-wgmma-warpgroups=2"],
    "tma": ["--gpu-arch=sm_90a", "--gpu-wgmma", "--gpu-tma",
            "--gpu-wgmma-warpgroups=1"],
    "tma2": ["--gpu-arch=sm_90a", "--gpu-wgmma", "--gpu-tma",
             "--gpu-wgmma-warpgroups=2"],
    "tma2p": ["--gpu-arch=sm_90a", "--gpu-wgmma", "--gpu-tma",
              "--gpu-wgmma-warpgroups=2", "--gpu-tma-producer"],
}

# Attention with at most 8 query rows per KV head (decode; grouped-query
# heads) runs the split-KV decode kernel in the default build ("fused");
# "tiled" keeps the tiled flash-attention kernels for it. "dmma" computes
# the decode kernel's products on tensor cores (--gpu-decode-mma), "dmma2"
# and "dmma3" with its keys split for 2 or 3 blocks per SM instead of 4
# (longer chunks; 3 blocks of it fit on an SM). (More cp.async stages or
# blocks per SM for the CUDA-core decode kernel did not pay on the H200:
# docs/performance/reports/2026-12-04-h200.md.) The GPU_VARIANTS
# change the tiled kernels only, so decode models are built with these
# instead (the GPU target only; the device check's prepare drops them for
# the CPU). Build name: tfc-compile flags.
DECODE_BUILDS = {
    "tiled": ["--gpu-decode-kernel=false"],
    "dmma": ["--gpu-decode-mma"],
    "dmma2": ["--gpu-decode-mma", "--gpu-decode-blocks-per-sm=2"],
    "dmma3": ["--gpu-decode-mma", "--gpu-decode-blocks-per-sm=3"],
}
