"""Count the SASS instructions a thread of lesson 04's fused sin^2 + cos^2 kernel issues per element.

    python tools/count_sass.py [--write]

Compiles ``gpulab.kernels.sincos.sincos_kernel`` ahead of time for compute capability 9.0 (H100, H200), with no
GPU: ``triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32))``, as ``gpulab.measure.targets`` does, for its
three variants (precise ``tl.sin``/``tl.cos``, one shared range reduction, the fast approximations) at a few
launch shapes; disassembles each cubin with the ``cuobjdump`` that Triton ships; and walks the listing along
the path a thread takes when each of its elements is in range and small (``|x|`` below the slow paths'
thresholds: 105615 for libdevice's precise reduction, 8192 for the shared one), counting every instruction it
issues (predicated-off ones included: a warp issues them). ``--write`` writes the counts, with this command,
Triton's and ptxas's versions, to ``gpulab/data/sass-sm90.json`` (atomically); without it they are printed.

The walk (``fast_path_count``): from the first instruction to an unpredicated ``EXIT``; an unconditional
``BRA`` is followed; a predicated forward ``BRA`` is taken when the instructions it skips hold the slow path
(a load from the constant table of the exact reduction, ``LDG.E.CONSTANT``, or a call), else it falls through
(the masked load or store it guards runs: an element in range); a predicated ``EXIT`` is not taken. A backward
branch (a loop) on the path is an error: the fast path of this kernel is straight-line code.

An SM's four schedulers each issue one warp instruction per clock: 128 thread-instructions per clock per SM,
the same as its 128 FP32 lanes (CUDA C++ Programming Guide, "Hardware Multithreading" and the per-SM
arithmetic throughput table for 9.0). So instructions per element, of every kind, are what lesson 01's issue
budget (``gpulab.models.roofline.instructions_per_element``) is spent on.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "gpulab" / "data" / "sass-sm90.json"
COMMAND = "python tools/count_sass.py --write"
# (variant, SHARED, FAST) and the launch shapes (BLOCK, num_warps): one, two and eight elements per thread; 512
# with 2 and 4 warps are the recorded autotuner's choices (gpulab/data/reference-h200.json, lesson04 best_config*).
VARIANTS = (("precise", False, False), ("shared", True, False), ("fast", False, True))
SHAPES = ((128, 4), (256, 4), (1024, 4), (512, 2), (512, 4))

_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")
_SLOW = ("LDG.E.CONSTANT", "CALL")


def parse_sass(text: str) -> list[tuple[int, str | None, str, str]]:
    """The instructions of a ``cuobjdump -sass`` listing: ``(address, predicate or None, opcode, operands)``.
    Raises ValueError when the listing holds no instruction."""
    out = []
    for m in _LINE.finditer(text):
        pred = m.group(2).strip() if m.group(2) else None
        out.append((int(m.group(1), 16), pred, m.group(3), m.group(4).strip()))
    if not out:
        raise ValueError("text holds no SASS instruction (expected `cuobjdump -sass` output)")
    return out


def fast_path_count(instrs) -> dict:
    """Instructions issued along the fast path of ``instrs`` (``parse_sass``'s list; the rules are the module
    docstring's): ``{"total": int, "by_opcode": {opcode: count}}``, opcodes without their modifiers. Raises
    ValueError on a backward branch on the path, a branch to an address not in the listing, or no ``EXIT``."""
    at = {a: i for i, (a, *_) in enumerate(instrs)}
    i, counts = 0, {}
    while i < len(instrs):
        addr, pred, op, args = instrs[i]
        base = op.split(".")[0]
        counts[base] = counts.get(base, 0) + 1
        if base == "EXIT" and pred is None:
            return {"total": sum(counts.values()), "by_opcode": dict(sorted(counts.items()))}
        if base == "BRA":
            target = int(args.split()[-1], 16)
            if target not in at:
                raise ValueError(f"BRA at {addr:#x} to {target:#x}: no instruction there")
            j = at[target]
            if j <= i and pred is not None:
                raise ValueError(f"backward branch at {addr:#x}: a loop on the fast path")
            skipped = instrs[i + 1 : j]
            if pred is None or any(s[2].startswith(_SLOW) for s in skipped):
                i = j
                continue
        i += 1
    raise ValueError("the path ran off the listing without an unpredicated EXIT")


def _compile(shared: bool, fast: bool, block: int, num_warps: int, cubin: Path) -> None:
    """The kernel compiled for sm_90 into ``cubin``, in this process (``_real_triton`` first)."""
    _real_triton()
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from gpulab.kernels import sincos as S

    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}
    sig.update({k: "constexpr" for k in ("BLOCK", "FAST", "REPEAT", "SHARED")})
    constexprs = {"BLOCK": block, "FAST": fast, "REPEAT": 1, "SHARED": shared}
    aligned = {(i,): [["tt.divisibility", 16]] for i in range(3)}  # as the JIT specializes torch's buffers, n % 16 == 0
    with contextlib.redirect_stdout(io.StringIO()):
        k = triton.compile(
            ASTSource(S.sincos_kernel, sig, constexprs=constexprs, attrs=aligned),
            target=GPUTarget("cuda", 90, 32),
            options={"num_warps": num_warps},
        )
    cubin.write_bytes(k.asm["cubin"])


def _real_triton() -> None:
    """Import gpulab (which sets TRITON_INTERPRET on a CPU machine), then clear TRITON_INTERPRET before any kernel
    module is imported, so that its kernels are real ``@triton.jit`` functions that compile."""
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # the default the GPU runs use (no warning)
    import gpulab  # noqa: F401

    os.environ.pop("TRITON_INTERPRET", None)


def _tool(name: str) -> str:
    import triton

    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name)


def count_all() -> dict:
    """Every variant and shape compiled, disassembled and walked: the record ``--write`` stores."""
    _real_triton()
    import triton

    rows = []
    with tempfile.TemporaryDirectory(prefix="gpulab-sass-") as tmp:
        os.environ["TRITON_CACHE_DIR"] = str(Path(tmp) / "triton")
        for variant, shared, fast in VARIANTS:
            for block, warps in SHAPES:
                cubin = Path(tmp) / f"{variant}-{block}-{warps}.cubin"
                _compile(shared, fast, block, warps, cubin)
                sass = subprocess.run(
                    [_tool("cuobjdump"), "-sass", str(cubin)], capture_output=True, text=True, check=True
                )
                instrs = parse_sass(sass.stdout)
                path = fast_path_count(instrs)
                per_thread = max(1, block // (32 * warps))
                rows.append(
                    {
                        "variant": variant,
                        "block": block,
                        "num_warps": warps,
                        "elements_per_thread": per_thread,
                        "static_instructions": len(instrs),
                        "fast_path_instructions": path["total"],
                        "per_element": path["total"] / per_thread,
                        "by_opcode": path["by_opcode"],
                    }
                )
    ptxas = subprocess.run([_tool("ptxas"), "--version"], capture_output=True, text=True, check=True).stdout
    return {
        "what": "SASS instructions a thread issues per element on the fast path of sincos_kernel (fp32, REPEAT 1)",
        "target": "sm_90 (compute capability 9.0: H100, H200)",
        "command": COMMAND,
        "triton": triton.__version__,
        "ptxas": ptxas.strip().splitlines()[-1],
        "rows": rows,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"write {OUT.relative_to(ROOT)}")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    record = count_all()
    for r in record["rows"]:
        print(
            f"{r['variant']:8} BLOCK {r['block']:5} w{r['num_warps']}: {r['elements_per_thread']} per thread, "
            f"{r['fast_path_instructions']} on the fast path = {r['per_element']:.1f} per element"
        )
    if args.write:
        from gpulab.measure.device import write_json_atomic

        write_json_atomic(OUT, record)
        print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
