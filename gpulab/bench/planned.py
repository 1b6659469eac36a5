"""What a suite runs on the GPU gpulab plans for (``gpulab.core.plan``): the sweep points that fit its memory, and
the skipped ones as records that say why (``Plan.skip_reason``), so that figures and reports show them as out
of memory instead of leaving them out.

Each suite's ``choices(p)`` is a pure function of a ``plan.Plan`` built from these helpers; its ``run`` calls
``choices(plan.current())``, and the tests call it for a T4, an L4, an A100 and an H200 on a CPU.
"""

from __future__ import annotations

from ..core import plan as _plan


def split(p: _plan.Plan, points, nbytes, key: str = "n") -> tuple[list, list[dict]]:
    """``(kept, skipped)``: the points whose ``nbytes(point)`` (bytes the point allocates) fit on ``p``, in their
    order, and one record ``{key: point, "skipped": p.skip_reason(...)}`` per point that does not."""
    kept, skipped = p.sizes_that_fit(points, nbytes)
    return kept, [{key: s, "skipped": p.skip_reason(nbytes(s))} for s in skipped]


def dtypes_for(p: _plan.Plan, wanted) -> tuple[str, ...]:
    """``p.dtype(d)`` for each of ``wanted``, in order, each once: ("bf16", "fp16") is ("fp16",) on a T4."""
    out = []
    for d in wanted:
        got = p.dtype(d)
        if got not in out:
            out.append(got)
    return tuple(out)
