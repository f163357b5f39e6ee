"""The self-contained HTML trace viewer of run directories."""
