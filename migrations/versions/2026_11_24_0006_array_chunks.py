"""Stored arrays are cut into chunks: ``dataset_arrays`` and ``model_arrays`` gain ``chunk``.

An array is the bytes of its npy file in rows of at most ``MSVMAV_ARRAY_CHUNK_BYTES`` (64 MiB by
default), numbered by ``chunk`` (``app.core.storage``). Existing rows become chunk 0; a row
larger than one chunk is split here, in SQL (``substr`` on the server, nothing read into this
process), so an array PostgreSQL could store but not send back (over ~512 MiB) becomes readable.
The reader also takes a whole npy file at chunk 0, so the split is for the size, not the format.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

TABLES = (("dataset_arrays", "dataset_id", "datasets"), ("model_arrays", "model_id", "models"))


def upgrade() -> None:
    from app.core.config import Settings

    chunk_bytes = Settings().array_chunk_bytes
    for table, owner, parent in TABLES:
        if op.get_bind().dialect.name == "sqlite":
            _rebuild_sqlite(table, owner, parent, with_chunk=True)
        else:
            op.add_column(table, sa.Column("chunk", sa.Integer(), nullable=False,
                                           server_default="0"))
            op.alter_column(table, "chunk", server_default=None, existing_type=sa.Integer())
            op.drop_constraint(f"pk_{table}", table, type_="primary")
            op.create_primary_key(f"pk_{table}", table, [owner, "name", "chunk"])
        _split(table, owner, chunk_bytes)


def downgrade() -> None:
    for table, owner, parent in TABLES:
        _join(table, owner)
        if op.get_bind().dialect.name == "sqlite":
            _rebuild_sqlite(table, owner, parent, with_chunk=False)
        else:
            op.drop_constraint(f"pk_{table}", table, type_="primary")
            op.drop_column(table, "chunk")
            op.create_primary_key(f"pk_{table}", table, [owner, "name"])


def _split(table: str, owner: str, size: int) -> None:
    """Rows of chunk 0 longer than ``size`` bytes -> chunks 0..k of ``size`` bytes each."""
    op.execute(sa.text(
        f"INSERT INTO {table} ({owner}, name, chunk, data) "
        f"WITH RECURSIVE parts(owner, name, k) AS ("
        f" SELECT {owner}, name, 1 FROM {table} WHERE chunk = 0 AND length(data) > :size"
        f" UNION ALL"
        f" SELECT p.owner, p.name, p.k + 1 FROM parts p JOIN {table} t"
        f"  ON t.{owner} = p.owner AND t.name = p.name AND t.chunk = 0"
        f"  WHERE (p.k + 1) * :size < length(t.data))"
        f" SELECT p.owner, p.name, p.k, substr(t.data, p.k * :size + 1, :size)"
        f" FROM parts p JOIN {table} t ON t.{owner} = p.owner AND t.name = p.name"
        f" AND t.chunk = 0"
    ).bindparams(size=size))
    op.execute(sa.text(
        f"UPDATE {table} SET data = substr(data, 1, :size) "
        f"WHERE chunk = 0 AND length(data) > :size"
    ).bindparams(size=size))


def _join(table: str, owner: str) -> None:
    """Downgrade: each split array's chunks joined back into its chunk-0 row, one array at a
    time (an array beyond what one value can hold cannot be downgraded)."""
    bind = op.get_bind()
    split = bind.execute(sa.text(
        f"SELECT DISTINCT {owner}, name FROM {table} WHERE chunk > 0")).all()
    for owner_id, name in split:
        parts = bind.execute(sa.text(
            f"SELECT data FROM {table} WHERE {owner} = :o AND name = :n ORDER BY chunk"),
            {"o": owner_id, "n": name}).scalars()
        whole = b"".join(bytes(p) for p in parts)
        bind.execute(sa.text(
            f"UPDATE {table} SET data = :d WHERE {owner} = :o AND name = :n AND chunk = 0"),
            {"d": whole, "o": owner_id, "n": name})
    op.execute(sa.text(f"DELETE FROM {table} WHERE chunk > 0"))


def _rebuild_sqlite(table: str, owner: str, parent: str, *, with_chunk: bool) -> None:
    # SQLite cannot change a primary key: rebuild the table under its own name (so that its
    # stored CREATE statement is the one create_all emits) and copy the rows.
    old = f"_{table}_old"
    op.rename_table(table, old)
    columns = [
        sa.Column(owner, sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
    ]
    key = [owner, "name"]
    if with_chunk:
        columns.append(sa.Column("chunk", sa.Integer(), nullable=False))
        key.append("chunk")
    op.create_table(
        table,
        *columns,
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            [owner], [f"{parent}.id"], name=op.f(f"fk_{table}_{owner}_{parent}"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint(*key, name=op.f(f"pk_{table}")),
    )
    chunk = ", 0" if with_chunk else ""
    names = f"{owner}, name{', chunk' if with_chunk else ''}, data"
    op.execute(f"INSERT INTO {table} ({names}) SELECT {owner}, name{chunk}, data FROM {old}")
    op.drop_table(old)
