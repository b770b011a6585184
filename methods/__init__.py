"""Built-in methods, one module each, installed as ``largefedbench.methods`` (DESIGN.md §4)."""
