"""Values quoted in error messages about hardware data (profiles, captures)."""

from __future__ import annotations

__all__ = ["quoted"]


def quoted(value: object) -> str:
    """repr() for an error message: short, and safe on ints too long or nesting too deep for repr()."""
    try:
        return repr(value)[:200]
    except (ValueError, RecursionError):
        return f"<{type(value).__name__} too large or deep to show>"
