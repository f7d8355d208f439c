"""``python -m bench.ingest``: the same as ``python -m bench.ingest.run``."""

from __future__ import annotations

import sys

from bench.ingest.run import main

if __name__ == "__main__":
    sys.exit(main())
