"""Helpers and fixtures the tests share, one module per subject (no tests: pytest collects
only ``test_*.py``). A test module imports its helpers from here, never from another
test module (tests/test_test_imports.py)."""
