"""The body of every store's Alembic `env.py`.

Migrations run only through `mcpd.storage.sql.migrate.migrate`, which opens the transaction
and hands its connection over in `Config.attributes`; there is no offline (`--sql`) mode and no
URL in a config file.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from alembic import context
from alembic.runtime.migration import MigrationContext, MigrationInfo

from mcpd.storage.sql.migrate import (
    APPLIED_ATTR,
    CONNECTION_ATTR,
    STORE_ATTR,
    include_name_for,
)
from mcpd.storage.sql.schema import METADATA, StoreName


def run_env() -> None:
    """Run the pending migrations of the store named in the Config, on its connection."""
    attributes = context.config.attributes
    connection = attributes.get(CONNECTION_ATTR)
    if connection is None:
        raise RuntimeError(
            "mcpd migrations run programmatically, through mcpd.storage.sql.migrate.migrate"
        )
    store = StoreName(attributes[STORE_ATTR])
    applied: list[str] = attributes.setdefault(APPLIED_ATTR, [])

    def record(
        ctx: MigrationContext,
        step: MigrationInfo,
        heads: Collection[Any],
        run_args: Mapping[str, Any],
    ) -> None:
        if step.is_upgrade and step.up_revision_id is not None:
            applied.append(step.up_revision_id)

    context.configure(
        connection=connection,
        target_metadata=METADATA[store],
        version_table=store.version_table,
        include_name=include_name_for(store),
        on_version_apply=record,
    )
    # The caller's transaction is already open, so this does not commit on its own: every
    # pending migration lands, or none does.
    with context.begin_transaction():
        context.run_migrations()
