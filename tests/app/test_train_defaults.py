"""/train with defaults (issue 49): the kernel width fits the data."""

from __future__ import annotations

import numpy as np
import pytest

from solver.scaling import MinMaxScaling
from tests.app.support import blobs, to_csv, trained_model


def test_default_rbf_width_is_scale_of_the_scaled_training_rows(client, worker):
    X, y = blobs(n=60, d=4)
    model = trained_model(client, worker, to_csv(X, y), kernel="rbf", calibration="none")
    Xs = MinMaxScaling.fit(X).transform(X)  # every row trains: the scaling is fitted on all
    gamma = model["kernel_summary"]["gamma"]
    assert gamma == pytest.approx(1.0 / (X.shape[1] * np.var(Xs)), rel=1e-6)
    assert model["params"]["gamma"] == "scale"


def test_auto_width_is_one_over_d(client, worker):
    X, y = blobs(n=60, d=4)
    model = trained_model(client, worker, to_csv(X, y), kernel="rbf", gamma="auto",
                          calibration="none")
    assert model["kernel_summary"]["gamma"] == pytest.approx(0.25, rel=1e-12)
