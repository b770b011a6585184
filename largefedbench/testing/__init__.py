"""Tools for testing LargeFedBench and methods against it: :mod:`.attacks`, the ways a hostile method tries around
the federation's door, the scorer and the caches."""
