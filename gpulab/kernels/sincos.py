"""y = sin(x)^2 + cos(x)^2, two ways: five separate kernels that write every intermediate to memory, and one
fused kernel that keeps them in registers (Stanford CS336 Lecture 5, "Fuse operations").

Counts by hand for n elements of s bytes (gpulab.models.fusion.bytes_moved): unfused, sin, cos and the two squares
each read one array and write one, and the add reads two and writes one: 11n element transfers, 44n bytes in
fp32. Fused: read x, write y: 2n transfers, 8n bytes in fp32.

The identity is 1 in real arithmetic; nothing here simplifies it. sin and cos are calls the compiler cannot
see through, so it cannot fold the sum to 1, and every kernel really computes both and squares them.

Precision: every kernel loads, computes in fp32 and stores in the output's dtype. In fp16/bf16 the unfused
path therefore rounds sin, cos and the squares to 16 bits between kernels (as torch eager does), while the
fused kernel keeps them in fp32 registers and rounds once, at the end: their results differ.

``fast=True`` uses the GPU's approximate sine and cosine (libdevice ``fast_sinf``/``fast_cosf``, PTX
``sin.approx.f32``): fewer instructions, less accuracy, and the error grows outside [-pi, pi] (NVIDIA CUDA C++
Programming Guide, intrinsic functions ``__sinf``/``__cosf``). The suite measures both errors against float64.
Triton's interpreter cannot run them, so there ``fast=True`` falls back to tl.sin/tl.cos
(``FAST_MATH_AVAILABLE`` says which one runs).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import gpulab

from . import _autotune
from ._checks import check_block, check_tensor

try:  # Triton 3.x on CUDA; the interpreter has the module but cannot execute these calls
    from triton.language.extra.cuda import libdevice
except ImportError:  # pragma: no cover - other Triton builds
    libdevice = None

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
FAST_MATH_AVAILABLE = gpulab.ON_GPU and libdevice is not None and hasattr(libdevice, "fast_sinf")
INTERPRETER_BLOCK = 1024  # the fused kernel's BLOCK in the interpreter (no autotuning there)

# The autotuner's candidates for the fused kernel on a GPU (``gpulab.kernels._autotune``, keyed on the dtype, n
# rounded up to a power of two, FAST, REPEAT and SHARED; below TUNE_MIN_N the first, untimed): 4 and 8 elements a
# thread at 2 and 4 warps, enough work per program and enough warps to hide the latency of the sin/cos calls and of
# HBM. The H200 chose (512, 2) for the precise and shared forms and (512, 4) for the fast one (lesson 04's recording,
# from a list of twelve in which blocks of 2048 and 4096 elements never won: 16 and 32 elements a thread, twice as
# slow at 4096 in the pressure study). Every candidate has its SASS counted (gpulab/data/sass-sm90.json, read by
# ``gpulab.bench.lesson04.issued_per_element`` at the shape chosen). The first is the shape below TUNE_MIN_N and under
# GPULAB_AUTOTUNE=first.
AUTOTUNE_CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w) for b, w in [(1024, 4), (512, 2), (512, 4)]]


# ---- (a) five kernels, one per operation ----------------------------------------------------------------


@triton.jit
def sin_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, tl.sin(x).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def cos_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, tl.cos(x).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def square_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (x * x).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def add_kernel(a_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (a + b).to(y_ptr.dtype.element_ty), mask=mask)


def sincos_unfused(x: torch.Tensor, block: int = 1024) -> torch.Tensor:
    """sin(x)^2 + cos(x)^2 by five launches (sin, cos, square, square, add), each writing its result to a
    new tensor in x's dtype. x: contiguous fp32/fp16/bf16 on gpulab.DEVICE, any shape. Returns a new tensor.
    Raises TypeError/ValueError naming ``x`` or ``block``. Moves 11n element transfers (44n bytes in fp32)."""
    check_tensor("x", x, dtypes=DTYPES, torch_op="torch.sin(x)**2 + torch.cos(x)**2")
    check_block("block", block)
    n = x.numel()
    s, c, s2, c2, y = (torch.empty_like(x) for _ in range(5))
    if n:
        grid = (triton.cdiv(n, block),)
        sin_kernel[grid](x, s, n, BLOCK=block)
        cos_kernel[grid](x, c, n, BLOCK=block)
        square_kernel[grid](s, s2, n, BLOCK=block)
        square_kernel[grid](c, c2, n, BLOCK=block)
        add_kernel[grid](s2, c2, y, n, BLOCK=block)
    return y


# ---- (b) one fused kernel ---------------------------------------------------------------------------------

# One range reduction for both sin and cos (the ``shared=True`` variant). j = rint(x * 2/pi), r = x - j*pi/2 in
# three parts (Cody-Waite: each part has trailing zero bits, so j * part is exact for the |x| below
# SHARED_MAX_ABS), then minimax polynomials for sin and cos on |r| <= pi/4 and the quadrant j mod 4 picks and
# signs them. Constants: Cephes ``sinf.c``/``cosf.c`` (S. L. Moshier), with pi/4 split as DP1..DP3 doubled to
# pi/2. Blocks holding any |x| > SHARED_MAX_ABS (or inf) take tl.sin/tl.cos instead, which reduce large
# arguments exactly (Payne-Hanek).
SHARED_MAX_ABS = 8192.0


@triton.jit
def _sincos_shared(x):
    """(sin x, cos x) of fp32 x with |x| <= SHARED_MAX_ABS, one reduction for both."""
    j = tl.floor(x * 0.6366197723675814 + 0.5)  # nearest multiple of pi/2
    r = tl.fma(j, -1.5703125, x)  # fused multiply-add: j * part unrounded
    r = tl.fma(j, -4.837512969970703125e-4, r)
    r = tl.fma(j, -7.54978995489188216e-8, r)
    z = r * r
    sin_r = ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r
    cos_r = ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z - 0.5 * z + 1.0
    q = j.to(tl.int32) & 3  # quadrant; & 3 is mod 4 for negatives too
    s = tl.where((q & 1) == 0, sin_r, cos_r)  # q: 0 -> (s, c), 1 -> (c, -s),
    c = tl.where((q & 1) == 0, cos_r, sin_r)  #    2 -> (-s, -c), 3 -> (-c, s)
    s = tl.where(q >= 2, -s, s)
    c = tl.where((q == 1) | (q == 2), -c, c)
    return s, c


@triton.jit
def _sin_cos(y, FAST: tl.constexpr, SHARED: tl.constexpr):
    """(sin y, cos y) of an fp32 block: libdevice's approximations (FAST), one shared range reduction (SHARED,
    tl.sin/tl.cos for a block with any |y| > SHARED_MAX_ABS), or tl.sin and tl.cos."""
    if FAST:
        s = libdevice.fast_sinf(y)
        c = libdevice.fast_cosf(y)
    elif SHARED:
        if tl.max(tl.abs(y), axis=0) <= 8192.0:  # SHARED_MAX_ABS; NaN compares false: tl.sin/tl.cos give NaN
            s, c = _sincos_shared(y)
        else:
            s = tl.sin(y)
            c = tl.cos(y)
    else:
        s = tl.sin(y)
        c = tl.cos(y)
    return s, c


@triton.jit
def sincos_kernel(
    x_ptr, y_ptr, n, BLOCK: tl.constexpr, FAST: tl.constexpr, REPEAT: tl.constexpr, SHARED: tl.constexpr = False
):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)  # stays in registers from here to the store
    for _ in tl.static_range(REPEAT):  # REPEAT > 1 only to grow the fused work (the resource-pressure study)
        s, c = _sin_cos(y, FAST=FAST, SHARED=SHARED)
        y = s * s + c * c
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def sin_cos_parts_kernel(x_ptr, s_ptr, c_ptr, n, BLOCK: tl.constexpr, SHARED: tl.constexpr):
    """sin x and cos x written separately (the squares' sum hides a swapped or wrongly signed pair): for tests
    and the notebook's check of the shared range reduction."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    s, c = _sin_cos(x, FAST=False, SHARED=SHARED)
    tl.store(s_ptr + offs, s, mask=mask)
    tl.store(c_ptr + offs, c, mask=mask)


def sin_cos_parts(x: torch.Tensor, shared: bool = True, block: int = 1024):
    """(sin x, cos x) in fp32 from the fused kernel's sine/cosine code (``shared``: one range reduction;
    else tl.sin/tl.cos). x: contiguous fp32 on gpulab.DEVICE. Raises TypeError/ValueError naming the argument."""
    check_tensor("x", x, dtypes=(torch.float32,), torch_op="torch.sin and torch.cos")
    check_block("block", block)
    s, c = torch.empty_like(x), torch.empty_like(x)
    if x.numel():
        sin_cos_parts_kernel[(triton.cdiv(x.numel(), block),)](x, s, c, x.numel(), BLOCK=block, SHARED=bool(shared))
    return s, c


TUNE_MIN_N = 2**16  # below this n: no autotuning, the first config (keeps small launches and tests quick)
_LAST: list = [None]  # the config of the last launch that took the autotuner's shape (``best_config``)


def _launch_fused(x, y, config, fast: bool, repeat: int, shared: bool):
    """One launch of the fused kernel at ``config`` (a ``triton.Config``); returns the compiled kernel on a GPU."""
    n = x.numel()
    return sincos_kernel[(triton.cdiv(n, config.kwargs["BLOCK"]),)](
        x, y, n, FAST=fast, REPEAT=repeat, SHARED=shared, **config.all_kwargs()
    )


def _scratch_run(x, fast: bool, repeat: int, shared: bool):
    """``run(config)`` for the autotuner: one launch into a scratch output."""
    y = torch.empty_like(x)
    return lambda cfg: _launch_fused(x, y, cfg, fast, repeat, shared)


def _tuned(x, fast: bool, repeat: int, shared: bool):
    """The autotuner's config for x's dtype, n's power-of-two bucket, FAST, REPEAT and SHARED (GPU only):
    ``AUTOTUNE_CONFIGS[0]`` below TUNE_MIN_N, else ``_autotune.pick`` (a stored choice, or every candidate timed
    into a scratch output)."""
    n = x.numel()
    if n < TUNE_MIN_N:
        config = AUTOTUNE_CONFIGS[0]
    else:
        key = ("sincos", x.dtype, 1 << (n - 1).bit_length(), fast, repeat, shared)
        run = lambda: _scratch_run(x, fast, repeat, shared)  # noqa: E731  (called only when timing)
        config = _autotune.pick(key, AUTOTUNE_CONFIGS, run, what=f"sincos config for n = {n}")
    _LAST[0] = config
    return config


def _check_fused_args(x, block, num_warps, repeat) -> None:
    check_tensor("x", x, dtypes=DTYPES, torch_op="torch.sin(x)**2 + torch.cos(x)**2")
    if block is not None:
        check_block("block", block)
    if num_warps is not None and (isinstance(num_warps, bool) or num_warps not in (1, 2, 4, 8, 16, 32)):
        raise ValueError(f"num_warps must be one of 1, 2, 4, 8, 16, 32, got {num_warps!r}")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or not 1 <= repeat <= 64:
        raise ValueError(f"repeat must be an int in [1, 64], got {repeat!r}")


def sincos_launch(
    x: torch.Tensor,
    fast: bool = False,
    block: int | None = None,
    num_warps: int | None = None,
    repeat: int = 1,
    shared: bool = False,
):
    """Launch the fused kernel; returns ``(y, compiled)``. ``compiled`` is the launch's compiled kernel on a
    GPU (``.n_regs``, ``.n_spills``: see gpulab.models.fusion.kernel_resources), None in the interpreter.

    ``block=None`` on a GPU autotunes over ``AUTOTUNE_CONFIGS`` (``_tuned``); a given ``block`` (and
    ``num_warps``, Triton's default 4 if None) launches that shape exactly, as a naive kernel would. In the
    interpreter ``block=None`` means ``INTERPRETER_BLOCK``. ``repeat`` applies y <- sin(y)^2 + cos(y)^2 that
    many times (1 is the lesson's function). ``shared=True`` computes sin and cos from one range reduction
    (``_sincos_shared``; ignored when ``fast`` runs).
    """
    _check_fused_args(x, block, num_warps, repeat)
    fast = bool(fast) and FAST_MATH_AVAILABLE
    y = torch.empty_like(x)
    n = x.numel()
    if not n:
        return y, None
    if block is None and gpulab.ON_GPU:
        compiled = _launch_fused(x, y, _tuned(x, fast, repeat, bool(shared)), fast, repeat, bool(shared))
    else:
        block = block or INTERPRETER_BLOCK
        extra = {} if num_warps is None else {"num_warps": num_warps}
        compiled = sincos_kernel[(triton.cdiv(n, block),)](
            x, y, n, BLOCK=block, FAST=fast, REPEAT=repeat, SHARED=bool(shared), **extra
        )
    return y, (compiled if gpulab.ON_GPU else None)


def sincos(
    x: torch.Tensor,
    fast: bool = False,
    block: int | None = None,
    num_warps: int | None = None,
    repeat: int = 1,
    shared: bool = False,
) -> torch.Tensor:
    """sin(x)^2 + cos(x)^2 in one fused kernel: read x, compute in fp32 registers, write y (2n transfers,
    8n bytes in fp32). x: contiguous fp32/fp16/bf16 on gpulab.DEVICE, any shape; returns a new tensor of x's
    dtype. Raises TypeError/ValueError naming the bad argument. See ``sincos_launch`` for the options."""
    return sincos_launch(x, fast=fast, block=block, num_warps=num_warps, repeat=repeat, shared=shared)[0]


def best_config():
    """The config (a ``triton.Config``) of the last launch that took the autotuner's shape (``block=None`` on a GPU:
    tuned, stored, or ``AUTOTUNE_CONFIGS[0]`` below TUNE_MIN_N), or None (interpreter, or no such launch yet)."""
    return _LAST[0]


# ---- (c) torch eager, and the float64 reference --------------------------------------------------------------


def sincos_eager(x: torch.Tensor) -> torch.Tensor:
    """torch eager: five kernels (sin, cos, two squares, add), each intermediate in x's dtype in memory."""
    return torch.sin(x) ** 2 + torch.cos(x) ** 2


def sincos_ref(x: torch.Tensor, repeat: int = 1) -> torch.Tensor:
    """The torch reference, in float64. Close to 1, not necessarily exactly 1: compare with a tolerance."""
    y = x.double()
    for _ in range(repeat):
        y = torch.sin(y) ** 2 + torch.cos(y) ** 2
    return y
