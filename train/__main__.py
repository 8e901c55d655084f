"""Entry point: ``python -m train ...``."""

from train.cli import main

raise SystemExit(main())
