"""``python -m clustereval``: the CLI, for controllers that have only the collection (and the package it carries)."""

from clustereval.cli import main

raise SystemExit(main())
