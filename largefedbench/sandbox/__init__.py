"""The method sandbox: a method's ``train()`` runs in a process of its own that holds public resources and a proxy
of the federation, never the private splits, the snapshot files or the scorer.

- :mod:`.wire` — the channel between the two processes: length-prefixed tensors-and-JSON messages
  (:mod:`largefedbench.rounds.state_file`), so the harness never unpickles what the method sends;
- :mod:`.jail` — the OS guard around the method's process (user, mount, PID and network namespaces: a root of
  read-only binds where the LFB home, the snapshot and the board are absent);
- :mod:`.proxy` — what the method's process gets as ``fed`` and ``fed.selection``;
- :mod:`.server` — the harness's side: starts the method's process (:mod:`largefedbench.run.method_host`, which
  loads the public corpus and the models, runs ``train()`` and writes the artifact) and answers its requests with
  the real federation.
"""
