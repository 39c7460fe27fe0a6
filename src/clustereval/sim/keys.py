"""One way for profile sections to refuse what they cannot show: a mapping whose keys are all known."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def known_mapping(where: str, value: Any, known: Iterable[str], required: str | None = None,
                  error: type[ValueError] = ValueError) -> dict[str, Any]:
    """``value`` when it is a mapping of ``known`` keys (with ``required`` among them); else ``error`` naming
    ``where`` and the keys it may have (ProfileError for the profile's own sections, ValueError in areas)."""
    keys = sorted(known)
    if not isinstance(value, dict) or (required is not None and required not in value):
        need = f"a {required} (keys {keys})" if required else f"keys {keys}"
        raise error(f"{where} must be a mapping with {need}")
    unknown = set(value) - set(keys)
    if unknown:
        raise error(f"{where} has unknown keys {sorted(unknown)}; known: {keys}")
    return value
