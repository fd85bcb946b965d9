"""Memory admission of a fit: refuse at /train, before queuing, a fit whose predicted peak
memory (``solver.memory.estimate_fit``, on the path fit() will take) exceeds
``MSVMAV_MAX_FIT_BYTES``."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.core.orm import Dataset
from app.core.problems import invalid
from app.datasets import service as datasets
from solver.comparators.grids import iter_configs
from solver.memory import estimate_fit, gib


def check_fit_memory(
    session: Session,
    dataset: Dataset,
    algorithm: str,
    fixed: dict[str, Any],
    search: dict[str, Any] | None,
    n_train: int,
    limit: int,
) -> None:
    """422 when the fit's predicted peak memory (the largest over a search's configurations,
    on the training rows) exceeds ``limit``."""
    nnz = datasets.stored_nnz(session, dataset)
    configs = iter_configs(search["grid_values"]) if search else [{}]
    try:
        worst = max(
            (estimate_fit(algorithm, n_train, dataset.n_features, nnz, {**fixed, **c},
                          n_classes=len(dataset.classes)) for c in configs),
            key=lambda e: e.peak_bytes,
        )
    except ValueError:  # parameters only fit() can judge: the job reports them as before
        return
    if worst.peak_bytes > limit:
        raise invalid(
            ["body", "dataset_id"],
            f"training {algorithm} on {n_train} rows x {dataset.n_features} features "
            f"({'dense' if nnz is None else f'{nnz} stored values'}) takes the {worst.path} path "
            f"and needs about {gib(worst.peak_bytes)} of memory, more than the "
            f"{gib(limit)} allowed (MSVMAV_MAX_FIT_BYTES); {worst.advice}",
            estimate_bytes=worst.peak_bytes,
            limit_bytes=limit,
            path=worst.path,
        )
