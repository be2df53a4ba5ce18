"""The server's one cache of JSON answers, each with an ETag.

The poller writes a payload per key ("status", "nodes", "queue:all", ...); every client
reads the same bytes. The big answers arrive already encoded from the poll worker
(:meth:`ResponseCache.put_encoded`): one encoding per state, never one per request. The ETag is a hash of the canonical JSON, so an unchanged cluster
keeps its ETag across polls and clients get 304 Not Modified.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CacheEntry", "ResponseCache", "etag_of", "etag_matches"]


def etag_of(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    """True when an If-None-Match header names ``etag`` (weak forms and lists too)."""
    if not if_none_match:
        return False
    if if_none_match.strip() == "*":
        return True
    for tag in if_none_match.split(","):
        tag = tag.strip()
        if tag.startswith("W/"):
            tag = tag[2:]
        if tag == etag:
            return True
    return False


@dataclass(frozen=True)
class CacheEntry:
    body: bytes  # the JSON of one of the answers of server/contract.py
    etag: str
    changed_at: float
    checked_at: float

    @property
    def payload(self) -> Mapping[str, Any]:
        """The answer as data (decoded on demand: the routes send ``body`` as it is)."""
        decoded: Mapping[str, Any] = json.loads(self.body)
        return decoded


class ResponseCache:
    """Key -> latest JSON answer. Thread-safe: the poller may write from an executor."""

    def __init__(self) -> None:
        self._entries: dict[str, CacheEntry] = {}
        self._lock = threading.Lock()

    @staticmethod
    def encode(payload: Mapping[str, Any]) -> bytes:
        return json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str).encode()

    def put(self, key: str, payload: Mapping[str, Any]) -> bool:
        """Store ``payload`` under ``key``; True when it differs from what was there."""
        body = self.encode(payload)
        return self.put_encoded(key, body, etag_of(body))

    def put_encoded(self, key: str, body: bytes, etag: str) -> bool:
        """Store an answer encoded elsewhere (by the poll worker); True when it differs from what was there."""
        now = time.time()
        with self._lock:
            old = self._entries.get(key)
            if old is not None and old.etag == etag:
                self._entries[key] = CacheEntry(old.body, etag, old.changed_at, now)
                return False
            self._entries[key] = CacheEntry(body, etag, now, now)
            return True

    def get(self, key: str) -> CacheEntry | None:
        with self._lock:
            return self._entries.get(key)

    def drop(self, key: str) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def keys(self) -> list[str]:
        with self._lock:
            return sorted(self._entries)
