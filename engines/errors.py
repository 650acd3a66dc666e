"""Errors a router sees from its workers."""


class EngineError(Exception):
    """Base class of engine-side failures."""


class WorkerDiedError(EngineError):
    """The worker process exited (crash, kill or OOM) while requests were in flight."""


class WorkerNotReadyError(EngineError):
    """The worker is starting, restarting or stopped; try again shortly."""

    def __init__(self, message: str, *, retry_after_s: float = 2.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class WorkerLoadError(EngineError):
    """The worker could not load its model (bad path, corrupt weights)."""


class EngineRequestError(EngineError):
    """The engine rejected or failed one request; the worker keeps serving."""
