"""``python -m bench.overload``: the same as ``python -m bench.overload.run``."""

from __future__ import annotations

import sys

from bench.overload.run import main

if __name__ == "__main__":
    sys.exit(main())
