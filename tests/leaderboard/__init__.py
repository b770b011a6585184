"""Tests of the leaderboard: entry schema, validation, the rendered board, smoke, reproduce (a package, so that
its conftest and helper modules never shadow the top-level tests/conftest.py)."""
