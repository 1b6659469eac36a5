"""The old name of tests/figure_checks.py, kept so that tests importing it keep working; use figure_checks."""

from .figure_checks import assert_axes_fit_data, assert_no_empty_panel, assert_readable  # noqa: F401
