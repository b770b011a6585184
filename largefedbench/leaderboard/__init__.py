"""Leaderboard entries: schema (versioned, migrated), validation, the rendered board (DESIGN.md §8)."""
