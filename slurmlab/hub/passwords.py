"""Seat passwords kept only as salted scrypt hashes: the hub of a workshop checks a student's password against
these, and nothing that would let anyone log in again (on the hub or the machine) is stored.

    line = hash_secret("a-token")            # "scrypt$16384$8$1$<salt hex>$<hash hex>"
    verify_secret("a-token", line)           # True
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

__all__ = ["hash_secret", "verify_secret"]

# scrypt's cost (n, r, p): about 16 MiB and 30-50 ms a check, enough that a leaked file is slow to guess from
_COST = (2**14, 8, 1)
_PREFIX = "scrypt"


def hash_secret(secret: str, *, salt: bytes | None = None) -> str:
    """One line holding ``secret``'s salted scrypt hash and the cost it was made with."""
    n, r, p = _COST
    salt = salt if salt is not None else secrets.token_bytes(16)
    digest = hashlib.scrypt(secret.encode("utf-8"), salt=salt, n=n, r=r, p=p, dklen=32)
    return f"{_PREFIX}${n}${r}${p}${salt.hex()}${digest.hex()}"


def verify_secret(secret: str, line: str) -> bool:
    """Whether ``secret`` is the one ``line`` (from :func:`hash_secret`) was made from; a malformed line is
    never a match."""
    parts = line.split("$")
    if len(parts) != 6 or parts[0] != _PREFIX or not all(x.isdigit() for x in parts[1:4]):
        return False
    n, r, p = (int(x) for x in parts[1:4])
    if (n, r, p) != _COST:  # only the cost this module makes: a forged line cannot ask for a huge one
        return False
    try:
        salt, expected = bytes.fromhex(parts[4]), bytes.fromhex(parts[5])
    except ValueError:
        return False
    digest = hashlib.scrypt(secret.encode("utf-8"), salt=salt, n=n, r=r, p=p, dklen=len(expected) or 32)
    return hmac.compare_digest(digest, expected)
