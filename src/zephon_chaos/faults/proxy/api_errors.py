"""The API errors of ``toxiproxy-server``, with its exact messages and status codes."""

from __future__ import annotations

from http import HTTPStatus

from zephon_chaos.errors import ChaosError


class ApiError(ChaosError):
    """An error the API answers as ``{"error": message, "status": code}``."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    def joined(self, cause: str) -> ApiError:
        """Go's ``joinError``: ``"<message>: <cause>"`` with this error's status."""
        return ApiError(f"{self.message}: {cause}", self.status)


BAD_REQUEST_BODY = ApiError("bad request body", HTTPStatus.BAD_REQUEST)
MISSING_FIELD = ApiError("missing required field", HTTPStatus.BAD_REQUEST)
PROXY_NOT_FOUND = ApiError("proxy not found", HTTPStatus.NOT_FOUND)
PROXY_ALREADY_EXISTS = ApiError("proxy already exists", HTTPStatus.CONFLICT)
INVALID_STREAM = ApiError(
    "stream was invalid, can be either upstream or downstream", HTTPStatus.BAD_REQUEST
)
INVALID_TOXIC_TYPE = ApiError("invalid toxic type", HTTPStatus.BAD_REQUEST)
TOXIC_ALREADY_EXISTS = ApiError("toxic already exists", HTTPStatus.CONFLICT)
TOXIC_NOT_FOUND = ApiError("toxic not found", HTTPStatus.NOT_FOUND)


def internal(message: str) -> ApiError:
    """An error Go returns without a status of its own (listen failures): HTTP 500."""
    return ApiError(message, HTTPStatus.INTERNAL_SERVER_ERROR)


class ProxyAlreadyStarted(Exception):
    """Go's ``ErrProxyAlreadyStarted``: ``/reset`` ignores it, other callers never see it."""
