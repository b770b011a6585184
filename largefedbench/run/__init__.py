"""The pieces of the run pipeline that :func:`largefedbench.harness.run_eval` strings together: a request is
resolved (method class, source and version: :func:`largefedbench.registry.resolve_method`), each seed's run gives
a :class:`~.seed_result.SeedResult`, and :func:`~.entry.build_entry` makes the leaderboard :class:`Entry` from them.
"""
