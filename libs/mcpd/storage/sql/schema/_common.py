"""Column groups and conventions shared by the three SQL schemas.

Nested spec entities that a query filters, groups or sorts on are flattened into columns
(Correlation, the scalar parts of TokenUsage and Cost); the rest of a nested entity is kept as a
JSON document. Enumerations are stored as the spec's lowercase value names (`agent_run`,
`error`), which read the same in SQL, in the REST API and in the spec.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Boolean, Column, Double, Index, MetaData, Text

from mcpd.signals.messages import CORRELATION_FIELDS
from mcpd.storage.sql.types import Count, JsonDocument

# Deterministic constraint names, identical on both dialects, so migrations can name them.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
}


def new_metadata() -> MetaData:
    """A MetaData with mcpd's naming convention."""
    return MetaData(naming_convention=NAMING_CONVENTION)


def correlation_columns(*, exclude: tuple[str, ...] = ()) -> list[Column[Any]]:
    """Correlation, flattened, without `project` (the caller declares that as a key column)."""
    return [Column(name, Text, nullable=True) for name in CORRELATION_FIELDS if name not in exclude]


def usage_columns() -> list[Column[Any]]:
    """TokenUsage: the three totals as columns (summed by analytics), the details as JSON."""
    return [
        Column("input_tokens", Count, nullable=True),
        Column("output_tokens", Count, nullable=True),
        Column("total_tokens", Count, nullable=True),
        Column("usage_details", JsonDocument, nullable=True),
    ]


def cost_columns() -> list[Column[Any]]:
    """Cost, flattened; every column NULL when the entity carries no cost."""
    return [
        Column("cost_currency", Text, nullable=True),
        Column("input_cost", Double, nullable=True),
        Column("output_cost", Double, nullable=True),
        Column("total_cost", Double, nullable=True),
        Column("cost_price_book", Text, nullable=True),
        Column("cost_is_estimated", Boolean, nullable=True),
    ]


def index(table: str, *columns: str, unique: bool = False) -> Index:
    """An index named by the convention (`ix_<table>_<col>_<col>`), declared by column name."""
    prefix = "uq" if unique else "ix"
    return Index(f"{prefix}_{table}_{'_'.join(columns)}", *columns, unique=unique)
