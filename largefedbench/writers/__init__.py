"""Corpora written once by an LLM and shipped with the package: the prose demo's texts and the generic public corpus
(each resumable, run as ``python -m largefedbench.writers.<name>``)."""
