"""The user API over REST, for the ``npulab`` CLI: a user token, JSON in and out.

Not the host worker's client (``workers.host.client``): that one speaks the
agent API with a host token. Every failure becomes an ``ApiError`` that
carries the CLI exit code it means, so the commands never map statuses
themselves.
"""

from __future__ import annotations

import email.utils
import json
import os
import time
from pathlib import Path
from typing import Any, Callable

import requests

from workers import __version__
from workers.contract import exits

DEFAULT_URL = "http://127.0.0.1:8000"
URL_ENV, TOKEN_ENV, CONFIG_ENV = "NPULAB_URL", "NPULAB_TOKEN", "NPULAB_CONFIG"
# A 429 is retried this often, each time after the server's Retry-After.
RATE_LIMIT_RETRIES = 4
MAX_RETRY_AFTER_S = 60.0
# Reads that failed to connect (or got 502-504) are tried again this often:
# a web server restarting behind nginx is a matter of seconds.
READ_RETRIES = 2
READ_RETRY_DELAY_S = 0.5


class ApiError(Exception):
    """A call failed; ``exit_code`` is what the CLI exits with (workers.contract.exits).

    ``transient``: worth trying again later (unreachable, 5xx, rate limited),
    as opposed to a refusal that the same call will meet again.
    """

    def __init__(
        self,
        message: str,
        exit_code: int,
        status: int | None = None,
        body: Any = None,
        transient: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.status = status
        self.body = body
        self.transient = transient

    def as_dict(self) -> dict[str, Any]:
        """What ``--json`` prints: the platform's own error body included."""
        body = self.body if isinstance(self.body, dict) else {}
        return {
            "error": {
                "message": self.message,
                "status": self.status,
                "code": body.get("code"),
                "detail": body.get("detail"),
                "body": self.body,
            },
            "exit_code": self.exit_code,
        }


def config_path() -> Path:
    """Where ``npulab login`` keeps the URL and token: NPULAB_CONFIG, else the XDG place."""
    explicit = os.environ.get(CONFIG_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "npulab" / "config.json"


def read_config() -> dict[str, Any]:
    path = config_path()
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        raise ApiError(f"cannot read {path}: {error}", exits.CLI_USAGE) from error
    return data if isinstance(data, dict) else {}


def write_config(data: dict[str, Any]) -> Path:
    """Write the config file readable by its owner alone: it holds a token."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(str(temporary), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle, indent=2)
        handle.write("\n")
    os.replace(str(temporary), str(path))
    return path


def resolve(url: str | None = None, token: str | None = None) -> tuple[str, str | None]:
    """The platform URL and token: given, else the environment, else the config file."""
    config: dict[str, Any] = {}
    if not (url or os.environ.get(URL_ENV)) or not (token or os.environ.get(TOKEN_ENV)):
        config = read_config()
    url = url or os.environ.get(URL_ENV) or config.get("url") or DEFAULT_URL
    token = token or os.environ.get(TOKEN_ENV) or config.get("token") or None
    return url.rstrip("/"), token


def describe_error_body(body: Any) -> list[str]:
    """Lines for people: each bad field's messages, or else the ``detail``.

    A 400's ``detail`` joins its fields' messages, so the fields alone say it all.
    """
    if not isinstance(body, dict):
        return [str(body)] if body not in (None, "") else []
    lines = []
    for key, value in body.items():
        if key in ("detail", "code"):
            continue
        # Field errors come as {"field": ["msg", ...]}, nested ones as objects.
        if isinstance(value, list):
            text = "; ".join(str(item) for item in value)
        elif isinstance(value, dict):
            text = "; ".join(f"{k}: {v}" for k, v in value.items())
        else:
            text = str(value)
        lines.append(f"{key}: {text}")
    if not lines and body.get("detail"):
        lines.append(str(body["detail"]))
    return lines


class Client:
    """JSON over one keep-alive session; ``path`` is relative to ``/api/v1/``."""

    def __init__(
        self,
        url: str,
        token: str | None,
        timeout: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url = url.rstrip("/")
        self.api = self.url + "/api/v1/"
        self.token = token
        self.timeout = timeout
        self.sleep = sleep
        self.session = requests.Session()
        self.session.headers["User-Agent"] = f"npulab-cli/{__version__}"
        self.session.headers["Accept"] = "application/json"
        if token:
            self.session.headers["Authorization"] = f"Token {token}"

    def close(self) -> None:
        self.session.close()

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params).json()

    def post(
        self,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        retry: bool = False,
    ) -> requests.Response:
        """A write; ``retry`` only where repeating it is harmless (an idempotency key)."""
        return self.request("POST", path, body=body, headers=headers, retry=retry)

    def request(
        self,
        method: str,
        path: str,
        params: dict[str, Any] | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
        retry: bool | None = None,
    ) -> requests.Response:
        if retry is None:
            retry = method == "GET"
        target = path if path.startswith("http") else self.api + path.lstrip("/")
        query = {key: value for key, value in (params or {}).items() if value is not None}
        attempts_left = READ_RETRIES if retry else 0
        limited_left = RATE_LIMIT_RETRIES
        while True:
            try:
                response = self.session.request(
                    method, target, params=query, json=body, headers=headers, timeout=self.timeout
                )
            except requests.RequestException as error:
                if attempts_left > 0:
                    attempts_left -= 1
                    self.sleep(READ_RETRY_DELAY_S)
                    continue
                raise ApiError(
                    f"could not reach the platform at {self.url}: {_reason(error)}",
                    exits.CLI_UNREACHABLE,
                    transient=True,
                ) from error
            if response.status_code == 429 and limited_left > 0:
                limited_left -= 1
                self.sleep(retry_after(response))
                continue
            if response.status_code in (502, 503, 504) and attempts_left > 0:
                attempts_left -= 1
                self.sleep(READ_RETRY_DELAY_S)
                continue
            if response.status_code >= 400:
                raise self._error(response)
            return response

    def _error(self, response: requests.Response) -> ApiError:
        status = response.status_code
        try:
            body: Any = response.json()
        except ValueError:
            body = response.text[:500].strip()
        said = "; ".join(describe_error_body(body)) or response.reason
        if status == 401:
            hint = "" if self.token else f" (no token: set {TOKEN_ENV} or run `npulab login`)"
            return ApiError(f"not authorised: {said}{hint}", exits.CLI_UNREACHABLE, status, body)
        if status == 403:
            return ApiError(f"forbidden: {said}", exits.CLI_UNREACHABLE, status, body)
        if status == 429:
            return ApiError(
                f"rate limited, gave up after {RATE_LIMIT_RETRIES} retries: {said}",
                exits.CLI_UNREACHABLE,
                status,
                body,
                transient=True,
            )
        if status >= 500:
            return ApiError(
                f"the platform failed (HTTP {status}): {said}",
                exits.CLI_UNREACHABLE,
                status,
                body,
                transient=True,
            )
        # 400, 404, 409 ...: what was asked does not exist or does not fit.
        return ApiError(said, exits.CLI_USAGE, status, body)


def retry_after(response: requests.Response) -> float:
    """Seconds to wait from a Retry-After header (seconds or an HTTP date); 1 without one."""
    value = response.headers.get("Retry-After", "").strip()
    seconds = 1.0
    if value:
        try:
            seconds = float(value)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                when = None
            if when is not None:
                seconds = when.timestamp() - time.time()
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def _reason(error: requests.RequestException) -> str:
    if isinstance(error, requests.ConnectionError):
        return "connection refused or host unknown"
    if isinstance(error, requests.Timeout):
        return "timed out"
    return error.__class__.__name__
