"""A live-or-recorded result is read by name: every function of gpulab that returns one returns a ``live.Shown``,
and no code in gpulab, the tests, the tools or the notebooks unpacks such a result into a tuple (``data, where =
...`` swaps silently when the order changes; ``shown.data`` and ``shown.where`` cannot)."""

import ast
import json
import pathlib

import pytest

from gpulab.measure import live

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _returns_shown(fn: ast.FunctionDef) -> bool:
    return fn.returns is not None and ast.unparse(fn.returns).split(" | ")[0] in ("Shown", "live.Shown")


def definitions() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """{function name: the gpulab modules (last name) defining it to return a ``live.Shown``}, and the same for
    the functions of those names that return anything else (``ncu.profile``, ``ladder.recorded``)."""
    shown, other = {}, {}
    for p in (ROOT / "gpulab").rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.FunctionDef):
                (shown if _returns_shown(node) else other).setdefault(node.name, set()).add(p.stem)
    return shown, {k: v for k, v in other.items() if k in shown}


def sources():
    """(label, Python source) of every module of gpulab, tests and tools, and every notebook's code cell (its
    magic lines dropped)."""
    for folder in ("gpulab", "tests", "tools"):
        for p in sorted((ROOT / folder).rglob("*.py")):
            yield str(p.relative_to(ROOT)), p.read_text()
    for p in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for i, c in enumerate(json.loads(p.read_text())["cells"]):
            if c["cell_type"] == "code":
                src = "".join(c["source"])
                yield f"{p.name} cell {i}", "\n".join(ln for ln in src.splitlines() if ln.lstrip()[:1] not in "%!")


def unpacked(src: str, shown: dict[str, set[str]], other: dict[str, set[str]] | None = None) -> list[str]:
    """The assignments and loops of ``src`` that unpack a call of ``shown``'s functions into a tuple. A name that
    ``other`` also defines counts only where it is called on its ``shown`` module (``live.profile``, not
    ``ncu.profile``)."""
    try:
        tree = ast.parse(src)
    except SyntaxError:  # a notebook cell that is not Python alone (the Colab install cell's shell lines)
        return []
    out = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.For) else []
        value = node.value if isinstance(node, ast.Assign) else getattr(node, "iter", None)
        if not (any(isinstance(t, (ast.Tuple, ast.List)) for t in targets) and isinstance(value, ast.Call)):
            continue
        f = value.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
        on = ast.unparse(f.value).rsplit(".", 1)[-1] if isinstance(f, ast.Attribute) else None
        if name in shown and (name not in (other or {}) or on in shown[name]):
            out.append(f"line {node.lineno}: {ast.unparse(node).splitlines()[0][:100]}")
    return out


def test_the_results_notebooks_read_are_shown_by_their_functions():
    shown, _ = definitions()
    expected = {"recall", "measure_or_recall", "profile", "roofs", "build_now_or_recorded", "collectives"}
    expected |= {"multi_gpu", "launch_model_inputs", "recorded", "ceilings", "launch_us"}
    assert expected <= set(shown), sorted(expected - set(shown))


def test_no_result_is_unpacked_into_a_tuple():
    shown, other = definitions()
    bad = [f"{label} {line}" for label, src in sources() for line in unpacked(src, shown, other)]
    assert not bad, "read a live.Shown by name (.data, .where, .live), not as a tuple: " + "; ".join(bad)


def test_the_check_finds_an_unpack():
    shown, other = {"recall": {"live"}, "profile": {"live"}}, {"profile": {"ncu"}}
    src = "rec, where = live.recall('x')\nfor a, b in recall(): pass\np, w = live.profile()\nr, i = ncu.profile(c)"
    assert unpacked(src, shown, other) == [
        "line 1: rec, where = live.recall('x')",
        "line 2: for a, b in recall():",
        "line 3: p, w = live.profile()",
    ]
    assert unpacked("rec = live.recall('x')\ndata, where = rec.data, rec.where", shown, other) == []


def test_a_shown_refuses_to_unpack():
    with pytest.raises(TypeError):
        data, where = live.Shown({"x": 1}, "here", False)
