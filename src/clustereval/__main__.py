"""``python -m clustereval``: the CLI, for controllers where only the collection (with its bundled package) is installed."""

from clustereval.cli import main

raise SystemExit(main())
