"""Recording and rebuilding the OpenAI and Anthropic SDKs' API errors.

A recording stores an ``APIStatusError``'s HTTP status code, response body and the
response headers handlers read (``retry-after``, ``retry-after-ms``, the request id, the
rate-limit headers; all redacted, see ``sftrace._record.failure``); a replay raises the
SDK's own error again (``openai.RateLimitError`` with that status, body and headers), so
``except openai.RateLimitError``, ``exc.status_code``, ``exc.request_id`` and a back-off
reading ``exc.response.headers["retry-after-ms"]`` work as they did. The error's request
and response are stand-ins: nothing is sent.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import orjson

from sftrace._model.calls import CallFailure
from sftrace._record.failure import ErrorCodec, ErrorDetails

# The URL of the stand-in request a rebuilt error carries (never sent anywhere).
REPLAYED_URL = "https://replayed.sftrace.invalid/"


def sdk_error_codec(package: str) -> ErrorCodec:
    """The codec of the SDK ``package`` (``"openai"``, ``"anthropic"``)."""

    def describe(exc: BaseException) -> ErrorDetails | None:
        sdk = sys.modules.get(package)
        status_error = getattr(sdk, "APIStatusError", None)
        if not isinstance(status_error, type) or not isinstance(exc, status_error):
            return None
        status_code = getattr(exc, "status_code", None)
        return ErrorDetails(
            status_code=status_code if isinstance(status_code, int) else None,
            body=getattr(exc, "body", None),
            headers=_kept_headers(getattr(exc, "response", None)),
        )

    def rebuild(failure: CallFailure) -> BaseException | None:
        return _rebuild(package, failure)

    return ErrorCodec(name=package, describe=describe, rebuild=rebuild)


def _rebuild(package: str, failure: CallFailure) -> BaseException | None:
    prefix = f"{package}."
    sdk = sys.modules.get(package)
    if sdk is None or not failure.type.startswith(prefix):
        return None
    cls = vars(sdk).get(failure.type[len(prefix) :])  # never the SDK's lazy __getattr__
    status_error = getattr(sdk, "APIStatusError", None)
    connection_error = getattr(sdk, "APIConnectionError", None)
    http = _httpx(package)
    if not isinstance(cls, type) or http is None:
        return None
    build: Any = cls  # the SDK's error class; its constructor's signature is the SDK's
    request = http.Request("POST", REPLAYED_URL)
    if isinstance(status_error, type) and issubclass(cls, status_error):
        if failure.status_code is None:
            return None  # recorded before status codes were: the generic path rebuilds it
        body = _body(failure.body_json)
        headers = _headers(failure.headers_json)
        if failure.body_json:
            headers.setdefault("content-type", "application/json")
        response = http.Response(
            failure.status_code,
            request=request,
            content=failure.body_json.encode() if failure.body_json is not None else b"",
            headers=headers,
        )
        error: BaseException = build(failure.message, response=response, body=body)
        return error
    if isinstance(connection_error, type) and issubclass(cls, connection_error):
        try:
            error = build(message=failure.message, request=request)
        except TypeError:  # APITimeoutError(request)
            error = build(request=request)
        return error
    return None


# The response headers an agent's handler reads: when to retry, which request it was,
# how much quota is left. Others (cookies, server internals) are not recorded.
_KEPT_HEADERS = frozenset(
    {"retry-after", "retry-after-ms", "x-request-id", "request-id", "x-should-retry"}
)
_KEPT_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")


def _kept_headers(response: Any) -> dict[str, str] | None:
    headers = getattr(response, "headers", None)
    items = getattr(headers, "items", None)
    if not callable(items):
        return None
    kept: dict[str, str] = {}
    try:
        for name, value in items():
            lowered = str(name).lower()
            if lowered in _KEPT_HEADERS or lowered.startswith(_KEPT_PREFIXES):
                kept[lowered] = str(value)
    except Exception:  # a response object of another shape: no headers, nothing else lost
        return None
    return kept or None


def _headers(headers_json: str | None) -> dict[str, str]:
    if headers_json is None:
        return {}
    try:
        headers = orjson.loads(headers_json)
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(headers, dict):
        return {}
    return {str(name): str(value) for name, value in headers.items() if isinstance(value, str)}


def _body(body_json: str | None) -> Any:
    if body_json is None:
        return None
    try:
        return orjson.loads(body_json)
    except orjson.JSONDecodeError:
        return body_json


def _httpx(package: str) -> ModuleType | None:
    """The httpx flavour the SDK's errors take (``httpx2`` in recent SDKs, else ``httpx``)."""
    base = sys.modules.get(f"{package}._base_client")
    module = getattr(base, "httpx2", None) or getattr(base, "httpx", None)
    return module if isinstance(module, ModuleType) else None


__all__ = ["REPLAYED_URL", "sdk_error_codec"]
