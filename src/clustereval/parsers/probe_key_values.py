"""Parser for the audit probes of our own that print one ``key=value`` or ``key: value`` line per fact.

``probe-key-equals-value`` reads ``key=value`` lines (``access_identity``, ``access_ssh_peer``, the
``software_*`` probes, the Kubernetes ``k8s_pvc_test``); ``probe-key-colon-value`` reads ``key: value``
lines (``gpustack_node``, ``isolation_node``). Both give ``values``: ``{key: [value, ...]}`` in the order
printed, since a key may repeat (one ``pam=`` line per PAM module). A key is a word (letters, digits,
``_``); keys and values are stripped; any other line (a tool's own output that slipped through, a
continuation line) is ignored, so the result never depends on what else a node prints.

Whether the output is whole is each probe's own convention (``gpustack_node`` ends with ``end: ok``,
``k8s_pvc_test`` with ``end=ok``); its reader judges that from ``values``.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result

KEY = re.compile(r"[A-Za-z0-9_]+")


def key_values(text: str, separator: str = "=") -> dict[str, list[str]]:
    """``key<separator>value`` lines of ``text`` as ``{key: [values in order]}`` (repeated keys kept)."""
    out: dict[str, list[str]] = {}
    for line in str(text or "").splitlines():
        key, sep, value = line.partition(separator)
        key = key.strip()
        if sep and KEY.fullmatch(key):
            out.setdefault(key, []).append(value.strip())
    return out


def first(values: dict[str, list[str]], key: str, default: str = "") -> str:
    """The first value printed for ``key`` (``default`` when the key never appears)."""
    found = values.get(key) or []
    return found[0] if found else default


@register("probe-key-equals-value")
def parse_equals(text: str) -> dict[str, Any]:
    return result("probe-key-equals-value", "key=value", complete=True, values=key_values(text, "="))


@register("probe-key-colon-value")
def parse_colon(text: str) -> dict[str, Any]:
    return result("probe-key-colon-value", "key: value", complete=True, values=key_values(text, ":"))
