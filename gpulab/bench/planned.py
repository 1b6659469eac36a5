"""What a suite runs on the GPU gpulab plans for (``gpulab.plan``): the sweep points that fit its memory, and
the skipped ones as records that say why, so that figures and reports show them as out of memory instead of
leaving them out.

Each suite's ``choices(p)`` is a pure function of a ``plan.Plan`` built from these helpers; its ``run`` calls
``choices(plan.current())``, and the tests call it for a T4, an L4, an A100 and an H200 on a CPU.
"""

from __future__ import annotations

from .. import plan as _plan


def budget_bytes(p: _plan.Plan) -> int:
    """Bytes of buffers a sweep may allocate on ``p``'s GPU (``plan.MEMORY_FRACTION`` of its memory)."""
    return int(_plan.MEMORY_FRACTION * p.memory_bytes)


def skip_reason(p: _plan.Plan, nbytes: int) -> str:
    """One line: 'needs 8.6 GB; the T4 plan allows 8.0 GB (half of its 16 GB)'."""
    return (
        f"needs {nbytes / 1e9:.1f} GB; the {p.gpu.name} plan allows {budget_bytes(p) / 1e9:.1f} GB "
        f"({_plan.MEMORY_FRACTION:.0%} of its {p.gpu.hbm_gb:g} GB)"
    )


def split(p: _plan.Plan, points, nbytes, key: str = "n") -> tuple[list, list[dict]]:
    """``(kept, skipped)``: the points whose ``nbytes(point)`` (bytes the point allocates) fit on ``p``, in their
    order, and one record ``{key: point, "skipped": skip_reason(...)}`` per point that does not."""
    kept, skipped = p.sizes_that_fit(points, nbytes)
    return kept, [{key: s, "skipped": skip_reason(p, nbytes(s))} for s in skipped]


def feature_skip(p: _plan.Plan, feature: str) -> str | None:
    """None where ``p``'s GPU has ``feature`` (a key of ``plan.FEATURES``), else one line: 'skipped on the T4: ...'."""
    if _plan.has(p.gpu, feature):
        return None
    return f"skipped on the {p.gpu.name}: {_plan.FEATURES[feature].why}"


def dtypes_for(p: _plan.Plan, wanted) -> tuple[str, ...]:
    """``p.dtype(d)`` for each of ``wanted``, in order, each once: ("bf16", "fp16") is ("fp16",) on a T4."""
    out = []
    for d in wanted:
        got = p.dtype(d)
        if got not in out:
            out.append(got)
    return tuple(out)
