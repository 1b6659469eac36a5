"""tools/build_site.py on bad input: an unreadable notebook is named (terminal and index) while the others are
built, and the build exits 1; an ``--out`` that is a file is refused with a clear message, not a traceback."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import build_site  # noqa: E402  (tools/ is not a package: on the path only from here)
import pytest  # noqa: E402

pytestmark = pytest.mark.cpu_same  # notebooks built in the interpreter (build_site.KERNEL_ENV)


def _good_notebook(path: Path) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# A good lesson"), nbformat.v4.new_code_cell("print(6 * 7)")]
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i}"
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def test_unreadable_notebook_is_named_and_the_others_are_built(tmp_path, capsys):
    notebooks, out = tmp_path / "nb", tmp_path / "site"
    notebooks.mkdir()
    good, bad = notebooks / "01_good.ipynb", notebooks / "02_broken.ipynb"
    _good_notebook(good)
    bad.write_text('{"cells": [ this is not JSON')

    rc = build_site.main([str(good), str(bad), "--out", str(out), "--jobs", "1"])
    captured = capsys.readouterr()

    assert rc == 1, "a notebook that cannot be read fails the build"
    assert (out / "01_good.html").is_file(), "the readable notebook is still built"
    assert "42" in (out / "01_good.html").read_text(), "the good page holds its executed output"
    assert not (out / "02_broken.html").exists()
    assert "02_broken" in captured.err and "unreadable" in captured.err, captured.err
    index = (out / "index.html").read_text()
    assert "01_good.html" in index
    assert "02_broken.ipynb: not built" in index and "unreadable" in index, index


def test_out_that_is_a_file_is_refused_clearly(tmp_path, capsys):
    good, out = tmp_path / "01_good.ipynb", tmp_path / "site.txt"
    _good_notebook(good)
    out.write_text("not a directory")
    rc = build_site.main([str(good), "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2
    assert "--out" in err and "not a directory" in err, err
    assert out.read_text() == "not a directory", "the file named by --out is left alone"
