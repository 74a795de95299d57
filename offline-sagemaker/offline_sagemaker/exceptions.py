"""Errors of the offline SageMaker. A leaf: imports nothing of the package, so every layer can raise them.

:class:`ApiError` and its subclasses are what the SageMaker API answers a client with, in AWS's terms: an
error code (``__type``) and a message. They carry no HTTP status; the HTTP layer
(:func:`offline_sagemaker.responses.status_for`) maps codes to statuses.
:class:`ScenarioError` is a user's scenario (file, dict or name) being invalid; :class:`ScenarioRefused` a
scenario file the admin route may not read.
"""

from __future__ import annotations

__all__ = [
    "AccessDenied",
    "ApiError",
    "InternalFailure",
    "NotFound",
    "ResourceInUse",
    "ResourceLimitExceeded",
    "ResourceNotFound",
    "ScenarioError",
    "ScenarioRefused",
    "SerializationError",
    "ServiceUnavailable",
    "ThrottlingError",
    "UnknownOperation",
    "ValidationError",
]


class ApiError(Exception):
    """An error the service returns to the client, in AWS's JSON error form.

    :param code: the error code (``__type``), e.g. ``ValidationException``.
    :param message: the human-readable message.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class ValidationError(ApiError):
    """``ValidationException``: the request breaks a rule of the API."""

    def __init__(self, message: str) -> None:
        super().__init__("ValidationException", message)


class ResourceNotFound(ValidationError):
    """The job does not exist; AWS answers this with a ``ValidationException``."""

    def __init__(self, message: str = "Requested resource not found.") -> None:
        super().__init__(message)


class ResourceInUse(ApiError):
    """``ResourceInUse``: a job of this name already exists."""

    def __init__(self, message: str) -> None:
        super().__init__("ResourceInUse", message)


class ResourceLimitExceeded(ApiError):
    """``ResourceLimitExceeded``: the request exceeds an account quota."""

    def __init__(self, message: str) -> None:
        super().__init__("ResourceLimitExceeded", message)


class ThrottlingError(ApiError):
    """``ThrottlingException``: too many calls."""

    def __init__(self, message: str = "Rate exceeded") -> None:
        super().__init__("ThrottlingException", message)


class SerializationError(ApiError):
    """``SerializationException``: the request body is not a JSON object."""

    def __init__(self, message: str) -> None:
        super().__init__("SerializationException", message)


class UnknownOperation(ApiError):
    """``UnknownOperationException``: an operation the emulator does not answer."""

    def __init__(self, message: str) -> None:
        super().__init__("UnknownOperationException", message)


class InternalFailure(ApiError):
    """``InternalFailure``: the service failed (an injected fault)."""

    def __init__(self, message: str = "We encountered an internal error.") -> None:
        super().__init__("InternalFailure", message)


class ServiceUnavailable(ApiError):
    """``ServiceUnavailable``: the service is unavailable (an injected fault)."""

    def __init__(self, message: str = "Service is unavailable.") -> None:
        super().__init__("ServiceUnavailable", message)


class AccessDenied(ApiError):
    """``AccessDeniedException``: the caller's policy does not allow the operation."""

    def __init__(self, message: str) -> None:
        super().__init__("AccessDeniedException", message)


class NotFound(ApiError):
    """A named resource of a service that answers ``ResourceNotFound`` / ``NoSuchResourceException``."""


class ScenarioError(ValueError):
    """A scenario file, dict or name is invalid; the message names the offending key."""


class ScenarioRefused(ScenarioError):
    """A scenario file outside what the server was started to allow (``--scenario-dir``): never read."""
