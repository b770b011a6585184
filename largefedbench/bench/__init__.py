"""Benchmarks run from the command line (``lfb bench …``); the pytest-benchmark ones live under tests/."""
