"""The experiments' table: each data set's outcome of an experiment job."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, ForeignKey, Integer, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.core.orm import Base


class ExperimentResult(Base):
    """One data set's outcome of an experiment job (``solver.experiments.ExperimentResult``
    as ``to_dict()``), in the experiment's dataset order. Kept out of ``jobs.result`` so that
    listing jobs never reads the per-split tables and margin curves."""

    __tablename__ = "experiment_results"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    # A plain reference: the result outlives its dataset.
    dataset_id: Mapped[int | None] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(Text)  # a data set's name, plus " (#id)" when repeated
    result: Mapped[dict[str, Any]] = mapped_column(JSON)
