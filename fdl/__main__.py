"""``python -m fdl`` runs the command-line interface."""

from fdl.cli import main

raise SystemExit(main())
