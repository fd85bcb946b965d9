"""The log writer's bounded sample of each model-minute's scaled rows (issue 47,
app.monitoring.samples): a uniform sample without replacement, merged batch by batch, at most
``capacity`` rows, values kept to 1/65535."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import scipy.sparse as sp
from scipy import stats
from sqlalchemy.orm import Session

from app.monitoring import samples
from app.monitoring.orm import FeatureCounts


def test_the_sample_is_bounded_and_made_of_the_offered_rows():
    rng = np.random.default_rng(3)
    X = rng.random((3000, 4))
    X[:, 0] = np.arange(3000) / 3000  # a row's own tag
    held = None
    for start in range(0, 3000, 250):
        held = samples.merge(held, X[start:start + 250], np.full(250, float(start)), rng)
    assert held.rows.shape == (samples.capacity(4), 4) == (1000, 4)
    rows = held.rows.astype(float) / 65535
    tag = np.rint(rows[:, 0] * 3000).astype(int)
    assert len(set(tag)) == 1000  # without replacement
    assert np.abs(rows - X[tag]).max() <= 0.5 / 65535 + 1e-12
    assert np.array_equal(held.at, (tag // 250) * 250.0)  # each row keeps its batch's time
    # uniform over the batches: the kept rows' tags against the uniform law on [0, 3000)
    assert stats.kstest(tag, stats.randint(0, 3000).cdf).pvalue > 0.001


def test_a_wide_or_sparse_batch_is_kept_within_its_cells():
    rng = np.random.default_rng(0)
    X = sp.random(5000, 800, density=0.01, format="csr", random_state=1)
    held = samples.merge(None, X, np.zeros(5000), rng)
    assert held.rows.shape == (samples.SAMPLE_CELLS // 800, 800)
    assert samples.columns(held)["sample"] is not None and samples.columns(None)["sample"] is None


def test_a_window_reads_its_rows_exactly_from_a_bounded_number_of_minutes(engine):
    t0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    rng = np.random.default_rng(4)
    with Session(engine) as session:
        for k in range(samples.READ_PARTS + 20):  # more minutes than a report reads
            minute = t0 + timedelta(minutes=k)
            X = np.full((10, 2), k / 100.0)
            at = np.full(10, (minute + timedelta(seconds=30)).timestamp())
            held = samples.merge(None, X, at, rng)
            session.add(FeatureCounts(model_id=3, minute=minute, n_rows=10, n_features=2,
                                      bins=20, counts=b"", **samples.columns(held)))
        session.commit()
        rows, n = samples.window_rows(session, 3, 2, None, None)
        assert n == 10 * samples.READ_PARTS and rows.shape == (n, 2)
        # a window inside one minute: only its rows, exactly (the times filter them)
        since = t0 + timedelta(minutes=5, seconds=20)
        rows, n = samples.window_rows(session, 3, 2, since, since + timedelta(seconds=20))
        assert n == 10 and np.allclose(rows, 0.05, atol=1e-4)
        rows, n = samples.window_rows(session, 3, 2, since, since + timedelta(seconds=5))
        assert n == 0 and rows.shape == (0, 2)
