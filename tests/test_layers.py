"""The import graph of gpulab: a lower layer never imports a higher one, and no module imports itself back
through others. Every import counts, at module level or inside a function (a lazy import is still an arrow).

The folders are the layers, bottom up (docs/package.md lists the modules of each, and a test below holds it to them):
0 ``gpulab/core``: the mode and the switches, the GPU planned for (plan, with the hardware table it reads), the
  dtype table, validators, tolerances, the reference data, processes, and timing (time_ms, CUDA graphs: the
  autotuners of layer 2 time their candidates with it); ``gpulab/__init__.py`` picks the mode with them
1 ``gpulab/models``: pure functions and dataclasses (no timing, no widgets, no CUDA calls)
2 ``gpulab/kernels``: Triton kernels with launchers, float64 references and hand counts
3 ``gpulab/measure``: the device profile, hardware counters, live-or-recorded results, ahead-of-time compiles
4 ``gpulab/bench`` (suites), ``gpulab/figures`` (figures and widgets), ``gpulab/exercises``, ``gpulab/capstone``:
  what the notebooks call

Inside layer 4 the packages stand side by side (``APART``): suites measure and models interpret, so a figure never
imports a suite (what it needs to read a record lives in the models: ``memory.fit_record``,
``waves.sweep_rates``, ...); an exercise never imports a suite, and a suite never times an exercise's hidden
solution (the kernels it times live in ``gpulab/kernels``).
"""

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "gpulab"

#: Layer of each folder under gpulab/; the package's ``__init__`` sits with the core.
LAYERS = {"core": 0, "models": 1, "kernels": 2, "measure": 3, "bench": 4, "figures": 4, "exercises": 4, "capstone": 4}


def layer(mod: str) -> int:
    """The layer of module ``mod`` (e.g. ``gpulab.models.waves`` -> 1), from its folder. Raises KeyError for a
    module outside every layer's folder, so that a new flat module must be given a layer."""
    parts = mod.split(".")
    if parts == ["gpulab"]:
        return 0
    return LAYERS[parts[1]]


PACKAGE_DOC = ROOT.parent / "docs" / "package.md"


def documented() -> dict[str, tuple[int, set[str]]]:
    """docs/package.md's sections ``## `gpulab/<folder>/` (layer N)``: folder -> (N, the ``x.py`` its table names)."""
    out = {}
    for section in PACKAGE_DOC.read_text().split("\n## ")[1:]:
        head, _, body = section.partition("\n")
        m = re.fullmatch(r"`gpulab/(\w+)/` \(layer (\d)\)", head.strip())
        if m:
            out[m[1]] = (int(m[2]), set(re.findall(r"`(\w+\.py)`", body)))
    return out


def test_docs_package_lists_every_module_under_its_folder_and_layer():
    doc = documented()
    assert sorted(doc) == sorted(LAYERS), (
        f"docs/package.md has sections for {sorted(doc)}, the layers are {sorted(LAYERS)}"
    )
    for folder, (n, names) in doc.items():
        assert n == LAYERS[folder], (
            f"docs/package.md puts gpulab/{folder} in layer {n}, tests/test_layers.py in {LAYERS[folder]}"
        )
        files = {p.name for p in (ROOT / folder).glob("*.py")} - {"__init__.py"}
        assert names == files, (
            f"docs/package.md's gpulab/{folder} table: no row for {sorted(files - names)}; "
            f"rows for no module {sorted(names - files)}"
        )


def test_every_module_lies_in_a_layers_folder():
    flat = sorted(p.name for p in ROOT.glob("*.py") if p.name != "__init__.py")
    assert not flat, f"modules outside the layer folders of gpulab/ ({', '.join(LAYERS)}): {flat}"
    folders = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert folders == sorted(LAYERS), f"packages under gpulab/ {folders} differ from the layers {sorted(LAYERS)}"


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


#: Inside layer 4: modules under the first name never import those under the second.
APART = [
    ("gpulab.figures", "gpulab.bench"),
    ("gpulab.exercises", "gpulab.bench"),
    ("gpulab.bench", "gpulab.exercises"),
    ("gpulab.figures", "gpulab.exercises"),
]


def _under(mod: str, pkg: str) -> bool:
    return mod == pkg or mod.startswith(pkg + ".")


@pytest.mark.parametrize("low, high", APART)
def test_side_by_side_packages_never_import_each_other(low, high):
    bad = sorted(f"{m} -> {t}" for m, ts in GRAPH.items() if _under(m, low) for t in ts if _under(t, high))
    assert not bad, f"{low} imports {high} (they stand side by side in layer 4): " + ", ".join(bad)


def late_imports(path: pathlib.Path) -> list[str]:
    """Imports inside a function of ``path`` whose line carries no comment saying why they are there."""
    lines = path.read_text().splitlines()
    out = []
    for fn in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and "#" not in lines[node.lineno - 1]:
                    out.append(f"{path.name}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return out


@pytest.mark.parametrize("pkg", ["bench", "figures"])
def test_suites_and_figures_import_at_the_top(pkg):
    late = [x for p in sorted((ROOT / pkg).glob("*.py")) if p.name != "__main__.py" for x in late_imports(p)]
    assert not late, f"gpulab/{pkg}: imports inside functions without a comment saying why: " + "; ".join(late)


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


def test_the_checker_sees_a_figure_importing_a_suite(tmp_path):
    fake = tmp_path / "lesson07.py"
    fake.write_text("from ..bench import lesson07\n")
    found = imports("gpulab.figures.lesson07", fake, set(modules()))
    assert found == {"gpulab.bench.lesson07"} and any(_under(t, "gpulab.bench") for t in found)


def test_a_late_import_needs_its_reason(tmp_path):
    fake = tmp_path / "x.py"
    fake.write_text("def f():\n    import torch\n\n\ndef g():\n    import triton  # only on a GPU\n")
    assert late_imports(fake) == ["x.py:2: import torch"]


def test_the_checker_sees_an_upward_arrow(tmp_path):
    fake = tmp_path / "x.py"
    fake.write_text("def f():\n    from ..figures import widgets\n")
    found = imports("gpulab.models.roofline", fake, set(modules()))
    assert found == {"gpulab.figures.widgets"} and layer("gpulab.figures.widgets") > layer("gpulab.models.roofline")
