"""Reports of run directories: the paper's tables and plots, from records alone."""


class ReportError(ValueError):
    """A report's input is wrong: a prices file, for instance."""
