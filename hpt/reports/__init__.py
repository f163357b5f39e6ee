"""Reports of run directories: the paper's tables and plots, from records alone."""

from hpt.errors import HptError


class ReportError(HptError, ValueError):
    """A report's input is wrong: a scores file, or runs that cannot be compared."""
