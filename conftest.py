"""pytest's hooks for every run from the repository root. tests/nbval_answers.py: as nbval executes a lesson, a cell
that reveals a prediction fails where a cell above its question already showed the answer."""

pytest_plugins = ["tests.nbval_answers"]
