"""Train jobs on the Dask cluster (issue 32): when ``MSVMAV_DASK_SCHEDULER`` is set and the
dataset is by reference (or its feature matrix is larger than ``MSVMAV_DASK_FIT_MIN_BYTES``),
the job builds dask arrays from the dataset's partitions — each Parquet file read and encoded
by the one ``Encoder`` and min-max scaled on the worker that holds it — and fits a linear
MSVMAv with ``solver.distributed.fit_on_cluster``. The model is persisted as any other.

Kernels "rbf" and "poly" fit the low-rank kernel path there (landmarks from a sample of the
partitions, each partition mapped to its features on its worker: ``solver.distributed``).
Calibration ("sigmoid", the default, or "isotonic") is fitted there on out-of-fold decision
values of folds of partitions, so a cluster model has probabilities at /predict as a local one
does. What the cluster fit cannot do is refused at /train (422): another algorithm, another
kernel, a search, a hold-out split, calibration of a dataset of one partition, a rank (or a
partition) that would not fit a worker's memory however its rows are held (features or raw
rows kept between passes, or every partition read again on every pass: the solver's memory
plan from the workers' own readings). The
training summary's margins are reduced over the partitions on the workers
(``solver.distributed.cluster_margin_statistics``: exact sums, counts, histogram and CDF, the
quantiles from a KLL sketch with its stated rank error): no row comes to this process.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from app.core.config import Settings
from app.core.jsonable import jsonable
from app.core.problems import invalid
from app.datasets import reference
from app.datasets.orm import Dataset
from app.datasets.parquet import read_partition
from app.models.schemas import TrainOutcome
from app.training import pipeline
from app.training.fit_plan import FitPlan
from app.training.schemas import TrainRequest
from solver import MinMaxScaling, estimator_class

#: rows per block of an uploaded dataset sent to the cluster
UPLOADED_BLOCK_ROWS = 100_000


def on_cluster(dataset: Dataset, settings: Settings) -> bool:
    """Is this dataset fitted on the cluster?"""
    if not settings.dask_scheduler:
        return False
    if dataset.reference is not None:
        return True
    limit = settings.dask_fit_min_bytes
    return limit is not None and dataset.n_rows * dataset.n_features * 8 > limit


def cluster_params(request: TrainRequest, estimator_params: dict[str, Any],
                   dataset: Dataset | None = None) -> dict[str, Any]:
    """The estimator's parameters for a fit on the cluster. Calibration is the local default
    (its folds are of partitions: ``solver.distributed``), except on a dataset of fewer than
    two partitions when the request did not ask for it: no probabilities then (an explicit
    calibration there is refused by ``check_request``)."""
    params = dict(estimator_params)
    if "calibration" not in request.model_fields_set and dataset is not None \
            and partitions(dataset) < 2:
        params["calibration"] = "none"
    return params


def partitions(dataset: Dataset) -> int:
    """The row blocks the cluster fit gets: the files of a dataset by reference, else
    UPLOADED_BLOCK_ROWS-row blocks."""
    if dataset.reference is not None:
        return len(dataset.reference.files)
    return -(-dataset.n_rows // UPLOADED_BLOCK_ROWS)


def check_request(request: TrainRequest, estimator_params: dict[str, Any],
                  dataset: Dataset | None = None, settings: Settings | None = None) -> None:
    """422 for what the cluster fit cannot do, naming the field
    (``solver.distributed.check_cluster_params`` says what it cannot honour); with the
    dataset and settings, a kernel fit's given rank (``approximation="low_rank"``,
    ``n_components``) whose features would not fit the workers' memory limits, or a linear
    fit's partition that would not (``check_rank_memory``)."""
    from solver import check_cluster_params

    why = "the fit on the Dask cluster (MSVMAV_DASK_SCHEDULER, dataset by reference) is"
    if request.algorithm != "msvmav":
        raise invalid(["body", "algorithm"], f"{why} MSVMAv's only; {request.algorithm!r} "
                      "cannot run there (train it on an uploaded dataset)")
    if request.search is not None:
        raise invalid(["body", "search"], f"{why} one fit; a search cannot run there")
    if request.test_fraction is not None:
        raise invalid(["body", "test_fraction"], f"{why} on every row; register the held-out "
                      "rows as their own dataset and score them with a batch job")
    params = dict(estimator_params)
    kernel = params.pop("kernel", "linear")
    est = estimator_class("msvmav")(kernel=kernel, **params)
    try:
        check_cluster_params(est)
    except ValueError as exc:
        field, _, message = str(exc).partition(": ")
        raise invalid(["body", field if field in TrainRequest.model_fields else "algorithm"],
                      f"{why} limited: {message}") from None
    if (dataset is not None and params.get("calibration", "none") != "none"
            and partitions(dataset) < 2):
        raise invalid(["body", "calibration"], f"{why} calibrated on folds of partitions, and "
                      f"this dataset has {partitions(dataset)}; use calibration 'none', or "
                      "register the data as two files or more")
    if dataset is not None and settings is not None:
        rank = 1  # the smallest rank "auto" may take
        if est.kernel_kind.primal:
            rank = 0  # a linear fit: its rows only
        elif params.get("approximation") == "low_rank":
            rank = int(params.get("n_components", 1000))
        check_rank_memory(rank, dataset, settings)


def check_rank_memory(rank: int, dataset: Dataset, settings: Settings) -> None:
    """422 naming n_components when a kernel fit's rank ``rank`` (1: the smallest rank
    ``"auto"`` may take), or dataset_id when a linear fit's rows (rank 0), would not fit the
    workers' memory however its rows are held
    (``solver.plan_memory``, from each worker's own reading now: its limit, lowest memory
    threshold and fixed cost): one partition mapped at that rank does not fit a worker."""
    from solver import dask_cluster, plan_memory

    sizes = partition_rows(dataset)
    with dask_cluster(settings.dask_scheduler) as client:
        if not client.scheduler_info()["workers"]:
            return
        try:
            plan_memory(client, sizes, dataset.n_features, min(rank, dataset.n_rows))
        except ValueError as exc:
            field, _, message = str(exc).partition(": ")
            raise invalid(["body", "n_components" if field == "n_components"
                           else "dataset_id"], message) from None


def partition_rows(dataset: Dataset) -> list[int]:
    """The rows of each of the dataset's row blocks on the cluster."""
    if dataset.reference is not None:
        return [int(f["n_rows"]) for f in dataset.reference.files]
    full, rest = divmod(dataset.n_rows, UPLOADED_BLOCK_ROWS)
    return [UPLOADED_BLOCK_ROWS] * full + ([rest] if rest else [])


def _scaled_partition(path: str, encoding: dict, lo: Any, hi: Any, y_dtype: Any
                      ) -> tuple[np.ndarray, np.ndarray]:
    X, y = read_partition(path, encoding)
    if lo is not None:
        X = MinMaxScaling(data_min=lo, data_max=hi).transform(X, copy=False)
    return X, y.astype(y_dtype)


def cluster_arrays(dataset: Dataset, scaling: MinMaxScaling | None) -> tuple[Any, Any]:
    """The dataset's rows as dask arrays (X scaled, y labels), one row block per file: a
    reader graph the scheduler can recompute a lost partition from."""
    import dask
    import dask.array as da

    assert dataset.reference is not None
    y_dtype = np.asarray(dataset.classes).dtype
    lo = None if scaling is None else scaling.data_min
    hi = None if scaling is None else scaling.data_max
    xs, ys = [], []
    for f, path in zip(dataset.reference.files, reference.checked_files(dataset), strict=True):
        part = dask.delayed(_scaled_partition, pure=True, nout=2)(
            path, dataset.encoding, lo, hi, y_dtype)
        xs.append(da.from_delayed(part[0], shape=(f["n_rows"], dataset.n_features),
                                  dtype=np.float64))
        ys.append(da.from_delayed(part[1], shape=(f["n_rows"],), dtype=y_dtype))
    return da.concatenate(xs), da.concatenate(ys)


def uploaded_arrays(X: np.ndarray, y: np.ndarray, scaling: MinMaxScaling | None
                    ) -> tuple[Any, Any]:
    """An uploaded dataset's rows (read here) as dask arrays of UPLOADED_BLOCK_ROWS rows."""
    import dask.array as da

    if scaling is not None:
        X = scaling.transform(X, copy=False)
    return (da.from_array(X, chunks=(UPLOADED_BLOCK_ROWS, -1)),
            da.from_array(y, chunks=UPLOADED_BLOCK_ROWS))


def reference_scaling(dataset: Dataset, job: FitPlan) -> MinMaxScaling | None:
    """The min-max scaling of every row, from the first pass's ranges (no pass over rows)."""
    if not job.scaling or dataset.reference is None:
        return None
    return MinMaxScaling(data_min=np.asarray(dataset.reference.data_min, dtype=np.float64),
                         data_max=np.asarray(dataset.reference.data_max, dtype=np.float64))


def fit(X: Any, y: Any, job: FitPlan, scaling: MinMaxScaling | None, client: Any,
        callback: Callable[[dict[str, Any]], Any] | None) -> TrainOutcome:
    """Fit the job's MSVMAv on the cluster and describe it as ``pipeline.train`` does."""
    from solver import fit_on_cluster

    plan = job.protocol()
    est = job.estimator(kernel=plan.kernel, **plan.estimator_params())
    start = time.perf_counter()
    # the service's client is not the process's default one (solver.parallel.dask_cluster):
    # made current here, for the distributed calls that look for a default client
    with client.as_current():
        est = fit_on_cluster(est, X, y, client=client, callback=callback)
    seconds = time.perf_counter() - start
    summary = _summary(est, X, y, client, scaling)
    used = jsonable(est.get_params(deep=False))
    used.pop("random_state", None)
    return TrainOutcome(
        estimator=est, scaling=scaling, classes=jsonable(est.classes_.tolist()),
        n_train=int(X.shape[0]), n_test=0, holdout_accuracy=None, fit_seconds=seconds,
        n_iter=est.fit_report().n_iter,
        summary=summary, algorithm=plan.algorithm, params=used, search=None, encoding=None,
    )


def _summary(est: Any, X: Any, y: Any, client: Any, scaling: MinMaxScaling | None
             ) -> dict[str, Any]:
    """The model's summary as ``pipeline`` writes it: training margins (with Theorem 1's
    terms), reduced over the partitions on the workers; history, scaling, path,
    convergence, weights."""
    from solver import cluster_margin_statistics

    margins = cluster_margin_statistics(est, X, y, client=client)
    report = est.fit_report()
    return {
        "train_margins": jsonable(margins),
        "train_accuracy": margins["accuracy"],
        "history": pipeline.history_summary(report),
        "scaling": pipeline.scaling_summary(scaling),
        "search": None,
        "warnings": [],
        "fit_path": jsonable(report.path),
        "convergence": pipeline.convergence(report),
        "holdout": None,
        "evaluation": None,
        **jsonable(est.model_summary()),
    }
