"""The repository URL lives in pyproject.toml only; every notebook's Colab and Binder links must follow it."""

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import lesson_map  # noqa: E402
import sync_links  # noqa: E402


def test_every_notebook_has_a_colab_badge_and_install_cell():
    badge, install = sync_links.expected(sync_links.repo_url())
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        text = "".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"])
        assert badge + path.name in text, f"{path.name}: Colab badge missing or stale; run python tools/sync_links.py"
        assert install in text, f"{path.name}: Colab install cell missing or stale; run python tools/sync_links.py"


def test_every_notebook_opens_with_colab_and_binder_badges_side_by_side():
    url = sync_links.repo_url()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        first = next("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        line = first.split("\n", 1)[0]
        binder = f'<a href="{sync_links.binder_url(url, path.name)}" target="_parent">'
        assert binder in line, (
            f"{path.name}: Binder badge missing or stale beside Colab's; run python tools/sync_links.py"
        )
        assert "https://mybinder.org/badge_logo.svg" in line
        assert line.index("colab.research.google.com") < line.index("mybinder.org"), "Colab's badge, then Binder's"
        assert line == sync_links.badges(url, path.name)


def test_notebooks_agree_with_pyproject():
    stale = sync_links.sync(write=False)
    assert not stale, f"notebooks out of date with pyproject's Repository URL: {stale}; run python tools/sync_links.py"


README = ROOT / "README.md"


def test_readme_badges_follow_pyproject():
    url = sync_links.repo_url()
    badge, _ = sync_links.expected(url)
    text = README.read_text()
    first_screen = "\n".join(text.splitlines()[:10])
    assert badge + "00_the_machine.ipynb" in first_screen, "README: Colab badge for lesson 00 missing or stale"
    assert sync_links.binder_url(url) in first_screen, "README: Binder badge for lesson 00 missing or stale"
    assert "mybinder.org/badge_logo.svg" in first_screen


def test_readme_links_to_files_that_exist():
    import re

    targets = re.findall(r"\]\(([^)#\s]+)\)", README.read_text())
    local = [t for t in targets if not t.startswith(("http://", "https://"))]
    assert local, "README links to its docs pages"
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing, f"README links to missing files: {missing}"


def test_every_markdown_file_the_code_cites_is_in_the_repository():
    """A docstring or comment that cites a bare markdown file by name (a design note, a style guide) cites a file a
    reader can open: one in the repository. A path into another project (nccl-tests' doc/...) is a citation of
    that project's file, not of ours."""
    present = {p.name for p in ROOT.rglob("*.md") if ".venv" not in p.parts}
    cited = {}
    for folder in ("gpulab", "tests", "tools"):
        for py in (ROOT / folder).rglob("*.py"):
            for name in re.findall(r"(?<![/\w.-])([A-Za-z][\w-]*\.md)\b", py.read_text()):
                cited.setdefault(name, py.relative_to(ROOT).as_posix())
    assert cited, "the docstrings cite docs pages"
    missing = {n: where for n, where in cited.items() if n not in present}
    assert not missing, f"cited but not in the repository: {missing}"


def test_docs_lesson_map_is_what_the_notebooks_import():
    """docs/lessons.md's map from lesson to code is the one tools/lesson_map.py writes from the notebooks' imports
    (run it after a notebook imports a new module), and every file it names exists."""
    doc = lesson_map.DOC.read_text()
    assert lesson_map.rendered(doc) == doc, "the lesson map is stale: run python tools/lesson_map.py"
    block = doc[doc.index(lesson_map.BEGIN) : doc.index(lesson_map.END)]
    named = [p for p in re.findall(r"`(gpulab/[\w/]+\.py)`", block)]
    assert named and all((ROOT / p).exists() for p in named), [p for p in named if not (ROOT / p).exists()]
    assert "`gpulab/kernels/flash_teaching.py`" in block.split("08_flash_attention", 1)[1].split("\n", 1)[0]
    from gpulab.measure.counter_cases import CASES
    from gpulab.measure.target_kernels import LESSON_KERNELS

    runs = block.split("| lesson | counter cases", 1)[1]
    for item in [*CASES.values(), *LESSON_KERNELS]:
        (line,) = [ln for ln in runs.split("\n") if ln.startswith(f"| `{item.lesson}_")]
        assert f"`{item.name}`" in line, (item.name, item.lesson, line)
    assert "`coalescing`" in runs.split("| `06_coalescing`", 1)[1].split("\n", 1)[0]


def test_hidden_solutions_live_in_files_named_solutions():
    """Each checker's solution module is an ``exNN_solutions.py`` and each such file is some checker's."""
    import importlib
    import pkgutil

    import gpulab.exercises as pkg

    names = [m.name for m in pkgutil.iter_modules(pkg.__path__)]
    solution_files = {n for n in names if re.fullmatch(r"ex\d\d[a-z]?_solutions", n)}
    checkers = [n for n in names if re.fullmatch(r"ex\d\d[a-z]?", n)]
    assert not [n for n in names if n.startswith("ex") and n not in solution_files | set(checkers)]
    used = set()
    for n in checkers:
        mod = importlib.import_module(f"gpulab.exercises.{n}")
        for obj in vars(mod).values():
            sol = getattr(obj, "solution_module", None)
            if callable(obj) and sol is not None:
                assert sol.__name__.rsplit(".", 1)[-1] in solution_files, (n, obj.__name__, sol.__name__)
                used.add(sol.__name__.rsplit(".", 1)[-1])
    assert used == solution_files, sorted(solution_files - used)
