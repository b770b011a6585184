"""LargeFedBench: private federated learning of text models with LLMs, benchmarked."""

__version__ = "0.3.0"
