"""Write the map from each lesson to its code into docs/lessons.md (between the two markers), read from what the
notebook imports: the models and helpers it uses, its kernels (and those its benchmark suite imports), its
benchmark suite, its figures, its exercises and
their hidden solutions (``exNN_solutions.py``); then, from each ``lesson`` field, its counter cases
(``gpulab.measure.counter_cases.CASES``) and its rows of ``gpulab.measure.target_kernels.LESSON_KERNELS``. ``python tools/lesson_map.py``; tests/test_links.py checks that the
committed map is the one this writes."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "lessons.md"
BEGIN, END = "<!-- lesson map: tools/lesson_map.py writes this -->", "<!-- end of lesson map -->"

sys.path.insert(0, str(Path(__file__).resolve().parent))
import deps  # noqa: E402  (tools/ is not a package: the import graph's one home, shared with gpu_check.py)

_GRAPH = deps.Graph(ROOT)


def _module_file(name: str) -> Path | None:
    rel = _GRAPH.module_file(name)
    return ROOT / rel if rel else None


def imports(notebook: Path) -> set[str]:
    """The gpulab modules a notebook's code cells import (``from gpulab.x import y`` counts ``gpulab.x.y`` when y is
    a module, else ``gpulab.x``), read by ``deps.Graph.named_imports``."""
    return {m for m in _GRAPH.named_imports(notebook.relative_to(ROOT).as_posix()) if m.startswith("gpulab")} - {
        "gpulab"
    }


def suite_kernels(suite: str) -> set[str]:
    """The ``gpulab.kernels`` modules a benchmark suite (``gpulab.bench.lessonNN``) imports: the kernels the lesson
    times, beside those its notebook imports."""
    names = _GRAPH.named_imports(_GRAPH.module_file(suite))
    return {m for m in names if m.startswith("gpulab.kernels.") and _module_file(m)}


def _path(name: str) -> str:
    return f"`{_module_file(name).relative_to(ROOT)}`"


def row(notebook: Path) -> str:
    """One table row: lesson | models and helpers | kernels | suite | figures | exercises (solutions)."""
    stem = notebook.stem
    num = stem.split("_")[0]
    mods = imports(notebook)
    suites = sorted(m for m in mods if m.startswith("gpulab.bench.") and m != "gpulab.measure.live")
    kernels = sorted({m for m in mods if m.startswith("gpulab.kernels.")}.union(*map(suite_kernels, suites)))
    groups = ("gpulab.bench", "gpulab.figures", "gpulab.exercises", "gpulab.kernels")
    models = sorted(m for m in mods if not m.startswith(groups))
    fig = ROOT / "gpulab" / "figures" / f"lesson{num[:2]}.py"
    exdir = ROOT / "gpulab" / "exercises"
    names = {m.rsplit(".", 1)[1] for m in mods if re.fullmatch(r"gpulab\.exercises\.ex\w+", m)} | {f"ex{num}"}
    ex = [p for n in names for p in (exdir / f"{n}.py", exdir / f"{n}_solutions.py") if p.exists()]
    cells = [
        f"`{stem}`",
        ", ".join(_path(m) for m in models) or "-",
        ", ".join(_path(m) for m in kernels) or "-",
        ", ".join(_path(m) for m in suites) or "-",
        f"`{fig.relative_to(ROOT)}`" if fig.exists() else "-",
        ", ".join(f"`{p.relative_to(ROOT)}`" for p in sorted(set(ex))) or "-",
    ]
    return "| " + " | ".join(cells) + " |"


def table() -> str:
    head = (
        "| lesson | models and helpers | kernels | benchmark suite | figures | exercises (`*_solutions.py`: the hidden "
        "solutions) |\n|---|---|---|---|---|---|"
    )
    return "\n".join([head, *(row(nb) for nb in sorted((ROOT / "notebooks").glob("*.ipynb")))])


def _lesson(notebook: Path) -> str:
    return notebook.stem.split("_")[0]


def by_lesson() -> dict[str, tuple[list[str], list[str]]]:
    """Lesson number ("06", "00b": a notebook's name before its first ``_``) -> (its counter case names, its
    targets row names), from the ``lesson`` field of each. Raises ValueError naming a case or row whose lesson
    names no notebook."""
    from gpulab.measure.counter_cases import CASES
    from gpulab.measure.target_kernels import LESSON_KERNELS

    found = {_lesson(nb): ([], []) for nb in sorted((ROOT / "notebooks").glob("*.ipynb"))}
    for i, items in enumerate((CASES.values(), LESSON_KERNELS)):
        for item in items:
            if item.lesson not in found:
                raise ValueError(f"{item.name!r} has lesson {item.lesson!r}, which names no notebook ({sorted(found)})")
            found[item.lesson][i].append(item.name)
    return found


def runs_table() -> str:
    """A row per lesson with a counter case or a targets row: lesson | counter cases | targets rows."""
    head = (
        "| lesson | counter cases (`gpulab/measure/counter_cases.py`, `python -m gpulab.measure.counters`) | targets rows "
        "(`gpulab/measure/target_kernels.py`, `python -m gpulab.measure.targets`) |\n|---|---|---|"
    )
    stems = {_lesson(nb): nb.stem for nb in (ROOT / "notebooks").glob("*.ipynb")}
    rows = [
        f"| `{stems[n]}` | {', '.join(f'`{c}`' for c in cases) or '-'} | {', '.join(f'`{r}`' for r in rows) or '-'} |"
        for n, (cases, rows) in sorted(by_lesson().items())
        if cases or rows
    ]
    return "\n".join([head, *rows])


def rendered(doc: str) -> str:
    """``doc`` with the map between the markers replaced (appended under a heading if the markers are absent)."""
    block = f"{BEGIN}\n{table()}\n\nWhat each lesson runs on a GPU: its counter cases and its compiled kernels.\n\n{runs_table()}\n{END}"
    if BEGIN in doc and END in doc:
        return doc[: doc.index(BEGIN)] + block + doc[doc.index(END) + len(END) :]
    return doc.rstrip("\n") + "\n\n## Where each lesson's code lives\n\n" + block + "\n"


if __name__ == "__main__":
    new = rendered(DOC.read_text())
    if new != DOC.read_text():
        DOC.write_text(new)
        print(f"wrote the lesson map into {DOC.relative_to(ROOT)}")
    sys.exit(0)
