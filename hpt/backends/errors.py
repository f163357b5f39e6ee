"""Backend failures, split by what the caller should do about them."""


class BackendError(Exception):
    """A model call failed for this sample (after any retries); other samples may still work."""


class FatalBackendError(BackendError):
    """The backend cannot work at all (bad key, unknown model, unreachable): stop the run."""
