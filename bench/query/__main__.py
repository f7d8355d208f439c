"""``python -m bench.query``: the same as ``python -m bench.query.run``."""

from __future__ import annotations

import sys

from bench.query.run import main

if __name__ == "__main__":
    sys.exit(main())
