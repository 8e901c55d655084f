"""Entry point: ``python -m train ...``."""

from train.cli import main

# Guarded: the image decoders (multiprocessing, spawn) import this module as __mp_main__.
if __name__ == "__main__":
    raise SystemExit(main())
