"""What the linear and the kernel cluster fits share (``_fit``, ``_kernel``): the one-vs-rest
tasks' targets left on the cluster, the relay of the fit's callback while a pass runs, and the
checks and attributes set before the iterations."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils.multiclass import check_classification_targets

from .._base import Callback
from ..msvmav import MSVMAv, check_feature_scale
from ._cluster import ClusterRows


class Target:
    """One one-vs-rest task's targets, left on the cluster: t_i = +1 where y_i == positive.
    ``iterate`` reads only ``size`` (n)."""

    def __init__(self, positive: Any, size: int, task: int) -> None:
        self.positive, self.size, self.task = positive, size, task


class Targets:
    """The (n, T) targets of ``MSVMAv._run_tasks``: column t is a ``Target``."""

    def __init__(self, n: int, positives: list) -> None:
        self.positives, self.n = positives, n
        self.shape = (n, len(positives))

    def __getitem__(self, key: tuple) -> Target:
        t = key[1]
        return Target(self.positives[t], self.n, t)


class Relay:
    """The fit's callback: passed each iteration's record; ``tick`` (while a pass runs on the
    cluster) calls it with the last record plus {"stage": "cluster_pass", "done": blocks
    finished, "of": blocks}, its return value ignored, its exceptions propagated (after the
    pass's futures are cancelled: ``ClusterRows.wait``)."""

    def __init__(self, callback: Callback, max_iter: int, n_tasks: int) -> None:
        self.callback = callback
        self.last: dict = {"iteration": 0, "max_iter": max_iter, "task": 0, "n_tasks": n_tasks}

    def __call__(self, info: dict) -> Any:
        self.last = info
        return self.callback(info)

    def start(self, task: int) -> None:
        self.last = {**self.last, "iteration": 0, "task": task}

    def tick(self, done: int, of: int) -> None:
        self.callback({**self.last, "stage": "cluster_pass", "done": done, "of": of})


def start_fit(estimator: MSVMAv, rows: ClusterRows, summary: dict) -> None:
    """The checks and attributes of ``MarginClassifier.fit`` before its iterations."""
    n, classes = summary["n"], summary["labels"]
    if n < 2:
        raise ValueError(f"X: needs at least 2 rows, got {n}")
    if not summary["finite"]:
        raise ValueError("X: contains NaN or infinity")
    check_classification_targets(classes)
    if classes.size < 2:
        raise ValueError(
            f"y: needs at least two classes, got a single class {classes.tolist()!r}")
    check_feature_scale(np.array([summary["largest"]]))
    rows.n = n
    estimator.classes_ = classes
    estimator.n_features_in_ = int(summary["sums"].size)
    estimator.stopped_early_ = False
    estimator.calibrator_ = None
    estimator.feature_means_ = summary["sums"] / n
    estimator.history_ = []
    estimator.dual_coef_ = estimator.X_fit_ = None
    estimator.kernel_approximation_ = estimator.gamma_ = None
    estimator.rank_ = estimator.kernel_error_ = None
    estimator.converged_ = False
