"""Admission of a fit at /train, before queuing: its predicted peak memory
(``solver.memory.estimate_fit``) and duration (``solver.fit_time.estimate_seconds``), on the
path fit() will take. A fit above ``MSVMAV_MAX_FIT_BYTES`` is refused, and above
``MSVMAV_MAX_FIT_SECONDS`` when that is set; the estimate is kept in the job's params."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.orm import Session

from app.core.problems import invalid
from app.datasets import service as datasets
from app.datasets.orm import Dataset
from solver import (
    CALIBRATION_FOLDS,
    FitEstimate,
    estimate_fit,
    estimate_seconds,
    gib,
    iter_configs,
    search_seconds,
)


@dataclass(frozen=True)
class FitAdmission:
    """What admission predicted: the largest configuration's memory estimate and the whole
    job's seconds (every cross-validation fit and the refit; None when not modelled)."""

    memory: FitEstimate
    seconds: float | None
    n_train: int
    nnz: int | None

    def stored(self) -> dict[str, Any]:
        """The job params' ``estimate``."""
        return {
            "peak_bytes": self.memory.peak_bytes,
            "path": self.memory.path,
            "seconds": None if self.seconds is None else round(self.seconds, 3),
        }


def estimate_training(
    session: Session,
    dataset: Dataset,
    algorithm: str,
    fixed: dict[str, Any],
    search: dict[str, Any] | None,
    n_train: int,
) -> FitAdmission | None:
    """The fit's predicted peak memory (the largest over a search's configurations) and
    duration (a search: ``solver.fit_time.search_seconds``, its folds' fits on (cv - 1) / cv
    of the rows as the search shares their work, plus the refit on all rows). None when the
    parameters are ones only fit() can judge (the job reports them as before)."""
    nnz = datasets.stored_nnz(session, dataset)
    configs = iter_configs(search["grid_values"]) if search else [{}]
    n_classes, d = len(dataset.classes), dataset.n_features
    try:
        worst = max(
            (estimate_fit(algorithm, n_train, d, nnz, {**fixed, **c}, n_classes=n_classes)
             for c in configs),
            key=lambda e: e.peak_bytes,
        )
        seconds = _seconds(algorithm, fixed, configs, search, n_train, d, nnz, n_classes)
    except ValueError:
        return None
    if fixed.get("calibration", "none") != "none":
        worst, seconds = _with_calibration(worst, seconds, n_train, d, nnz)
    return FitAdmission(worst, seconds, n_train, nnz)


def _with_calibration(
    memory: FitEstimate, seconds: float | None, n_train: int, d: int, nnz: int | None
) -> tuple[FitEstimate, float | None]:
    """A calibrated fit first fits CALIBRATION_FOLDS clones on (folds - 1) / folds of the
    training rows each (solver.calibration): their rows are a copy held beside the input
    (dense: 8 bytes a value; CSR: ~12 a stored value), and their fits cost about as much as
    the whole fit each, at most."""
    share = (CALIBRATION_FOLDS - 1) / CALIBRATION_FOLDS
    copy = int(share * (nnz * 12 if nnz is not None else n_train * d * 8))
    memory = replace(memory, peak_bytes=memory.peak_bytes + copy)
    return memory, None if seconds is None else seconds * (1 + CALIBRATION_FOLDS * share)


def _seconds(algorithm: str, fixed: dict[str, Any], configs: list[dict[str, Any]],
             search: dict[str, Any] | None, n_train: int, d: int, nnz: int | None,
             n_classes: int) -> float | None:
    if not search:
        return estimate_seconds(algorithm, n_train, d, nnz, fixed, n_classes=n_classes)
    return search_seconds(algorithm, n_train, d, nnz, fixed, list(configs),
                          int(search.get("cv") or 5), n_classes=n_classes)


def check_fit_limits(
    admission: FitAdmission | None,
    dataset: Dataset,
    algorithm: str,
    *,
    max_bytes: int | None,
    max_seconds: float | None,
) -> None:
    """422 when the predicted peak memory exceeds ``max_bytes`` or the predicted duration
    exceeds ``max_seconds`` (each limit when set)."""
    if admission is None:
        return
    worst, nnz, n_train = admission.memory, admission.nnz, admission.n_train
    shape = (f"{algorithm} on {n_train} rows x {dataset.n_features} features "
             f"({'dense' if nnz is None else f'{nnz} stored values'})")
    if max_bytes is not None and worst.peak_bytes > max_bytes:
        raise invalid(
            ["body", "dataset_id"],
            f"training {shape} takes the {worst.path} path and needs about "
            f"{gib(worst.peak_bytes)} of memory, more than the {gib(max_bytes)} allowed "
            f"(MSVMAV_MAX_FIT_BYTES); {worst.advice}",
            estimate_bytes=worst.peak_bytes,
            limit_bytes=max_bytes,
            path=worst.path,
        )
    seconds = admission.seconds
    if max_seconds is not None and seconds is not None and seconds > max_seconds:
        raise invalid(
            ["body", "dataset_id"],
            f"training {shape} takes the {worst.path} path and is predicted to take about "
            f"{seconds:.0f} s, more than the {max_seconds:g} s allowed "
            f"(MSVMAV_MAX_FIT_SECONDS); {worst.advice}",
            estimate_seconds=round(seconds, 3),
            limit_seconds=max_seconds,
            path=worst.path,
        )
