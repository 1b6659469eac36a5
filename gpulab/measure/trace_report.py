"""The table of a trace (``gpulab.measure.trace``): a learner's kernel's counts beside the model and beside
gpulab's kernel as Nsight Compute counted it on a GPU (the recordings of ``gpulab.measure.counter_cases``), in at
most 15 lines. ``table(t, model=..., recorded=..., show=...)`` reads a ``trace.Trace`` (``t`` below, in every
function); ``recording(case)`` finds a counter case's record; ``trace.report`` traces a call and prints its table
(``trace`` imports both from here, so both are importable from there). Each quantity is named as in
``counter_cases`` where it counts the same thing (``_quantities``: its unit, its value in a trace, its value in a
recording's metrics).
"""

from __future__ import annotations

import re

from ..models.sectors import SECTOR_BYTES
from ..models.simt import WARP_SIZE
from .counters import byte_text

THREADS_PER_INST = WARP_SIZE  # every lane of a Triton warp runs every instruction (masks predicate)


def recording(case: str) -> tuple[dict | None, str]:
    """``(record, provenance line)`` of the counter case ``case`` (``gpulab.measure.counter_cases``) from the first
    reference file that records it (``gpulab.core.reference``), or ``(None, why there is none)``."""
    from ..core import reference

    for gpu in reference.available():
        rec = reference.load(gpu).get("counters", {}).get("cases", {}).get(case)
        if rec is not None:
            p = rec.get("provenance", {})
            return rec, f"{p.get('gpu', '?')}, ncu, Triton {p.get('triton', '?')}, {p.get('date', '?')}"
    return None, f"no recording of the {case!r} counters"


def _first(t):
    return max(t.launches, key=lambda lc: lc.programs)


def _where_sites(t) -> list:
    return [s for lc in t.launches for s in lc.sites if s.kind == "where"]


def _where_lanes(t) -> float | None:
    ws = _where_sites(t)
    n = sum(s.executions for s in ws)
    return None if not n else WARP_SIZE * sum(s.true_share * s.executions for s in ws) / n


def _efficiency(t, kind: str) -> float | None:
    req, moved = t.total(kind, "requested"), t.total(kind, "moved")
    return req / moved if req is not None and moved else None


#: What ``report`` can show: name -> (unit, the traced value of a Trace, the recorded value from a range's metrics).
#: Names follow ``gpulab.measure.counter_cases``' quantities where they count the same thing.
def _quantities():
    from . import ncu

    def ratio(a, b):
        return lambda m: None if m.get(a) is None or not m.get(b) else m[a] / m[b]

    return {
        "ld sectors/request": ("sector", lambda t: t.per_request("load"), ratio(ncu.LD_SECTORS, ncu.LD_REQUESTS)),
        "st sectors/request": ("sector", lambda t: t.per_request("store"), ratio(ncu.ST_SECTORS, ncu.ST_REQUESTS)),
        "ld sectors/32 el": ("sector", lambda t: _per32(t, "load"), lambda m: None),
        "st sectors/32 el": ("sector", lambda t: _per32(t, "store"), lambda m: None),
        "ld efficiency": ("%", lambda t: _efficiency(t, "load"), lambda m: None),
        "st efficiency": ("%", lambda t: _efficiency(t, "store"), lambda m: None),
        "lanes on/mem inst": ("lane", lambda t: _lanes(t), lambda m: None),
        "threads/inst": ("thread", lambda t: float(THREADS_PER_INST), lambda m: m.get(ncu.THREADS_PER_INST)),
        "where: lanes on first side": ("lane", _where_lanes, lambda m: None),
        "loop steps/program": (
            "step",
            lambda t: max((s.per_program for s in _where_sites(t)), default=None),
            lambda m: None,
        ),
        "programs": ("", lambda t: float(sum(lc.programs for lc in t.launches)), lambda m: None),
        "waves": (
            "",
            lambda t: None if _first(t).wave_plan is None else float(_first(t).wave_plan.waves),
            lambda m: None,
        ),
        "last wave fill": (
            "fill",
            lambda t: (
                None
                if _first(t).wave_plan is None
                else (_first(t).wave_plan.last_wave_tiles, _first(t).wave_plan.slots)
            ),
            lambda m: None,
        ),
        "work balance": ("%", lambda t: min(lc.balance for lc in t.launches), lambda m: None),
        "programs/SM": (
            "",
            lambda t: None if _first(t).residency is None else float(_first(t).residency[0]),
            lambda m: None,
        ),
        "registers/thread": (
            "",
            lambda t: None if _first(t).regs is None else float(_first(t).regs),
            lambda m: m.get(ncu.REGISTERS),
        ),
        "L2 read bytes": (
            "byte",
            lambda t: t.total("load", "moved"),
            lambda m: None if m.get(ncu.L2_READ_SECTORS) is None else m[ncu.L2_READ_SECTORS] * SECTOR_BYTES,
        ),
        "DRAM read bytes": ("byte", lambda t: t.dram("read"), lambda m: m.get(ncu.DRAM_READ)),
    }


def _per32(t, kind: str) -> float | None:
    """Sectors per 32 elements accessed by the ``kind`` sites: per request of the textbook's one-element lanes,
    whatever the layout (``gpulab.models.sectors.warp_request``'s count)."""
    sec = el = 0.0
    for lc in t.launches:
        for s in lc.sites:
            if s.kind == kind and s.modelled:
                sec, el = sec + s.sectors, el + s.requested / s.itemsize
    return sec * WARP_SIZE / el if el else None


def _lanes(t) -> float | None:
    on = n = 0.0
    for lc in t.launches:
        for s in lc.sites:
            if s.kind in ("load", "store") and s.modelled:
                on, n = on + s.lanes_on, n + s.instructions
    return on / n if n else None


def _fmt(v, unit: str = "") -> str:
    if v is None:
        return "-"
    if unit == "fill":
        return f"{v[0]}/{v[1]} slots ({v[0] / v[1]:.0%})"
    if isinstance(v, tuple):
        return f"{_fmt(v[0], unit)} .. {_fmt(v[1], unit)}"
    if unit == "byte":
        return byte_text(v)
    if unit == "%":
        return f"{v:.0%}"
    return f"{v:.3g}"


def _default_show(t) -> list:
    sites = [s for lc in t.launches for s in lc.sites]
    show = []
    if any(s.kind == "load" and s.modelled for s in sites):
        show += ["ld sectors/request"]
    if any(s.kind == "store" and s.modelled for s in sites):
        show += ["st sectors/request"]
    if any(s.kind in ("load", "store") and s.modelled for s in sites):
        show += ["lanes on/mem inst"]
    if any(not s.modelled for s in sites):
        show += ["L2 read bytes"]
    if _where_sites(t):
        show += ["where: lanes on first side", "loop steps/program"]
    return show + ["waves", "last wave fill"]


def table(t, model: dict | None = None, recorded: tuple | None = None, show=None, record=None) -> str:
    """At most 15 lines: one row a quantity (``_quantities``), columns yours (the trace ``t``: traced on this
    machine, as the planned GPU would issue it), the model, and gpulab's (Nsight Compute on the GPU of the
    recording). ``model``: {quantity: value} (sectors, lanes, steps, waves; bytes at your size); ``recorded``:
    ``(case, range label)`` of ``gpulab.measure.counter_cases`` (e.g. ``("coalescing", "stride4")``); bytes there
    are shown as a multiple of that case's own model, since its size is not yours. ``record``: ``(case record,
    provenance line)`` to read instead of the stored recording (a case measured now, ``counters.measure``).
    ``show``: the quantities, in order (default: what the trace has, then the model's and the recording's)."""
    model = dict(model or {})
    quantities = _quantities()
    metrics, comparison, where = {}, [], ""
    if recorded is not None:
        case, label = recorded
        rec, where = record if record is not None else recording(case)
        if rec is not None and rec.get("rows"):
            from .counters import aggregate

            # gpulab's Triton kernels of the range: a torch or library kernel there (a C++ name) is not yours' kind
            triton_rows = [r for r in rec["rows"] if re.fullmatch(r"\w+", r.get("kernel", ""))]
            metrics = aggregate(triton_rows, f"gpulab:{case}:{label}")[0]
            comparison = [c for c in rec.get("comparison", []) if c.get("label") == label]
            where = f"gpulab's: {case} / {label} {'recorded on ' if record is None else ''}{where}"
    names = list(show) if show is not None else _default_show(t)
    from_record = [
        q
        for q in quantities
        if metrics
        and (
            quantities[q][2](metrics) is not None
            or (quantities[q][0] != "byte" and any(c["quantity"] == q for c in comparison))
        )
        and (quantities[q][0] != "byte" or any(c["quantity"] == q and c.get("model") for c in comparison))
    ]
    for k in list(model) + from_record:
        if k not in names and len(names) < 10:
            names.append(k)
    lc = _first(t)
    head = (
        f"your {', '.join(dict.fromkeys(x.kernel for x in t.launches))} ({lc.programs} programs x {lc.num_warps} "
        f"warps), traced on this machine as the {t.gpu} would issue it; layout {lc.layout_source}"
    )
    rows = [("", "yours", "model", "gpulab's")]
    for q in names[:10]:
        if q not in quantities:
            rows.append((q, "?", _fmt(model.get(q)), "-"))
            continue
        unit, get, rec_get = quantities[q]
        mine = get(t)
        theirs = rec_get(metrics) if metrics else None
        if theirs is None and unit != "byte":
            theirs = next((c["counter"] for c in comparison if c["quantity"] == q), None)
        if unit == "byte" and theirs is not None:
            row = next((c for c in comparison if c["quantity"] == q and c.get("model")), None)
            theirs_txt = f"{theirs / row['model']:.2f}x its model" if row else f"{_fmt(theirs, unit)} at its size"
        else:
            theirs_txt = _fmt(theirs, unit)
        rows.append((q, _fmt(mine, unit), _fmt(model.get(q), unit), theirs_txt))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [head] + ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    failed = next((x for x in t.launches if x.compile_error), None)
    if failed is not None:
        lines.append(f"  not compiled for sm_{failed.cc}: {failed.compile_error[:150]}")
    refused = [(k, w, why) for x in t.launches for k, w, why in x.refused]
    if refused:
        lines.append(
            f"  not modelled: {refused[0][2]} (line {refused[0][1][1]})"
            + (f" and {len(refused) - 1} more" if len(refused) > 1 else "")
        )
    if any(not s.modelled for x in t.launches for s in x.sites):
        lines.append("  tl.dot operands are copied to shared memory: their bytes are counted, not their requests")
    if where:
        lines.append(f"  {where}")
    return "\n".join(lines[:15])
