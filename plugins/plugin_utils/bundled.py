"""Make the ``clustereval`` package importable for the collection's controller plugins.

The collection carries its Python package in ``src/`` (the built tarball includes it), so a plain
``ansible-galaxy collection install`` is enough: every controller plugin imports this module before
``clustereval``, and it puts the bundled copy first on ``sys.path`` so the plugins always run the
package they were released with. A collection copied by ``pip install clustereval`` has no ``src/``
(the package is installed beside it) and this does nothing. Only ansible-core's own dependencies
(PyYAML, Jinja2) are needed to run checks; matplotlib (report figures) and orjson (faster reads) are
in requirements.txt and optional at run time.
"""

from __future__ import annotations

import sys
from pathlib import Path

BUNDLED_SRC = Path(__file__).resolve().parents[2] / "src"


def ensure_importable() -> None:
    if "clustereval" in sys.modules:
        return
    if (BUNDLED_SRC / "clustereval" / "__init__.py").is_file() and str(BUNDLED_SRC) not in sys.path:
        sys.path.insert(0, str(BUNDLED_SRC))
    try:
        import clustereval  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"the clustereval.gpu collection needs its Python package 'clustereval' ({exc}); the collection "
            f"normally carries it in {BUNDLED_SRC}, which is missing: reinstall the collection from its built "
            "tarball, or `pip install clustereval`") from exc


ensure_importable()
