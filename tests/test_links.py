"""The repository URL lives in pyproject.toml only; every notebook's Colab links must follow it."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import sync_links  # noqa: E402


def test_every_notebook_has_a_colab_badge_and_install_cell():
    badge, install = sync_links.expected(sync_links.repo_url())
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        text = "".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"])
        assert badge + path.name in text, f"{path.name}: Colab badge missing or stale; run python tools/sync_links.py"
        assert install in text, f"{path.name}: Colab install cell missing or stale; run python tools/sync_links.py"


def test_notebooks_agree_with_pyproject():
    stale = sync_links.sync(write=False)
    assert not stale, f"notebooks out of date with pyproject's Repository URL: {stale}; run python tools/sync_links.py"
