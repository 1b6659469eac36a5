"""pyproject.toml, environment.yml and binder/requirements.txt must name the same packages."""

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


def norm(requirement: str) -> str:
    """PEP 503 name of a PEP 508 requirement line."""
    return re.sub(r"[-_.]+", "-", NAME.match(requirement.strip()).group()).lower()


def from_pyproject() -> set:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {norm(r) for r in project["dependencies"] + project["optional-dependencies"]["test"]}


def from_environment_yml() -> set:
    """Items of the `- pip:` list: a line-based read, so PyYAML is not needed."""
    names, pip_indent = set(), None
    for line in (ROOT / "environment.yml").read_text().splitlines():
        text = line.split(" #")[0].rstrip()
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        indent = len(text) - len(text.lstrip())
        if re.fullmatch(r"\s*-\s*pip:", text):
            pip_indent = indent
        elif pip_indent is not None and indent > pip_indent and text.lstrip().startswith("- "):
            item = text.lstrip()[2:].strip().strip("'\"")
            if not item.startswith("-"):  # skip pip options such as --extra-index-url
                names.add(norm(item))
        elif pip_indent is not None and indent <= pip_indent:
            pip_indent = None
    return names


def from_requirements_txt() -> set:
    lines = (ROOT / "binder" / "requirements.txt").read_text().splitlines()
    return {norm(s) for s in (l.split(" #")[0].strip() for l in lines) if s and s[0] not in "#-."}


def test_dependency_lists_agree():
    want = from_pyproject()
    assert want, "no dependencies found in pyproject.toml"
    problems = []
    for name, have in [
        ("environment.yml", from_environment_yml()),
        ("binder/requirements.txt", from_requirements_txt()),
    ]:
        if want - have:
            problems.append(f"{name} lacks {sorted(want - have)} (listed in pyproject.toml)")
        if have - want:
            problems.append(f"pyproject.toml lacks {sorted(have - want)} (listed in {name})")
    assert not problems, "dependency lists disagree:\n  " + "\n  ".join(problems)
