"""Depth-of-knowledge question graphs (DepthQA)."""
