"""The import graph of gpulab: a lower layer never imports a higher one, and no module imports itself back
through others. Every import counts, at module level or inside a function (a lazy import is still an arrow).

Layers, bottom up (DESIGN.md, "The package, in layers"):
0 core: the mode and the switches, the GPU planned for (plan, with the hardware table it reads), the dtype
  table, validators, tolerances, the reference data, and timing (time_ms, CUDA graphs: the autotuners of
  layer 2 time their candidates with it)
1 models: pure functions and dataclasses (no timing, no widgets, no CUDA calls)
2 kernels: Triton kernels with launchers, float64 references and hand counts
3 measuring: the device profile, hardware counters
4 suites, figures, widgets, exercises, targets: what the notebooks call
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "gpulab"

CORE = {
    "gpulab",
    "gpulab.settings",
    "gpulab.dtypes",
    "gpulab.validate",
    "gpulab.tolerances",
    "gpulab.reference",
    "gpulab.timing",
    "gpulab.plan",
    "gpulab.hardware",
}
MODELS = {
    f"gpulab.{m}"
    for m in (
        "roofline",
        "simt",
        "sectors",
        "tiling",
        "waves",
        "fusion",
        "recompute",
        "attention",
        "online_softmax",
        "formats",
        "precision",
        "memory",
    )
}
MEASURING = {"gpulab.device", "gpulab.counters"}


def layer(mod: str) -> int:
    if mod in CORE:
        return 0
    if mod in MODELS or mod.startswith("gpulab.models"):
        return 1
    if mod.startswith("gpulab.kernels"):
        return 2
    if mod in MEASURING:
        return 3
    return 4  # bench, plots, widgets, figures, exercises, targets, capstone


def modules() -> dict[str, pathlib.Path]:
    out = {}
    for p in ROOT.rglob("*.py"):
        parts = list(p.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def imports(mod: str, path: pathlib.Path, known) -> set[str]:
    """gpulab modules that ``mod`` imports, resolved to the modules that exist."""
    pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for n in names:
            while n and n not in known:
                n = n.rpartition(".")[0]
            if n.startswith("gpulab") and n != mod:
                found.add(n)
    return found


GRAPH = {m: imports(m, p, set(modules())) for m, p in modules().items()}


@pytest.mark.parametrize("mod", sorted(GRAPH))
def test_no_upward_import(mod):
    up = sorted(t for t in GRAPH[mod] if layer(t) > layer(mod))
    assert not up, f"{mod} (layer {layer(mod)}) imports higher layers: " + ", ".join(f"{t} ({layer(t)})" for t in up)


def test_no_cycles():
    graph = {m: {t for t in ts if t != "gpulab"} for m, ts in GRAPH.items()}
    state, stack, cycles = {}, [], []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                cycles.append(stack[stack.index(t) :] + [t])
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_checker_sees_an_upward_arrow(tmp_path):
    fake = tmp_path / "x.py"
    fake.write_text("def f():\n    from . import widgets\n")
    assert imports("gpulab.roofline", fake, set(modules())) == {"gpulab.widgets"}
