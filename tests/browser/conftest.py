# The fixture notebooks are inputs of tests/test_browser.py, not tests: keep `pytest --nbval` from collecting them.
collect_ignore_glob = ["fixtures/*"]
