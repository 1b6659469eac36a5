"""Regenerate tests/fixtures/compile_error_*.txt: the messages Triton's GPU compiler gives for the learner's
common compile-time mistakes, recorded ahead of time for compute capability 9.0 (``triton.compile`` with
``GPUTarget("cuda", 90, 32)`` needs no GPU). The interpreter raises other exceptions for the same mistakes, so
the checkers' GPU path (``gpulab.exercises.describe_error``) is tested against these recordings.

Run: ``python tests/compile_errors.py`` (from the project root). Each fixture holds ``repr``-free text: the
exception's type, then ``str(exc)``, then each ``__cause__`` the same way, separated by lines of ``---``.

``gpulab.measure.targets`` compiles ``sin_16_bit_kernel`` from here too (tests/test_compile_coverage.py): the one line it
reports for a kernel that only a GPU's compiler refuses ends with the message these fixtures record.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)  # real @triton.jit kernels: compiled, not interpreted
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # the default the GPU runs use (no warning)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"


@triton.jit
def sin_16_bit_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    s = tl.sin(x)  # fp16 or bf16: Triton's math functions take fp32 or fp64
    tl.store(out_ptr + offs, s * s, mask=mask)


@triton.jit
def exp_16_bit_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.exp(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)


@triton.jit
def arange_not_power_of_2_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 1.0, mask=offs < n)


@triton.jit
def dot_too_small_kernel(a_ptr, c_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs[:, None] * BLOCK + offs[None, :])
    tl.store(c_ptr + offs[:, None] * BLOCK + offs[None, :], tl.dot(a, a))


@triton.jit
def undefined_name_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, undefined_value, mask=offs < n)  # noqa: F821


# name -> (kernel, signature, constexprs)
CASES = {
    "sin_fp16": (sin_16_bit_kernel, {"x_ptr": "*fp16", "out_ptr": "*fp16", "n": "i32", "BLOCK": "constexpr"}, 128),
    "sin_bf16": (sin_16_bit_kernel, {"x_ptr": "*bf16", "out_ptr": "*bf16", "n": "i32", "BLOCK": "constexpr"}, 128),
    "exp_fp16": (exp_16_bit_kernel, {"x_ptr": "*fp16", "out_ptr": "*fp16", "n": "i32", "BLOCK": "constexpr"}, 128),
    "arange_100": (arange_not_power_of_2_kernel, {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, 100),
    "dot_8": (dot_too_small_kernel, {"a_ptr": "*fp16", "c_ptr": "*fp32", "BLOCK": "constexpr"}, 8),
    "undefined_name": (undefined_name_kernel, {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, 128),
}


def message(exc: BaseException) -> str:
    """The exception and its causes as the fixture stores them."""
    parts, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        parts.append(f"{type(exc).__name__}\n{exc}")
        exc = exc.__cause__ or exc.__context__
    return "\n---\n".join(parts) + "\n"


def record(name: str) -> str:
    """Compile case ``name`` for sm_90; returns its fixture text. Raises RuntimeError if it compiles."""
    kernel, signature, block = CASES[name]
    try:
        triton.compile(ASTSource(kernel, signature, constexprs={"BLOCK": block}), target=GPUTarget("cuda", 90, 32))
    except Exception as e:  # noqa: BLE001  (the error is what is recorded)
        return f"# triton {triton.__version__}, GPUTarget('cuda', 90, 32): {name}\n" + message(e)
    raise RuntimeError(f"{name} compiled: it no longer shows the mistake")


def main() -> int:
    FIXTURES.mkdir(exist_ok=True)
    for name in CASES:
        (FIXTURES / f"compile_error_{name}.txt").write_text(record(name))
        print(f"wrote compile_error_{name}.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
