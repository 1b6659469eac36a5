"""The compile step of ``gpulab.measure.trace``: one traced kernel compiled ahead of time for a GPU target, in a process
of its own. Run as a script, never imported by gpulab (it imports nothing of gpulab: a worker that imported gpulab
would set ``TRITON_INTERPRET=1`` on a machine without a GPU, and every kernel would be built for the interpreter):

    python gpulab/measure/trace_compile.py JOB.json OUT.json

JOB.json holds ``source`` (a module's text: the kernel, the ``@triton.jit`` helpers it calls, the names it reads),
``kernel`` (the function's name in it), ``signature``, ``constexprs`` and ``attrs`` (``triton.compile``'s, keyed by
parameter name; attrs as ``{name: [["tt.divisibility", 16]]}``), ``cc`` (75 .. 90), ``num_warps``, ``num_stages``.
OUT.json gets ``ttgir`` and ``ptx`` (the compiled text, with source locations), ``regs`` (ptxas's report),
``spill_bytes``, ``smem`` (shared memory per block, bytes), or ``error`` (one line: what failed). It exits 0 either
way; a non-zero exit means the worker itself broke.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import sys
import tempfile
from pathlib import Path

_REGS = re.compile(r"Used (\d+) registers")
_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def _load(source: str, folder: Path):
    """The job's module, written to ``folder`` and imported (``@triton.jit`` reads a function's source from its
    file)."""
    path = folder / "gpulab_traced_kernel.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("gpulab_traced_kernel", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod, path


def _one_line(e: BaseException) -> str:
    """A compile error in one line: the innermost error of the chain (a helper's, not the call site's), where it is
    (Triton's front end writes "at L:C:", the function's source, a caret, then the message) and its message."""
    chain = [e]
    while (chain[-1].__cause__ or chain[-1].__context__) is not None and len(chain) < 20:
        chain.append(chain[-1].__cause__ or chain[-1].__context__)
    where = ""
    for c in reversed(chain):  # the innermost located error: "at L:C:" then "def name(...)"
        lines = [ln.strip() for ln in str(c).splitlines() if ln.strip()]
        if len(lines) > 1 and lines[0].startswith("at ") and lines[1].startswith("def "):
            where = f" in {lines[1][4:].split('(')[0]}, line {lines[0][3:].split(':')[0]}"
            break
    inner = chain[-1]
    lines = [ln.strip() for ln in str(inner).splitlines() if ln.strip() and ln.strip() != "^"]
    message = lines[-1] if lines and lines[0].startswith("at ") else (lines[0] if lines else "")
    return f"{type(inner).__name__}{where}: {message}"[:300]


def compile_job(job: dict) -> dict:
    """Compile ``job`` (module docstring); returns OUT.json's dict."""
    os.environ.pop("TRITON_INTERPRET", None)
    os.environ["TRITON_DUMP_PTXAS_LOG"] = "1"
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    import triton  # after TRITON_INTERPRET is cleared: kernels are built for a GPU
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    with tempfile.TemporaryDirectory(prefix="gpulab-trace-") as tmp:
        try:
            mod, path = _load(job["source"], Path(tmp))
            fn = getattr(mod, job["kernel"])
            names = [p.name for p in fn.params]
            signature = {n: job["signature"][n] for n in names}
            constexprs = {(names.index(n),): v for n, v in job["constexprs"].items()}
            attrs = {(names.index(n),): v for n, v in job["attrs"].items()}
        except Exception as e:  # noqa: BLE001  (the parent falls back to the compiler's default layout)
            return {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]}
        log = io.StringIO()
        try:
            with contextlib.redirect_stdout(log):
                k = triton.compile(
                    ASTSource(fn, signature, constexprs=constexprs, attrs=attrs),
                    target=GPUTarget("cuda", job["cc"], 32),
                    options={"num_warps": job["num_warps"], "num_stages": job["num_stages"]},
                )
        except Exception as e:  # noqa: BLE001  (as above)
            return {"error": _one_line(e)}
        regs, spills = _REGS.search(log.getvalue()), _SPILLS.search(log.getvalue())
        return {
            "ttgir": k.asm.get("ttgir", ""),
            "ptx": k.asm.get("ptx", ""),
            "path": str(path),
            "regs": int(regs.group(1)) if regs else None,
            "spill_bytes": int(spills.group(1)) + int(spills.group(2)) if spills else None,
            "smem": int(k.metadata.shared),
            "triton": triton.__version__,
        }


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[0]).read_text())
    Path(argv[1]).write_text(json.dumps(compile_job(job)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
