"""The fast matmul, C = A @ B, that lesson 07 links: a tiled pointer kernel and a Hopper TMA kernel.

Shapes and dtypes: ``a: (M, K)``, ``b: (K, N)``, one dtype in (fp32, fp16, bf16), any M, N, K >= 1 and any
strides; ``c: (M, N)`` in the same dtype (like ``torch.matmul``), accumulated in fp32.

Lesson 07's short teaching kernels, built step by step (no reuse, tiled, grouped, pipelined), are in
``kernels/matmul_steps.py``; the lesson summarises this file in a table and never prints it.

Two kernels (the seed lecture, CS336 Lecture 5, "Tile the computation to reuse inputs"; the structure of
Triton's tutorials 03-matrix-multiplication and 09-persistent-matmul):

- ``matmul_kernel``: one program per ``BLOCK_M x BLOCK_N`` output tile. Each step along K loads a
  ``BLOCK_M x BLOCK_K`` tile of A and a ``BLOCK_K x BLOCK_N`` tile of B (masked at the edges, so any M, N, K
  work) and feeds them to ``tl.dot``. Tiles are visited in groups of ``GROUP_M`` rows, so programs that run
  together share their tiles of B in L2. Runs everywhere, Triton's interpreter included.
- ``matmul_tma_kernel``: the same tiles, loaded by the Hopper Tensor Memory Accelerator through tensor
  descriptors (``triton.tools.tensor_descriptor.TensorDescriptor``), optionally persistent (one program per
  SM, looping over tiles). TMA needs 16-byte aligned row strides: for awkward sizes (N not a multiple of 8
  in 16-bit) the launcher copies A and B into buffers with padded rows first, and that copy is part of the
  time. Out-of-range tile elements are zero-filled by the TMA unit; the output is stored with masks. When N
  is not a multiple of 16, the output tile goes to a row-padded buffer first and is copied back: stores into
  rows of odd length are per-element, which drives the epilogue's register use into spills and slows the
  whole persistent loop.

The K loops of the two differ in how a tile is addressed (pointers stepped by ``BLOCK_K`` strides, masked;
descriptor coordinates, zero-filled), so each kernel writes its own. The kernel with no reuse, for contrast, is
lesson 07's first step, ``matmul_steps.naive_kernel`` (``matmul_steps.matmul_step(a, b, "no reuse")``).

``matmul(a, b)`` takes the path and the configs of the GPU plan: which ones on each GPU generation is the plan
policy, described once in ``gpulab.core.plan``'s module docstring (``planned_path``, ``candidates``,
``heuristic_config``). ``config=None`` autotunes on a GPU with the shared autotuner (``kernels._autotune``), once
per size bucket (each dimension rounded up to a power of two); ``config="heuristic"`` takes the first candidate
untimed (the dense sweeps use it, so nothing is tuned per size); a ``MatmulConfig`` fixes it. The grouped launch
order is ``matmul_steps.launch_order``, the one lesson 07 builds.

An eager call of a small or awkward size is bound by the CPU. ``matmul`` keeps what does not change between calls
of one shape, a *launch plan* (the path's config, the grid, the row-padded scratch buffers and their TMA
descriptors), in ``PLANS``, under a key of everything that changes the launch; the rules (bounds, CUDA graph
capture, scratch never returned) are ``kernels._call_cache``'s. ``launch`` keeps nothing: a new plan each call.

fp32 inputs: ``input_precision="tf32"`` (tensor cores, inputs cut to 10 mantissa bits) or ``"ieee"``
(exact fp32 products); gpulab's interpreter patch cuts "tf32" inputs as a GPU does (``triton_compat``).
The interpreter's bf16 ``tl.dot`` multiplies raw bits (Triton 3.9, see ``matmul_precision``); there bf16 tiles
are upcast to fp32 first.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import triton
import triton.language as tl

import gpulab

from ..core import plan, settings
from ..models import waves
from . import _autotune, _call_cache
from ._checks import check_matmul_operands
from ._hopper import TensorDescriptor, num_sms, tma_available
from .matmul_precision import bf16_dot_is_exact
from .matmul_steps import launch_order  # the grouped order (GROUP_M tile rows at a time): lesson 07's step 3
from .pad import aligned16, copy_pairs, pad_rows, pad_rows_many, row_padded_empty  # noqa: F401  (pad_rows*: API)

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
INPUT_PRECISIONS = ("tf32", "ieee")
PATHS = ("auto", "pointer", "tma")
TMA_DTYPES = (torch.float16, torch.bfloat16)


@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr,  # a: (M, K), b: (K, N), c: (M, N), any strides
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    INPUT_PRECISION: tl.constexpr, UPCAST: tl.constexpr,
):  # fmt: skip
    """C = A @ B, one program per (BLOCK_M, BLOCK_N) tile of C, grid ``(cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N),)``,
    tiles taken GROUP_M tile rows at a time (``launch_order``). Accumulates in fp32 and stores in c's dtype.
    INPUT_PRECISION: ``tl.dot``'s for fp32 inputs ("tf32" or "ieee"); UPCAST: bf16 tiles upcast to fp32 before
    the dot (the interpreter's workaround). Offsets times strides are int64: operands past 2^31 elements."""
    pid_m, pid_n = launch_order(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    # int64 offsets wherever one is multiplied by a stride: offs * stride must not wrap past 2^31 elements
    # (a (64, 2^25) fp16 B is 4 GiB, and BLOCK_K * N = 2^31 already). The masks keep int32 offsets.
    offs_m = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
    offs_n = pid_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)  # (BLOCK_N,)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :].to(tl.int64) * stride_ak  # (BLOCK_M, BLOCK_K)
    b_ptrs = b_ptr + offs_k[:, None].to(tl.int64) * stride_bk + offs_n[None, :] * stride_bn  # (BLOCK_K, BLOCK_N)
    step_a = tl.full([], BLOCK_K, tl.int64) * stride_ak  # one int64 scalar per step along K, computed once
    step_b = tl.full([], BLOCK_K, tl.int64) * stride_bk
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < K - k0), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < K - k0) & (offs_n[None, :] < N), other=0.0)
        if UPCAST:  # the interpreter's bf16 workaround: exact, a bf16 product fits in fp32
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)  # both tiles reused BLOCK_N and BLOCK_M times
        a_ptrs += step_a
        b_ptrs += step_b
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit(do_not_specialize=["num_programs"])  # one compiled kernel whatever the program count
def matmul_tma_kernel(
    a_desc, b_desc, c_ptr,  # descriptors over a: (M, K) and b: (K, N), row-major; c: (M, N_STORE) rows
    M, N, K,
    stride_cm, stride_cn,
    num_programs, N_STORE,  # programs launched; columns stored (>= N: row padding of a scratch output)
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    FLATTEN: tl.constexpr, WARP_SPECIALIZE: tl.constexpr, UPCAST: tl.constexpr,
):  # fmt: skip
    """C = A @ B with tiles loaded by TMA, fp16 or bf16: program ``pid`` computes the tiles pid, pid +
    num_programs, ... of C (persistent when num_programs < the tile count; grid ``(num_programs,)``), in
    ``launch_order`` with GROUP_M; a descriptor's block is (BLOCK_M, BLOCK_K) for a, (BLOCK_K, BLOCK_N) for b.
    FLATTEN, WARP_SPECIALIZE: ``tl.range``'s flags for the tile loop; UPCAST as ``matmul_kernel``'s."""
    num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    tile_id_c = tl.program_id(0) - num_programs  # a second counter for the epilogue, as in Triton's tutorial 09
    # persistent when num_programs < num_tiles: each program walks the tiles num_programs apart
    for tile_id in tl.range(
        tl.program_id(0), num_tiles, num_programs, flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE
    ):
        pid_m, pid_n = launch_order(tile_id, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([pid_m * BLOCK_M, ki * BLOCK_K])  # (BLOCK_M, BLOCK_K), zero past the edges
            b = b_desc.load([ki * BLOCK_K, pid_n * BLOCK_N])  # (BLOCK_K, BLOCK_N)
            if UPCAST:
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc)
        tile_id_c += num_programs
        pid_m, pid_n = launch_order(tile_id_c, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        offs_m = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
        # N_STORE >= N: columns past N hold zeros (B's descriptor zero-fills), written only into row padding
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N_STORE))


@dataclass(frozen=True)
class MatmulConfig:
    """One launch shape. Blocks are powers of two >= 16. ``persistent``, ``flatten`` and ``warp_specialize``
    apply to the TMA path only (persistent: one program per SM looping over tiles)."""

    BLOCK_M: int
    BLOCK_N: int
    BLOCK_K: int
    GROUP_M: int = 8
    num_warps: int = 4
    num_stages: int = 3
    persistent: bool = False
    flatten: bool = False
    warp_specialize: bool = False

    def check(self) -> MatmulConfig:
        """Return self, or raise ``ValueError`` naming the bad field."""
        for name in ("BLOCK_M", "BLOCK_N", "BLOCK_K"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 16 or v > 512 or v & (v - 1):
                raise ValueError(f"config: {name} must be a power of two in [16, 512], got {v!r}")
        for name in ("GROUP_M", "num_warps", "num_stages"):  # bool is an int in Python; 4.0 == 4
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError(f"config: {name} must be an int, got {v!r} ({type(v).__name__})")
        if self.GROUP_M < 1:
            raise ValueError(f"config: GROUP_M must be an int >= 1, got {self.GROUP_M!r}")
        if self.num_warps not in (1, 2, 4, 8, 16):
            raise ValueError(f"config: num_warps must be 1, 2, 4, 8 or 16, got {self.num_warps!r}")
        if not 1 <= self.num_stages <= 8:
            raise ValueError(f"config: num_stages must be an int in [1, 8], got {self.num_stages!r}")
        return self

    @property
    def tile(self) -> tuple[int, int]:
        return self.BLOCK_M, self.BLOCK_N


def config_label(config: MatmulConfig) -> str:
    """A config in one line, the label tables and recordings use: ``"128x256x64 g8 w8 s3 persistent flatten"``
    (blocks M x N x K, GROUP_M, warps, stages, then the TMA path's flags that are set)."""
    c = config
    s = f"{c.BLOCK_M}x{c.BLOCK_N}x{c.BLOCK_K} g{c.GROUP_M} w{c.num_warps} s{c.num_stages}"
    return s + "".join(f" {k}" for k in ("persistent", "flatten", "warp_specialize") if getattr(c, k))


C = MatmulConfig
# Autotuning candidates per path (GPU). The first of each list is the heuristic's choice; the lists and their
# order are the best of a screen by ``tools/tune_matmul.py`` (rerun it for a new GPU or Triton). What the
# autotuner chose and the rates it reached are in lesson 07's reference data (gpulab/data).
CONFIGS = {
    "tma": [
        C(128, 256, 64, 8, 8, 3, persistent=True, flatten=True),
        C(128, 256, 64, 16, 8, 3, persistent=True, flatten=True),
        C(128, 256, 64, 8, 8, 4, persistent=True, flatten=True),
        C(128, 256, 64, 8, 8, 3),
        C(128, 128, 64, 8, 4, 4, persistent=True, flatten=True),
    ],
    "pointer": [C(128, 256, 64, 8, 8, 3), C(128, 128, 64, 8, 8, 3), C(128, 128, 32, 8, 4, 4)],
    # fp32: no 128x128x32 tile with 4 warps, which spills registers in "ieee"
    "pointer_fp32": [C(128, 128, 32, 8, 8, 3), C(64, 128, 32, 8, 4, 4), C(128, 64, 32, 8, 4, 4)],
    # compute capability < 8.0 (plan.small_tiles), every dtype: tl.dot runs as FP32 FMA on the CUDA cores, and
    # the big tiles above spill registers there. These compile for sm_75 without spills in fp16 and fp32
    # (python -m gpulab.measure.targets --cc 75 --only matmul --all-configs shows registers and spills); none is timed
    # on a T4 yet, so the first (the heuristic's) is the one with the fewest registers.
    "pointer_small": [
        C(64, 64, 16, 8, 8, 2),
        C(64, 128, 16, 8, 8, 2),
        C(128, 64, 16, 8, 8, 2),
        C(64, 64, 32, 8, 8, 2),
        C(64, 64, 16, 8, 4, 2),
    ],
}
INTERPRETER_CONFIG = C(64, 64, 32, 4, 4, 1, persistent=True)  # the interpreter pays per operation, not per element
del C


def planned_path(dtype: torch.dtype, plan_: plan.Plan | None = None) -> str:
    """The path the plan takes for ``dtype``: "tma" for fp16/bf16 where ``plan_.matmul_path`` is "tma", else
    "pointer". Pure (no GPU check); ``plan_`` defaults to ``plan.current()``."""
    p = plan_ or plan.current()
    return "tma" if p.matmul_path == "tma" and dtype in TMA_DTYPES else "pointer"


def choose_path(dtype: torch.dtype, plan_: plan.Plan | None = None) -> str:
    """The path ``path="auto"`` takes: ``planned_path(dtype, plan_)`` on a GPU where ``tma_available()``, else
    "pointer" (the interpreter takes the pointer path unless asked)."""
    return "tma" if gpulab.ON_GPU and tma_available() and planned_path(dtype, plan_) == "tma" else "pointer"


def config_list(path: str, dtype: torch.dtype, plan_: plan.Plan | None = None) -> str:
    """The key of ``CONFIGS`` the plan tunes ``path`` over: "pointer_small" on the pointer path where
    ``plan_.small_tiles``, "pointer_fp32" for fp32 on the pointer path, else ``path``. Raises ValueError for a
    path outside ("pointer", "tma")."""
    if path not in ("pointer", "tma"):
        raise ValueError(f"path must be 'pointer' or 'tma', got {path!r}")
    if path == "pointer" and (plan_ or plan.current()).small_tiles:
        return "pointer_small"
    return "pointer_fp32" if path == "pointer" and dtype == torch.float32 else path


def candidates(path: str, dtype: torch.dtype, plan_: plan.Plan | None = None) -> list[MatmulConfig]:
    """The autotuning candidates of ``path`` for ``dtype`` (any torch dtype; its itemsize counts) on the planned
    GPU: ``CONFIGS[config_list(...)]`` in order, keeping those whose ``plan.matmul_smem_bytes`` fits one block's
    shared memory (``Plan.keep_fitting``: the smallest one if none does). Pure; ``plan_`` defaults to
    ``plan.current()``."""
    p = plan_ or plan.current()
    size = dtype.itemsize
    return p.keep_fitting(
        CONFIGS[config_list(path, dtype, p)],
        lambda c: plan.matmul_smem_bytes(c.BLOCK_M, c.BLOCK_N, c.BLOCK_K, c.num_stages, size),
    )


def heuristic_config(
    M: int, N: int, K: int, dtype: torch.dtype, path: str, plan_: plan.Plan | None = None
) -> MatmulConfig:
    """A fixed config, no timing: the interpreter's small tiles, or the first of
    ``candidates(path, dtype, plan_)`` on a GPU."""
    if not gpulab.ON_GPU:
        return INTERPRETER_CONFIG
    return candidates(path, dtype, plan_)[0]


def _bucket(x: int) -> int:
    return 1 << max(x - 1, 1).bit_length()


def _check_inputs(a, b, input_precision, path):
    check_matmul_operands(a, b, DTYPES)
    if input_precision not in INPUT_PRECISIONS:
        raise ValueError(f"input_precision must be one of {INPUT_PRECISIONS}, got {input_precision!r}")
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    if path == "tma":
        if a.dtype not in TMA_DTYPES:
            raise ValueError(f"path='tma' takes fp16 or bf16 inputs, got {a.dtype}; use path='pointer' for fp32")
        if not tma_available():
            raise ValueError(
                "path='tma' needs TMA tensor descriptors (a GPU of compute capability >= 9.0, or the "
                f"interpreter, with Triton >= 3.4); here: compute capability {gpulab.compute_capability()}, "
                f"TensorDescriptor {'found' if TensorDescriptor else 'missing'}"
            )


def _upcast(dtype) -> bool:
    return dtype == torch.bfloat16 and not bf16_dot_is_exact()


def launch(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, config: MatmulConfig, path: str, input_precision: str = "tf32"
):
    """Launch one path with one config into ``c`` (no checks, no tuning, no cache: scratch buffers are new on
    every call); returns the compiled kernel (``None`` in the interpreter). ``a``, ``b``, ``c`` as in
    ``matmul``; for "tma", 16-bit inputs."""
    return _run(_new_plan(a, b, c, config, path, input_precision), a, b, c)


# ---- host plans: what every call of one shape reuses (kept per shape by ``matmul``, in ``PLANS``) ----------


@dataclass(eq=False)
class _LaunchPlan:
    """Everything a launch needs that depends on the call's shape, not its data: path, config, grid and, on the
    TMA path, the scratch buffers and their descriptors. ``a_pad``/``b_pad``: (rows, cols) views of row-padded
    scratch that A/B are copied into, None where TMA reads the operand as it is (its descriptor is then built
    per call, on the caller's tensor); ``c_pad``: a row-padded (M, N rounded up to 16) scratch output, None
    where the kernel stores into ``c``. ``tune_key``: set where the config came from the autotuner;
    ``gpu_plan``: the ``plan.Plan`` it was made under, held so that its id in the cache key stays unique."""

    path: str
    config: MatmulConfig
    input_precision: str
    grid: tuple
    upcast: bool
    tune_key: tuple | None = None
    a_pad: torch.Tensor | None = None
    b_pad: torch.Tensor | None = None
    c_pad: torch.Tensor | None = None
    a_desc: object = None
    b_desc: object = None
    gpu_plan: object = None

    @property
    def scratch_bytes(self) -> int:
        bufs = (t for t in (self.a_pad, self.b_pad, self.c_pad) if t is not None)
        return sum(t.untyped_storage().nbytes() for t in bufs)


def _new_plan(a, b, c, config: MatmulConfig, path: str, input_precision: str, tune_key=None) -> _LaunchPlan:
    """The plan of a launch of ``path`` with ``config`` for these operands' shapes, strides and alignments,
    with new scratch buffers."""
    M, K = a.shape
    N = b.shape[1]
    bm, bn, bk = config.BLOCK_M, config.BLOCK_N, config.BLOCK_K
    tiles = waves.cdiv(M, bm) * waves.cdiv(N, bn)
    p = _LaunchPlan(path, config, input_precision, (tiles,), _upcast(a.dtype), tune_key)
    if path == "pointer":
        return p
    p.grid = (min(tiles, num_sms()) if config.persistent else tiles,)
    # an operand TMA cannot read as it is (rows not 16-byte aligned, or not row-major) is copied into scratch
    p.a_pad = None if aligned16(a) else row_padded_empty(M, K, a.dtype, a.device)
    p.b_pad = None if aligned16(b) else row_padded_empty(K, N, b.dtype, b.device)
    if p.a_pad is not None:
        p.a_desc = TensorDescriptor(p.a_pad, [M, K], [p.a_pad.stride(0), 1], [bm, bk])
    if p.b_pad is not None:
        p.b_desc = TensorDescriptor(p.b_pad, [K, N], [p.b_pad.stride(0), 1], [bk, bn])
    if not _store_aligned(c):
        p.c_pad = torch.empty((M, waves.cdiv(N, 16) * 16), device=c.device, dtype=c.dtype)
    return p


def _run(p: _LaunchPlan, a, b, c):
    """Launch plan ``p`` on these operands (of the shapes, strides and alignments ``p`` was made for) into
    ``c``; returns the compiled kernel (``None`` in the interpreter)."""
    M, K = a.shape
    N = b.shape[1]
    cfg = p.config
    bm, bn, bk = cfg.BLOCK_M, cfg.BLOCK_N, cfg.BLOCK_K
    opts = dict(num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    if p.path == "pointer":
        return matmul_kernel[p.grid](
            a, b, c,
            M, N, K,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=cfg.GROUP_M,
            INPUT_PRECISION=p.input_precision, UPCAST=p.upcast, **opts,
        )  # fmt: skip
    _fill_scratch([(a, p.a_pad), (b, p.b_pad)])
    a_desc = TensorDescriptor(a, [M, K], [a.stride(0), 1], [bm, bk]) if p.a_desc is None else p.a_desc
    b_desc = TensorDescriptor(b, [K, N], [b.stride(0), 1], [bk, bn]) if p.b_desc is None else p.b_desc
    out = c if p.c_pad is None else p.c_pad
    k = matmul_tma_kernel[p.grid](
        a_desc, b_desc, out,
        M, N, K,
        out.stride(0), out.stride(1),
        p.grid[0], out.shape[1],
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=cfg.GROUP_M,
        FLATTEN=cfg.flatten, WARP_SPECIALIZE=cfg.warp_specialize, UPCAST=p.upcast, **opts,
    )  # fmt: skip
    if out is not c:
        copy_pairs([(out.narrow(1, 0, N), c)])
    return k


def _fill_scratch(pairs) -> None:
    """Copy each operand into its scratch buffer (pairs ``(t, pad)``; ``pad`` None: nothing to copy): those
    with contiguous columns (or one column) in one ``pad_rows_kernel`` launch, others by torch's copy."""
    by_kernel = []
    for t, pad in pairs:
        if pad is None:
            continue
        if t.shape[1] == 1 or t.stride(1) == 1:
            by_kernel.append((t, pad))
        else:
            pad.copy_(t)
    copy_pairs(by_kernel)


PLANS = _call_cache.PlanCache("matmul")  # matmul's launch plans, one per call shape (rules: kernels._call_cache)


def _plan_key(a, b, c, path: str, input_precision: str, config) -> tuple:
    """Everything that changes a call's plan: path, precision, the config argument, dtype, device, shapes,
    strides and alignments of the operands and of the new output, the GPU plan (by identity: a kept plan holds
    it, so its id is not reused), the autotune mode, the current stream and thread."""
    return (
        path,
        input_precision,
        config,
        a.dtype,
        a.device,
        a.shape,
        a.stride(),
        a.data_ptr() % 16,
        b.shape,
        b.stride(),
        b.data_ptr() % 16,
        c.data_ptr() % 16,
        id(plan.current()),
        settings.SETTINGS.autotune,
    ) + _call_cache.launch_context(a.device)


def _plan_of_call(a, b, c, path: str, input_precision: str, config) -> _LaunchPlan:
    """A new plan for one call of ``matmul``: its config resolved (given, heuristic or autotuned)."""
    M, K = a.shape
    N = b.shape[1]
    tune_key = None
    if isinstance(config, MatmulConfig):
        cfg = config
    elif config == "heuristic" or not gpulab.ON_GPU:
        cfg = heuristic_config(M, N, K, a.dtype, path)
    else:
        cfg = tuned_config(a, b, path, input_precision)
        tune_key = _tune_key(a, b, path, input_precision)
    p = _new_plan(a, b, c, cfg, path, input_precision, tune_key)
    p.gpu_plan = plan.current()
    return p


def _still_chosen(p: _LaunchPlan) -> bool:
    """A plan with an autotuned config holds while the autotuner still chooses that config (after
    ``_autotune.clear()``, or inside ``_autotune.untimed()`` before a key is tuned, it does not)."""
    return p.tune_key is None or _autotune.cached(p.tune_key) is p.config


def _store_aligned(c: torch.Tensor) -> bool:
    """True if the TMA kernel can store straight into ``c``: rows a multiple of 16 elements long and apart
    (what Triton's divisibility-by-16 specialization sees) on a 16-byte aligned base."""
    return c.stride(1) == 1 and c.stride(0) % 16 == 0 and c.shape[1] % 16 == 0 and c.data_ptr() % 16 == 0


def autotune(a, b, path: str, input_precision: str = "tf32", configs=None, rep_ms: float = 40) -> MatmulConfig:
    """Time every candidate config (default ``candidates(path, a.dtype)``) on these inputs and return the
    fastest, by the shared autotuner's rules (``gpulab.kernels._autotune.fastest``: candidates that cannot
    launch are skipped; all are timed by CUDA-graph replay, or all eagerly if any capture fails). GPU only.
    Raises RuntimeError if no candidate can run."""
    if configs is None:
        configs = candidates(path, a.dtype)
    return _autotune.fastest(configs, _scratch_run(a, b, path, input_precision), rep_ms=rep_ms, what=_what(a, b, path))


def _scratch_run(a, b, path: str, input_precision: str):
    """``run(config)`` for the autotuner: one launch into a scratch output."""
    c = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=a.dtype)
    return lambda cfg: launch(a, b, c, cfg, path, input_precision)


def _what(a, b, path: str) -> str:
    return f"{path} config for shapes {tuple(a.shape)} x {tuple(b.shape)}"


def _tune_key(a, b, path: str, input_precision: str) -> tuple:
    M, K = a.shape
    N = b.shape[1]
    return (
        "matmul",
        path,
        a.dtype,
        input_precision,
        _bucket(M),
        _bucket(N),
        _bucket(K),
        M % 16 == N % 16 == K % 16 == 0,
    )


def tuned_config(a, b, path: str, input_precision: str = "tf32") -> MatmulConfig:
    """The autotuned config for this size bucket (each dimension rounded up to a power of two, and whether all
    are multiples of 16), tuned on the first call that lands in it (GPU only). With ``GPULAB_AUTOTUNE=first``,
    the path's first candidate, untimed."""
    return _autotune.pick(
        _tune_key(a, b, path, input_precision),
        candidates(path, a.dtype),
        lambda: _scratch_run(a, b, path, input_precision),
        what=_what(a, b, path),
    )


def tuned_configs() -> dict:
    """What autotuning chose so far: ``{"path dtype precision MxNxK-bucket aligned": config_label(config)}``."""
    return {
        f"{k[0]} {str(k[1]).replace('torch.', '')} {k[2]} {k[3]}x{k[4]}x{k[5]} aligned={k[6]}": config_label(v)
        for k, v in _autotune.chosen("matmul").items()
    }


def matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    input_precision: str = "tf32",
    path: str = "auto",
    config: MatmulConfig | str | None = None,
) -> torch.Tensor:
    """C = A @ B by a tiled Triton kernel; returns ``c: (M, N)`` in the inputs' dtype (fp32 accumulation).

    a: (M, K), b: (K, N), same dtype in (fp32, fp16, bf16), on gpulab.DEVICE, any strides, M, N, K >= 0.
    input_precision: "tf32" or "ieee", for fp32 inputs (ignored for 16-bit inputs).
    path: "auto" (see ``choose_path``), "pointer" (``matmul_kernel``) or "tma" (``matmul_tma_kernel``, fp16/bf16,
    Hopper or the interpreter; copies A or B into row-padded buffers when their rows are not 16-byte aligned).
    config: None (autotuned per size bucket on a GPU, ``INTERPRETER_CONFIG`` in the interpreter), "heuristic"
    (``heuristic_config``, never timed) or a ``MatmulConfig``.
    Not differentiable: raises ValueError if ``a`` or ``b`` requires grad while grad mode is on (use
    ``torch.matmul`` for autograd, or ``.detach()``). Raises TypeError/ValueError naming the argument.
    The launch plan of each call shape is kept in ``PLANS`` (see the module docstring); ``c`` is always new.
    """
    _check_inputs(a, b, input_precision, path)
    path = choose_path(a.dtype) if path == "auto" else path
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    if M == 0 or N == 0:
        return c
    if K == 0:
        return c.zero_()
    if isinstance(config, MatmulConfig):
        config.check()
    elif not (config is None or config == "heuristic"):
        raise ValueError(f"config must be None, 'heuristic' or a MatmulConfig, got {config!r}")
    key = _plan_key(a, b, c, path, input_precision, config)
    p = PLANS.get(key, lambda: _plan_of_call(a, b, c, path, input_precision, config), _still_chosen)
    _run(p, a, b, c)  # c is new: never a view of the plan's scratch
    return c


def matmul_ref(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The torch reference in float64, of the inputs as they are (already rounded to their dtype)."""
    return a.double() @ b.double()


def counts(M: int, N: int, K: int, itemsize: int) -> tuple[int, int]:
    """(FLOPs, minimum HBM bytes) of one matmul: ``2 M N K`` and ``(M K + K N + M N) * itemsize``."""
    return 2 * M * N * K, (M * K + K * N + M * N) * itemsize


def with_config(config: MatmulConfig, **changes) -> MatmulConfig:
    """A copy of ``config`` with fields changed (``dataclasses.replace``), checked."""
    return replace(config, **changes).check()
