"""``python -m bench.sessions``: the same as ``python -m bench.sessions.run``."""

from __future__ import annotations

import sys

from bench.sessions.run import main

if __name__ == "__main__":
    sys.exit(main())
