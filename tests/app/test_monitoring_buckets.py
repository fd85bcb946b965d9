"""The monitoring report's labelled rows per UTC minute, hour or day (``?bucket=``, issue 47):
rows logged across several hours with feedback, each bucket's n, accuracy and mean margin
computed again here from the rows themselves."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sqlalchemy.orm import Session

from app.monitoring.orm import PredictionLog
from tests.app.support import trained_model

pytestmark = pytest.mark.postgres  # timestamps per backend: the PostgreSQL twin runs too

T0 = datetime(2026, 11, 30, 22, 50, 15, tzinfo=UTC)


def _rows(model_id: int) -> list[PredictionLog]:
    rng = np.random.default_rng(11)
    rows = []
    for i in range(120):  # every 3 min 7 s: 22:50 on 30 Nov to past 05:00 on 1 Dec
        decision = float(rng.normal())
        rows.append(PredictionLog(
            model_id=model_id, prediction_id=f"r{i}", created_at=T0 + timedelta(seconds=187 * i),
            decision=decision, predicted=int(decision > 0), clipped=False,
            true_class=None if i % 5 == 0 else int(rng.integers(0, 2))))
    return rows


def _expected(rows: list[PredictionLog], fmt: str, rest: str) -> list[dict]:
    groups: dict[str, list[PredictionLog]] = defaultdict(list)
    for r in rows:
        if r.true_class is not None:
            groups[r.created_at.strftime(fmt)].append(r)
    out = []
    for key in sorted(groups):
        part = groups[key]
        margins = [(1.0 if r.true_class == 1 else -1.0) * r.decision for r in part]
        out.append({"start": key + rest, "n": len(part),
                    "accuracy": np.mean([r.predicted == r.true_class for r in part]),
                    "mean": np.mean(margins)})
    return out


@pytest.mark.parametrize("bucket, fmt, rest", [
    ("hour", "%Y-%m-%dT%H", ":00:00Z"),
    ("minute", "%Y-%m-%dT%H:%M", ":00Z"),
    ("day", "%Y-%m-%d", "T00:00:00Z"),
])
def test_labelled_rows_per_bucket(client, worker, engine, bucket, fmt, rest):
    model = trained_model(client, worker)
    rows = _rows(model["id"])
    expected = _expected(rows, fmt, rest)
    with Session(engine) as s:
        s.add_all(rows)
        s.commit()
    r = client.get(f"/models/{model['id']}/monitoring", params={"bucket": bucket})
    assert r.status_code == 200, r.text
    labelled = r.json()["labelled"]
    assert labelled["bucket"] == bucket
    got = labelled["buckets"]
    assert [b["start"] for b in got] == [e["start"] for e in expected]
    assert len(got) > 1 and sum(b["n"] for b in got) == labelled["n"] == 96
    for b, e in zip(got, expected, strict=True):
        assert b["n"] == e["n"]
        assert b["accuracy"] == pytest.approx(e["accuracy"])
        assert b["mean"] == pytest.approx(e["mean"])
    # the daily list stays as it was, whatever the bucket
    assert [d["day"] for d in labelled["daily"]] == ["2026-11-30", "2026-12-01"]


def test_an_unknown_bucket_is_a_422_naming_it(client, worker):
    model = trained_model(client, worker)
    r = client.get(f"/models/{model['id']}/monitoring", params={"bucket": "week"})
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["query", "bucket"]
