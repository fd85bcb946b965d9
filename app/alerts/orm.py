"""The alert rules' table: what to watch (a stored model, or a registered model's alias or
version resolved at each window), the metric, its comparison and level, the window and the
cool-down; and the state the evaluators share through it (the last window claimed, the last
fire, the last window's values for the gauges)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Float, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.core.orm import Base, UTCDateTime, utcnow


class AlertRule(Base):
    __tablename__ = "alert_rules"
    __table_args__ = {"sqlite_autoincrement": True}

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), default="")
    model_id: Mapped[int | None] = mapped_column(Integer)
    model: Mapped[str | None] = mapped_column(String(220))  # "name@alias", "name/2", "name"
    metric: Mapped[str] = mapped_column(String(32))
    comparison: Mapped[str] = mapped_column(String(2))
    level: Mapped[float] = mapped_column(Float)
    window_seconds: Mapped[int] = mapped_column(Integer)
    cooldown_seconds: Mapped[int] = mapped_column(Integer)
    min_rows: Mapped[int] = mapped_column(Integer, default=1)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    evaluated_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_fired_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_window: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
