"""One HTTP transport for the OpenAI-compatible clients (``OpenAIPolicy``, ``InferenceClient``): standard library
only (``http.client``), a bearer token, and retries with backoff on what is transient (a connection error, 429,
5xx). Any other HTTP status raises at once with the server's message."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import SplitResult


def request(
    parts: SplitResult,
    method: str,
    path: str,
    body: Mapping[str, Any] | None,
    *,
    api_key: str | None,
    timeout_s: float,
    retries: int,
    fail: Callable[[str], Exception],
    describe: Callable[[bytes], str] = lambda raw: repr(raw[:300]),
    hint: str = "",
) -> bytes:
    """The body of ``method parts.netloc + path`` (status 200). ``fail(message)`` builds the error raised: at once
    for a non-transient status (``describe(raw)`` names the server's message), after ``retries`` retries otherwise
    (``hint`` is appended: what to check)."""
    payload = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    where = f"{parts.scheme}://{parts.netloc}{path}"
    last: Exception | None = None
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(min(8.0, 0.5 * 2**attempt))
        conn = conn_cls(parts.netloc, timeout=timeout_s)
        try:
            conn.request(method, path, body=payload, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
            if resp.status == 429 or resp.status >= 500:
                last = fail(f"{where}: HTTP {resp.status}: {describe(raw)}")
                continue
            if resp.status != 200:
                raise fail(f"{where}: HTTP {resp.status}: {describe(raw)}")
            return raw
        except (OSError, http.client.HTTPException) as e:
            last = e
        finally:
            conn.close()
    raise fail(f"{where} failed after {retries + 1} attempts: {last}{hint}") from last
