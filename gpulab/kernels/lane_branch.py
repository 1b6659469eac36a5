"""A CUDA C++ kernel with a real per-lane branch, ``if (lane < b)``: divergence that the hardware counters show
(notebook 02).

Triton has no per-lane ``if`` (``gpulab.kernels.divergence``: its branches are predicated, so Nsight Compute reads
32 of 32 active threads per instruction for every variant). Here each CUDA thread takes one element, computes its
lane ``threadIdx.x % 32`` and branches on it: lanes ``0 .. b-1`` run path A, ``trips`` dependent FMAs
``v = v * 0.999 + 0.001``; lanes ``b .. 31`` run path B, as many FMAs of other work, ``v = v * v - 0.5``. A warp
with ``0 < b < 32`` runs both loops one after the other, each with part of its lanes masked off: twice the issue
steps at half the active lanes (``gpulab.models.simt.branch(lambda lane: lane < b, trips, trips)``); at ``b = 0`` and
``b = 32`` the branch is uniform and the warp runs one loop.

Built on a GPU with ``torch.utils.cpp_extension.load_inline`` (nvcc and ninja needed) into
``gpulab.core.settings.cache_dir()/cuda``, once per process. ``lane_branch_ref`` is the same arithmetic in float64.

Caveats: path B is meant for |x| <= 1 (``v * v - 0.5`` stays in [-0.5, 0.5] there; larger |x| can grow to inf);
the lane is ``i % 32`` only because ``block`` is a multiple of 32, which the launcher checks.
"""

from __future__ import annotations

import hashlib

import torch

import gpulab

from ..core import settings, validate
from ._checks import check_tensor

WARP = 32  # lanes per warp (gpulab.models.simt.WARP_SIZE; not imported: kernels do not need the model)
MAX_TRIPS = 1 << 20  # FMAs per path, at most: a launch of n = 2^24 threads then stays well under a second

#: The kernel a learner reads: one element per thread, the branch on the thread's lane.
KERNEL_SOURCE = r"""
__global__ void lane_branch_kernel(const float* x, float* y, long long n, int b, int trips) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int lane = threadIdx.x % 32;           // this thread's lane in its warp
    float v = x[i];
    if (lane < b) {                        // path A: lanes 0 .. b-1
        for (int t = 0; t < trips; ++t)
            v = fmaf(v, 0.999f, 0.001f);   // trips dependent FMAs
    } else {                               // path B: lanes b .. 31
        for (int t = 0; t < trips; ++t)
            v = fmaf(v, v, -0.5f);         // as many FMAs of other work
    }
    y[i] = v;
}
"""

#: The host side: launch on torch's current stream, and surface a launch error at once.
HOST_SOURCE = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

void lane_branch_launch(torch::Tensor x, torch::Tensor y, int64_t b, int64_t trips, int64_t block) {
    const long long n = x.numel();
    const long long grid = (n + block - 1) / block;
    lane_branch_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), n, (int)b, (int)trips);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""

CPP_DECLARATION = "void lane_branch_launch(torch::Tensor x, torch::Tensor y, int64_t b, int64_t trips, int64_t block);"
CUDA_SOURCE = KERNEL_SOURCE + HOST_SOURCE

# The constants as the kernel holds them (float32), so the float64 reference computes the kernel's arithmetic.
A_MUL, A_ADD, B_ADD = (float(torch.tensor(c, dtype=torch.float32)) for c in (0.999, 0.001, -0.5))

_BUILT: dict[str, object] = {}


def build_dir():
    """Where ninja builds the extension: ``gpulab.core.settings.cache_dir()/cuda/lane_branch`` (a ``Path``)."""
    return settings.cache_dir() / "cuda" / "lane_branch"


def _module():
    """The compiled extension, built on first use (tens of seconds: nvcc), then loaded from ``build_dir()``."""
    name = "gpulab_lane_branch_" + hashlib.sha256(CUDA_SOURCE.encode()).hexdigest()[:10]
    if name not in _BUILT:
        from torch.utils.cpp_extension import load_inline

        path = build_dir()
        path.mkdir(parents=True, exist_ok=True)
        _BUILT[name] = load_inline(
            name=name,
            cpp_sources=CPP_DECLARATION,
            cuda_sources=CUDA_SOURCE,
            functions=["lane_branch_launch"],
            build_directory=str(path),
            extra_cuda_cflags=["-O3"],
            verbose=False,
        )
    return _BUILT[name]


def _check_args(x, b, trips, block) -> tuple[int, int, int]:
    check_tensor("x", x, dtypes=(torch.float32,), ndim=1, torch_op="lane_branch_ref")
    b = validate.integer("b", b, low=0, high=WARP)
    trips = validate.integer("trips", trips, low=0, high=MAX_TRIPS)
    block = validate.integer("block", block, low=WARP, high=1024)
    if block % WARP:
        raise ValueError(f"block must be a multiple of {WARP} (whole warps, so that lane = i % 32), got {block}")
    return b, trips, block


def lane_branch(x: torch.Tensor, b: int, trips: int = 256, block: int = 256) -> torch.Tensor:
    """y[i] = path A applied ``trips`` times to x[i] if lane(i) < b, else path B ``trips`` times; lane(i) = i % 32.

    x: (n,) contiguous float32 on the GPU, meant for |x| <= 1; b: int in [0, 32]; trips: int in [0, 2^20];
    block: threads per block, a multiple of 32 in [32, 1024]. Returns (n,) float32. One CUDA thread per element.
    Raises TypeError/ValueError naming the bad argument, and RuntimeError without a GPU (this is CUDA C++, not
    Triton: the interpreter cannot run it; ``lane_branch_ref`` computes the same arithmetic on any device).
    """
    b, trips, block = _check_args(x, b, trips, block)
    if not gpulab.ON_GPU:
        raise RuntimeError(
            "lane_branch is a CUDA C++ kernel (built with nvcc) and needs a GPU; gpulab runs in interpreter mode "
            "here. lane_branch_ref(x, b, trips) computes the same arithmetic in float64"
        )
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel():
        _module().lane_branch_launch(x, y, b, trips, block)
    return y


def lane_branch_ref(x: torch.Tensor, b: int, trips: int = 256) -> torch.Tensor:
    """The float64 reference of ``lane_branch``: x: (n,) float tensor (any device); returns (n,) float64."""
    b = validate.integer("b", b, low=0, high=WARP)
    trips = validate.integer("trips", trips, low=0, high=MAX_TRIPS)
    v = x.double()
    take_a = torch.arange(x.numel(), device=x.device) % WARP < b
    a, c = v[take_a], v[~take_a]
    for _ in range(trips):
        a = a * A_MUL + A_ADD
        c = c * c + B_ADD
    out = torch.empty_like(v)
    out[take_a], out[~take_a] = a, c
    return out


def lane_branch_counts(n: int, trips: int) -> tuple[int, int]:
    """(FMAs, bytes) by hand for n elements: every thread does ``trips`` useful FMAs of its own path (n * trips;
    a divergent warp issues twice as many, half of its lanes idle in each); it reads x and writes y, 8n bytes."""
    n = validate.integer("n", n)
    trips = validate.integer("trips", trips, low=0, high=MAX_TRIPS)
    return n * trips, 8 * n
