"""The pipeline that runs methods: ``lfb eval`` (:mod:`.eval`: the request checked before any work, each seed's run
and accounting, the references, the command string), a seed's result (:mod:`.seed_result`), the entry built from
them (:mod:`.entry`), and the commands that run methods the same way — ``lfb audit`` (:mod:`.audit`), ``lfb smoke``
(:mod:`.smoke`, with the guards of :mod:`.guards`), ``lfb leaderboard reproduce`` (:mod:`.reproduce`, :mod:`.sample`).
"""
