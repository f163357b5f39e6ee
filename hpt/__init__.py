"""hpt: evaluate language models with the Hierarchical Prompting Taxonomy."""

__version__ = "0.1.0"
