"""GET requests through the ``kubernetes`` client, answered as plain JSON.

Rules read objects as YAML gives them (plain dicts and lists), so gpulint asks the client for
raw responses (``_preload_content=False``) instead of its generated models: nothing is
converted, nothing is validated against the client's idea of a field, and a CRD gpulint has
no model for reads like any other object. Authentication, TLS and proxies stay the client's.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from gpulint.cluster.decoding import MAX_OBJECT_DEPTH, loads_bounded

log = logging.getLogger("gpulint.cluster")

CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 60.0
# An object in a list is two levels down (the list, its items); in a watch event, one.
LIST_DEPTH = MAX_OBJECT_DEPTH + 2
EVENT_DEPTH = MAX_OBJECT_DEPTH + 1


class ApiError(Exception):
    """A request that did not succeed: ``status`` is the HTTP status, None when the server
    could not be reached or the connection broke."""

    def __init__(self, status: int | None, reason: str, message: str) -> None:
        super().__init__(f"{status or 'no answer'} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def gone(self) -> bool:
        """410: the resourceVersion (or continue token) is older than the server keeps."""
        return self.status == 410


def status_error(status: int, body: bytes) -> ApiError:
    """An ApiError from a ``Status`` body (or whatever else the server sent)."""
    reason, message = "", ""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict):
        reason = str(data.get("reason") or "")
        message = str(data.get("message") or "")
    if not message:
        message = body[:200].decode("utf-8", "replace").strip() or f"HTTP {status}"
    return ApiError(status, reason, message)


class KubeApi:
    """The few requests gpulint makes, over a ``kubernetes.client.ApiClient``."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client

    def reserve_connections(self, count: int) -> None:
        """Let the client keep ``count`` connections open at once (one per watch)."""
        configuration = self.api_client.configuration
        if (configuration.connection_pool_maxsize or 0) >= count:
            return
        from kubernetes.client import rest

        configuration.connection_pool_maxsize = count
        self.api_client.rest_client = rest.RESTClientObject(configuration)

    @property
    def server(self) -> str:
        return str(getattr(self.api_client.configuration, "host", ""))

    def _send(self, path: str, query: list[tuple[str, str]], timeout: tuple[float, float]) -> Any:
        """The urllib3 response of ``GET path``, its body not read yet."""
        from kubernetes.client.exceptions import ApiException

        client = self.api_client
        headers = {"Accept": "application/json"}
        try:
            if hasattr(client, "param_serialize"):  # kubernetes >= 35 (OpenAPI Generator 7)
                method, url, header_params, body, post_params = client.param_serialize(
                    "GET",
                    path,
                    query_params=query,
                    header_params=headers,
                    auth_settings=["BearerToken"],
                )
                response = client.call_api(
                    method, url, header_params, body, post_params, _request_timeout=timeout
                )
                return response.response
            return client.call_api(  # the python-legacy generator's signature
                path,
                "GET",
                query_params=query,
                header_params=headers,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=timeout,
            )
        except ApiException as error:
            if not error.status:  # the client's own failure (TLS), not an answer
                raise ApiError(None, "ClientError", str(error.reason)) from None
            raise status_error(int(error.status), _bytes(error.body)) from None
        except Exception as error:  # urllib3/ssl/socket errors: the server is not reachable
            raise ApiError(None, type(error).__name__, str(error)) from None

    def get(
        self,
        path: str,
        query: list[tuple[str, str]] | None = None,
        timeout: tuple[float, float] = (CONNECT_TIMEOUT, READ_TIMEOUT),
    ) -> Any:
        """The JSON answer of ``GET path``; ApiError for anything but a 2xx JSON answer."""
        return self.get_bounded(path, query, timeout)[0]

    def get_bounded(
        self,
        path: str,
        query: list[tuple[str, str]] | None = None,
        timeout: tuple[float, float] = (CONNECT_TIMEOUT, READ_TIMEOUT),
        depth: int = LIST_DEPTH,
    ) -> tuple[Any, bool]:
        """``get``, with values nested deeper than ``depth`` levels replaced by
        ``decoding.TOO_DEEP``; and whether any was."""
        response = self._send(path, query or [], timeout)
        try:
            body = response.data
        except Exception as error:
            raise ApiError(None, type(error).__name__, str(error)) from None
        finally:
            response.release_conn()
        if not 200 <= response.status <= 299:
            raise status_error(response.status, body)
        try:
            return loads_bounded(body, depth)
        except (ValueError, RecursionError):
            raise ApiError(response.status, "BadResponse", "the answer is not JSON") from None

    def stream(
        self, path: str, query: list[tuple[str, str]], timeout: tuple[float, float]
    ) -> WatchStream:
        """A watch: newline-delimited JSON events as they come."""
        response = self._send(path, query, timeout)
        if not 200 <= response.status <= 299:
            try:
                body = response.data
            finally:
                response.release_conn()
            raise status_error(response.status, body)
        return WatchStream(response)


class WatchStream:
    """The events of one watch request; ``close`` (from any thread) ends it."""

    def __init__(self, response: Any) -> None:
        self.response = response
        self.closed = False

    def _lines(self) -> Iterator[bytes]:
        buffer = b""
        for chunk in self.response.stream(amt=None, decode_content=False):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            yield from lines
        if buffer:
            yield buffer

    def events(self) -> Iterator[tuple[dict[str, Any], bool]]:
        """Each event, and whether its object lost a part nested too deeply to read."""
        try:
            for line in self._lines():
                if not line.strip():
                    continue
                try:
                    event, cut = loads_bounded(line, EVENT_DEPTH)
                except (ValueError, RecursionError):
                    raise ApiError(None, "BadEvent", "a watch event is not JSON") from None
                if isinstance(event, dict):
                    yield event, cut
        except ApiError:
            raise
        except Exception as error:  # the connection broke mid-stream
            if self.closed:
                return
            raise ApiError(None, type(error).__name__, str(error)) from None
        finally:
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        response = self.response
        try:
            # Unblock a read in another thread (urllib3 >= 2.3), then drop the connection.
            shutdown = getattr(response, "shutdown", None)
            if shutdown is not None:
                shutdown()
            response.close()
            response.release_conn()
        except Exception as error:  # closing a broken connection may fail; nothing to keep
            log.debug("closing a watch: %s", error)


def _bytes(body: Any) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return b""
