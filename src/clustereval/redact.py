"""Keep secrets out of what a run writes: by name, by value, inside nested settings and inside URLs.

:func:`secret_values` gathers what must never appear: the values of variables whose names say they hold
a secret (``*password*``, ``*token*``, ``*_key``, ...), at any depth of a mapping, and every vault-encrypted
value. :func:`redact` returns a copy of a setting with those values, any secret-named entry and any
credentials in a URL (``https://user:secret@host``) replaced by ``<redacted>``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "<redacted>"
SECRET_NAME = re.compile(r"pass|secret|token|key|credential|auth|cookie|bearer|private", re.I)
URL_CREDENTIALS = re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.-]*://)[^/@\s'\"]+@", re.I)
# Shorter values would redact ordinary words (a password "root" must not blank every "root" in a report).
MIN_SECRET_LENGTH = 6

try:  # ansible-core 2.19 tags decrypted vault values; older versions have their own type
    from ansible._internal._datatag._tags import VaultedValue
except ImportError:  # pragma: no cover - without ansible (the CLI) or an older one
    VaultedValue = None


def vaulted(value: Any) -> bool:
    """Whether ``value`` came from Ansible Vault (encrypted or decrypted)."""
    if type(value).__name__ in ("EncryptedString", "AnsibleVaultEncryptedUnicode"):
        return True
    if VaultedValue is not None:
        try:
            return bool(VaultedValue.is_tagged_on(value))
        except Exception:
            return False
    return False


def secret_values(variables: Mapping[str, Any], skip: Iterable[str] = ("hostvars", "groups", "vars")) -> set[str]:
    """Every string that must not be written: values under secret-looking names, and vault values."""
    found: set[str] = set()
    skipped = set(skip)

    def walk(value: Any, secret: bool) -> None:
        if vaulted(value) or (secret and isinstance(value, str)):
            text = str(value)
            if len(text) >= MIN_SECRET_LENGTH:
                found.add(text)
        elif isinstance(value, Mapping):
            for key, item in value.items():
                walk(item, secret or bool(SECRET_NAME.search(str(key))))
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item, secret)

    for name, value in variables.items():
        if name not in skipped:
            walk(value, bool(SECRET_NAME.search(name)))
    return found


def redact(value: Any, secrets: Iterable[str] = (), name: str = "") -> Any:
    """A copy of ``value`` safe to write: secret-named entries, vault values, the known ``secrets`` and URL
    credentials replaced by ``<redacted>``, at any depth."""
    known = sorted(set(secrets), key=len, reverse=True)  # the longest first: one may contain another
    return _redact(value, known, name)


def _redact(value: Any, secrets: list[str], name: str) -> Any:
    if (name and SECRET_NAME.search(name)) or vaulted(value):
        return REDACTED
    if isinstance(value, Mapping):
        return {key: _redact(item, secrets, str(key)) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_redact(item, secrets, "") for item in value]
    if isinstance(value, str):
        text = URL_CREDENTIALS.sub(lambda m: m.group("scheme") + REDACTED + "@", str(value))
        for secret in secrets:
            text = text.replace(secret, REDACTED)
        return text
    return value
