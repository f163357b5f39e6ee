"""LLM-as-a-judge evaluations."""
