"""Parser for ``nvidia-smi boost-slider -l`` (driver R535+): each GPU's vboost slider.

The table is ``GPU  Boostslider  Max  Min  Current  Default`` with one ``vboost`` row per GPU (with or
without ``|`` column rules). ``nvidia-smi-boost-slider`` gives ``gpus`` (``{"gpu", "max", "min",
"current", "default"}``) and ``not_supported`` (the tool said vboost is not supported on these GPUs, as
on B300/GB300); ``complete`` is False when neither a row nor that message was found.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result

TOOL = "nvidia-smi-boost-slider"
_ROW = re.compile(r"^\|?\s*(\d+)\s*\|?\s*vboost\s*\|?\s*(\d+)\s*\|?\s*(\d+)\s*\|?\s*(\d+)\s*\|?\s*(\d+)", re.I | re.M)


def rows(text: str) -> list[dict[str, int]]:
    return [{"gpu": int(g), "max": int(mx), "min": int(mn), "current": int(cur), "default": int(df)}
            for g, mx, mn, cur, df in _ROW.findall(text)]


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    gpus = rows(text)
    not_supported = "not supported" in text.lower()
    complete = bool(gpus) or not_supported
    return result(TOOL, "table", complete=complete, warnings=[] if complete else ["no vboost row"], gpus=gpus,
                  not_supported=not_supported)
