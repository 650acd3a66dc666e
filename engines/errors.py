"""Errors a router sees from its workers, and the one a worker dies of."""


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
    """The engine rejected or failed one request; the worker keeps serving.

    ``invalid`` says the request broke the engine's contract (a 400, the router should
    have caught it first); otherwise the engine failed serving it (a 500).
    """

    def __init__(self, message: str, *, invalid: bool = False) -> None:
        super().__init__(message)
        self.invalid = invalid


class EngineUnrecoverableError(EngineError):
    """Inside a worker: a reset engine still cannot generate, so the process must be replaced."""
