"""Child process of test_durability: writes committed transactions until it is killed.

Usage: durability_child.py DB_PATH trace|control

Prints `ready` once migrated, then, after each transaction has committed, the transaction's
number. A number on stdout is an acknowledgement: the parent may kill this process at any
moment, and every acknowledged transaction must survive.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sqlalchemy import insert

from mcpd.storage.sql.control_store import SqlControlStore
from mcpd.storage.sql.engine import Synchronous, create_sqlite_engine
from mcpd.storage.sql.schema import trace
from mcpd.storage.sql.stores import SqlTraceStore

ROWS_PER_TRANSACTION = 20


def main() -> None:
    path, kind = Path(sys.argv[1]), sys.argv[2]
    if kind == "trace":
        # The trace store's setting, the weaker of the two (synchronous=NORMAL).
        store = SqlTraceStore(create_sqlite_engine(path, synchronous=Synchronous.NORMAL))
        store.migrate()
        print("ready", flush=True)
        number = 0
        while True:
            rows = [
                {
                    "project": "p",
                    "log_id": f"{number}-{i}",
                    "timestamp": number,
                    "level": "info",
                    "message": "x" * 500,
                    "received_at": number,
                }
                for i in range(ROWS_PER_TRANSACTION)
            ]
            with store.engine.begin() as conn:
                conn.execute(insert(trace.logs), rows)
            print(number, flush=True)
            number += 1
    else:
        control = SqlControlStore(create_sqlite_engine(path, synchronous=Synchronous.FULL))
        control.migrate()
        print("ready", flush=True)
        number = 0
        while True:
            control.ensure_project(f"project-{number}", "x" * 500)
            print(number, flush=True)
            number += 1


if __name__ == "__main__":
    main()
