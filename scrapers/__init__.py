"""Source scrapers and their shared HTTP, cache and cleaning helpers, installed as ``largefedbench.scrapers``."""
