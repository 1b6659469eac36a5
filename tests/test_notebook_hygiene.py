"""Every notebook cell has an id (nbformat 4.5: without one nbformat warns and JupyterLab rewrites the file on
save), and nbval's markers live in cell tags, out of the learner's code (tools/sync_links.py ``tidy`` writes
both)."""

import copy
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import sync_links  # noqa: E402

nbval_plugin = pytest.importorskip("nbval.plugin", reason="nbval is not installed")

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

# The cells whose output depends on the machine (timings, this GPU's name, widgets), by id: nbval must not compare
# their outputs. They carried `# NBVAL_IGNORE_OUTPUT` in their source until the marker became this tag. A tagged
# cell deleted from a lesson leaves this list with it.
IGNORE_OUTPUT = {
    "00_the_machine": ["002f3739", "461b4fcc", "0db51104", "007cc363", "77fed306", "7b65d15e"],
    "00b_first_kernel": ["4a986a94", "7c21bf98"],
    "01_roofline": ["779fdb2a", "19f1ab14", "468b7453", "6d095b25"],
    "02_warp_divergence": ["73bbf741", "3c8fcf72", "257cc8d6", "ffb2b44a", "e58db749", "757cb03f"],
    "03_precision": ["1c320343", "fb7802d8", "95e8e359", "e8101a61", "30ee29ab", "d9caf466", "b8782fd3", "ec054cff"]
    + ["145fa701", "381205cb"],
    "04_fusion": ["98378c3e", "81f7ef72", "6a1846d6", "l04-21", "dab5b508", "8e676fcf", "200f7591", "df91fe54"]
    + ["5a2f5638", "be215db5"],
    "05_recomputation": ["c662bec1", "66908498", "5f84fc25", "c452b090", "06ed09be", "6e7312d7"],
    "06_coalescing": ["94c3f9f5", "4bf3e758", "44e2d5c1", "d694ad9d", "1ca9f220", "691709fb", "3f7c2a91", "468b6514"],
    "07_tiling": ["l07a-07", "l07a-21", "l07a-26"],
    "07b_waves": ["l07b-07", "l07b-09", "l07b-15", "l07b-18"],
    "08_flash_attention": ["c15", "l08-race", "c29", "l08-p2r", "c31", "c32", "c34"],
    "08b_flash_backward": ["l08b-05", "l08b-p1r", "l08b-14", "l08b-p2r", "l08b-21", "l08b-23", "c37", "c50"]
    + ["l08b-25"],
    "09_builder_test": ["75d70c5a", "ae7d65ba", "d868485a", "11dd842a", "a215df71"],
    "10_beyond_one_gpu": ["l10-10", "l10-12", "l10-18", "l10-20", "l10-29", "l10-33"],
}


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def _src(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_cell_has_a_unique_id(path):
    nb = _load(path)
    assert (nb["nbformat"], nb["nbformat_minor"]) >= (4, 5), f"{path.name}: cell ids need nbformat 4.5"
    missing = [i for i, c in enumerate(nb["cells"]) if not c.get("id")]
    assert not missing, f"{path.name}: cells {missing} have no id; run python tools/sync_links.py"
    ids = [c["id"] for c in nb["cells"]]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    assert not dup, f"{path.name}: duplicate cell ids {dup}; run python tools/sync_links.py"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_cell_source_carries_an_nbval_marker(path):
    cells = _load(path)["cells"]
    marked = [i for i, c in enumerate(cells) if "NBVAL_" in _src(c) or list(nbval_plugin.find_comment_markers(_src(c)))]
    assert not marked, f"{path.name}: cells {marked} carry an NBVAL_ comment; run python tools/sync_links.py (a tag)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_nbval_tags_are_ones_nbval_reads_and_the_tagged_cells_keep_them(path):
    cells = _load(path)["cells"]
    for i, c in enumerate(cells):
        unknown = [
            t for t in c["metadata"].get("tags", []) if t.startswith("nbval") and t not in nbval_plugin.metadata_tags
        ]
        assert not unknown, f"{path.name} cell {i}: nbval ignores the tags {unknown}"
    by_id = {c["id"]: c for c in cells if "id" in c}
    for cell_id in IGNORE_OUTPUT.get(path.stem, []):
        assert cell_id in by_id, f"{path.name}: tagged cell {cell_id} is gone (drop it from IGNORE_OUTPUT if meant)"
        opts = dict(nbval_plugin.find_metadata_tags(by_id[cell_id]["metadata"]))
        assert by_id[cell_id]["cell_type"] == "code" and opts == {"check": False}, f"{path.name} cell {cell_id}: {opts}"


def test_tidy_moves_every_marker_to_its_tag_and_gives_stable_unique_ids():
    src = {
        "# NBVAL_IGNORE_OUTPUT\nprint(1)": ("print(1)", ["nbval-ignore-output"]),
        "x = 1\n  #  NBVAL_SKIP\ny = 2\n": ("x = 1\ny = 2\n", ["nbval-skip"]),
        "# NBVAL_RAISES_EXCEPTION\n# NBVAL_CHECK_OUTPUT\nraise ValueError": (
            "raise ValueError",
            ["nbval-raises-exception", "nbval-check-output"],
        ),
        "# a comment\nz = 3": ("# a comment\nz = 3", []),
    }
    cells = [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": s} for s in src]
    cells += [{"cell_type": "markdown", "id": "keep", "metadata": {}, "source": "# NBVAL_SKIP is prose here"}]
    cells += [{"cell_type": "markdown", "id": "keep", "metadata": {}, "source": "a duplicate id"}]
    nb = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 4}
    before = copy.deepcopy(nb)
    sync_links.tidy(nb, "x.ipynb")
    assert nb["nbformat_minor"] == 5
    for cell, old, (want_src, want_tags) in zip(nb["cells"], before["cells"], src.values()):
        assert cell["source"] == want_src and cell["metadata"].get("tags", []) == want_tags
        assert dict(nbval_plugin.find_metadata_tags(cell["metadata"])) == dict(
            nbval_plugin.find_comment_markers(old["source"])
        ), "a tag must mean to nbval what its comment meant"
        assert list(cell) == ["cell_type", "execution_count", "id", "metadata", "outputs", "source"]
    assert nb["cells"][4] == before["cells"][4], "markdown is left alone, its id kept"
    ids = [c["id"] for c in nb["cells"]]
    assert len(set(ids)) == len(ids) and ids[4] == "keep"
    again = copy.deepcopy(before)
    sync_links.tidy(again, "x.ipynb")
    assert again == nb, "the same notebook gets the same ids"
    sync_links.tidy(again, "x.ipynb")
    assert again == nb, "tidy leaves a tidy notebook as it is"


# Lesson 00 split in two to stay within about 2,000 prose words each, with the learner writing early: prose words
# are the markdown cells' words, HTML tags left out (every lesson's limit: test_every_lesson_stays_within_its_prose_words);
# a learner's cell is a code cell with a "# your" stub (a number to predict, a function to write).
LESSON00 = ["00_the_machine", "00b_first_kernel"]
PROSE_WORDS_MAX, WORDS_BEFORE_LEARNER_MAX = 2000, 600


def _prose_words(cell: dict) -> int:
    return len(re.sub(r"<[^>]+>", " ", _src(cell)).split()) if cell["cell_type"] == "markdown" else 0


@pytest.mark.parametrize("stem", LESSON00)
def test_lesson00_stays_short_and_the_learner_writes_early(stem):
    cells = _load(ROOT / "notebooks" / f"{stem}.ipynb")["cells"]
    first = next(i for i, c in enumerate(cells) if c["cell_type"] == "code" and "# your" in _src(c))
    before = sum(_prose_words(c) for c in cells[:first])
    assert before <= WORDS_BEFORE_LEARNER_MAX, f"{stem}: the learner first writes after {before} words (cell {first})"
    stubs = [c for c in cells if c["cell_type"] == "code" and "= None  # your number" in _src(c)]
    assert len(stubs) >= 2, f"{stem}: {len(stubs)} predictions; a lesson asks for at least two"


@pytest.mark.parametrize("stem", ["08_flash_attention", "08b_flash_backward"])
def test_lesson08_asks_for_two_predictions_each_revealed(stem):
    """Lesson 08 split in two, each with two predictions (its prose words: the test below)."""
    cells = _load(ROOT / "notebooks" / f"{stem}.ipynb")["cells"]
    stubs = [c for c in cells if c["cell_type"] == "code" and "= None  # your number" in _src(c)]
    reveals = [c for c in cells if c["cell_type"] == "code" and "reveal(my_guess" in _src(c)]
    assert len(stubs) >= 2 and len(reveals) >= len(stubs), f"{stem}: {len(stubs)} predictions, {len(reveals)} reveals"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_lesson_stays_within_its_prose_words(path):
    """Every lesson within 2,000 prose words: a longer one is cut or split."""
    total = sum(map(_prose_words, _load(path)["cells"]))
    assert total <= PROSE_WORDS_MAX, f"{path.stem}: {total} prose words, more than {PROSE_WORDS_MAX}: split or cut"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_predictions_are_revealed_by_gpulab_reveal(path):
    """One home for the reveal (gpulab.exercises.predict.reveal): no lesson defines its own."""
    cells = [c for c in _load(path)["cells"] if c["cell_type"] == "code"]
    own = [c.get("id") for c in cells if re.search(r"^\s*def reveal\b", _src(c), re.M)]
    assert not own, f"{path.stem}: cells {own} define their own reveal; import gpulab.exercises.predict.reveal"
