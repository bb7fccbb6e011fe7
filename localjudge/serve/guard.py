"""`Guard`, the pure ASGI middleware in front of every route (bearer key, browser checks,
body limit), the route labels /metrics counts under, and the binding rule."""

import hmac
import json
from collections.abc import Callable
from typing import Any

from localjudge.serve.errors import ServeError
from localjudge.serve.metrics import Counters

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
ROUTES = (
    "/health", "/metrics", "/v1/scorers", "/v1/evals", "/v1/models",
    "/v1/chat/completions", "/v1/completions",
)  # fmt: skip
LOOPBACK_NAMES = (*LOOPBACK_HOSTS, "[::1]")  # as a Host header writes them too


def route_label(path: str) -> str:
    """The route a path is counted under in /metrics: a known route, "/v1/scorers/run"
    for any scorer's run, else "other" (a client's path never becomes a label)."""
    if path in ROUTES:
        return path
    parts = path.split("/")
    if len(parts) == 5 and parts[:3] == ["", "v1", "scorers"] and parts[4] == "run":
        return "/v1/scorers/run"
    return "other"


def _host_name(value: str) -> str:
    """The host of a Host header or an Origin's authority, without its port."""
    value = value.strip().lower()
    if value.startswith("["):  # [::1]:8080
        return value[: value.find("]") + 1]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class Guard:
    """Pure ASGI middleware in front of every route: the bearer key (constant-time), and
    without a key the browser checks (a Host that is not an allowed name, as DNS rebinding
    sends, and a cross-site Origin get 403; `allowed_hosts` adds names to the loopback
    ones, `cors_origins` adds origins a page may call from); a body that is not declared
    JSON (415) or is declared over the limit (413). It passes `receive` through untouched,
    so handlers see the client's disconnect (Starlette's BaseHTTPMiddleware would hide it,
    and abandoned requests would run on)."""

    def __init__(
        self,
        app: Any,
        *,
        api_key: str | None,
        max_body_bytes: int,
        counters: Counters,
        allowed_hosts: tuple[str, ...] = (),
        cors_origins: tuple[str, ...] = (),
    ) -> None:
        self.app, self.api_key, self.max_body_bytes = app, api_key, max_body_bytes
        self.counters = counters
        self.allowed_hosts = LOOPBACK_NAMES + tuple(h.lower() for h in allowed_hosts)
        self.cors_origins = tuple(o.rstrip("/").lower() for o in cors_origins)

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        error = self.refusal(scope)
        if error is None:
            await self.app(scope, receive, send)
            return
        self.counters.count(route_label(scope.get("path", "")), error.status)
        body = json.dumps(error.body()).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": error.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def refusal(self, scope: dict) -> "ServeError | None":
        headers = {k.decode("latin-1").lower(): v for k, v in scope.get("headers", [])}
        path = scope.get("path", "")
        origin = headers.get("origin", b"").decode("latin-1")
        if scope.get("method") == "OPTIONS" and origin.rstrip("/").lower() in self.cors_origins:
            return None  # a preflight from an origin the server was told to serve
        if self.api_key is not None:
            given = headers.get("authorization", b"")
            if path != "/health" and not hmac.compare_digest(
                given, f"Bearer {self.api_key}".encode()
            ):
                return ServeError(401, "unauthorized", "missing or wrong bearer key")
        else:
            host = _host_name(headers.get("host", b"").decode("latin-1"))
            if host and host not in self.allowed_hosts:
                return ServeError(
                    403, "forbidden_host", "a keyless server answers loopback host names only"
                )
            if origin and not self._origin_allowed(origin):
                # "null" (a sandboxed page, a file) is no loopback name either
                return ServeError(
                    403, "forbidden_origin", "a keyless server refuses cross-site requests"
                )
        length = headers.get("content-length", b"").decode("latin-1")
        if scope.get("method") == "POST" and (
            length not in ("", "0") or headers.get("transfer-encoding")
        ):
            media = headers.get("content-type", b"").decode("latin-1").split(";")[0].strip().lower()
            if media != "application/json":
                # a page's form or text/plain POST needs no preflight: JSON only
                return ServeError(
                    415, "unsupported_media_type", "send the body as Content-Type: application/json"
                )
        if length.isdigit() and int(length) > self.max_body_bytes:
            return ServeError(413, "too_large", f"request body over {self.max_body_bytes} bytes")
        return None

    def _origin_allowed(self, origin: str) -> bool:
        if origin.rstrip("/").lower() in self.cors_origins:
            return True
        return _host_name(origin.split("://", 1)[-1]) in self.allowed_hosts


def check_binding(host: str, api_key: str | None) -> None:
    """Other machines may reach a server bound beyond loopback: require a key then."""
    if host not in LOOPBACK_HOSTS and not api_key:
        raise ValueError(
            f"binding {host} exposes the judge beyond this machine: give --api-key (or bind 127.0.0.1)"
        )
