"""The jobs' Prometheus gauge for /metrics: job counts per status, read from the database at
scrape time (jobs run in other processes, so an in-process counter would miss them)."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.jobs.orm import JOB_STATUSES, Job


def job_lines(session: Session) -> list[str]:
    rows = dict(session.execute(select(Job.status, func.count()).group_by(Job.status)).all())
    lines = [
        "# HELP msvmav_jobs Jobs in the database by status.",
        "# TYPE msvmav_jobs gauge",
    ]
    lines += [f'msvmav_jobs{{status="{s}"}} {rows.get(s, 0)}' for s in JOB_STATUSES]
    return lines
