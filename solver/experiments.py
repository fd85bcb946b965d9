"""The paper's evaluation protocol as a Python API (its Table-1 renderers, with the service's
CSV and Markdown escaping, are ``app.experiments.tables``; the command line is the service's:
``msvmav experiment``, ``app.cli.experiment``).

Protocol (docs/algorithm.md, "Conventions", with the project's choices for the ambiguities):

1. ``splits`` seeded random train/test partitions (plain, unstratified; ``test_size`` = 0.2);
2. min-max scaling to [0, 1] fitted on each training part, the test part scaled with the same
   map and clipped to [0, 1] (``scaling="train"``, default), or fitted once on the whole data
   set (``scaling="global"``, the paper's literal wording);
3. on each training part, k-fold cross-validation over the grid (``cross_validate_grid``; the
   folds are cut from the already-scaled training part, no per-fold re-scaling);
4. refit of the selected configuration on the whole training part, accuracy on the test part;

steps 2-4 are ``solver.protocol.fit`` and ``evaluate`` (the service's /train fits through them
too), with partition r's seed ``random_state + r`` for its folds and seeded estimators;
5. per algorithm mean and std (ddof=1) over the partitions;
6. a paired two-sided t-test (``scipy.stats.ttest_rel``, alpha = 0.05) of each algorithm against
   MSVMAv on the shared partitions: "win" (MSVMAv significantly better, marked ●), "loss"
   (significantly worse, ○) or "tie".

The margins of every algorithm's model on the test part of the first partition are kept (as
``margin_statistics``, with CDF points) for plots.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats
from sklearn.model_selection import ShuffleSplit

from . import protocol
from .algorithms import PAPER_ORDER, display_name, estimator_class
from .model_selection import n_cells
from .msvmav_parameters import PAPER_STOPPING
from .parallel import dask_client, effective_jobs, run_tasks
from .plain_values import plain
from .scaling import MinMaxScaling

SIGNIFICANCE = 0.05


# -- results ---------------------------------------------------------------------------------------
def compare(msvmav_scores: Sequence[float], other_scores: Sequence[float],
            alpha: float = SIGNIFICANCE) -> dict:
    """Paired two-sided t-test of MSVMAv against another algorithm on the same partitions.

    Returns {"outcome": "win" | "tie" | "loss" (from MSVMAv's point of view), "p_value",
    "statistic"}. Identical score vectors (or a single partition) give a tie (p = None)."""
    a = np.asarray(msvmav_scores, dtype=float)
    b = np.asarray(other_scores, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"scores: paired vectors differ in length ({a.size} vs {b.size})")
    if a.size < 2:
        return {"outcome": "tie", "p_value": None, "statistic": None}
    with warnings.catch_warnings():  # nearly identical vectors: scipy warns, p is still valid
        warnings.simplefilter("ignore", RuntimeWarning)
        res = stats.ttest_rel(a, b)
    p, t = float(res.pvalue), float(res.statistic)
    if not math.isfinite(p):
        return {"outcome": "tie", "p_value": None, "statistic": None}
    outcome = "tie" if p >= alpha else ("win" if a.mean() > b.mean() else "loss")
    return {"outcome": outcome, "p_value": p, "statistic": t}


def summarize(scores: Sequence[float]) -> tuple[float, float]:
    """(mean, std with ddof=1; 0.0 for a single value)."""
    a = np.asarray(scores, dtype=float)
    return float(a.mean()), float(a.std(ddof=1)) if a.size > 1 else 0.0


@dataclass
class ExperimentResult:
    """The protocol's outcome on one data set (JSON-able through ``to_dict``).

    ``algorithms[name]``: accuracies (per partition), mean, std (ddof=1), params (the selected
    configuration per partition), cv_scores (its CV accuracy per partition), seconds.
    ``comparisons[name]``: compare(MSVMAv, name) for every other algorithm (when MSVMAv ran).
    ``margins[name]``: margin_statistics of the model on the first partition's test part.
    """

    dataset: str
    protocol: dict
    algorithms: dict[str, dict]
    comparisons: dict[str, dict] = field(default_factory=dict)
    margins: dict[str, dict] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return plain({
            "dataset": self.dataset, "protocol": self.protocol, "algorithms": self.algorithms,
            "comparisons": self.comparisons, "margins": self.margins,
            "seconds": self.seconds})

    @classmethod
    def from_dict(cls, data: dict) -> ExperimentResult:
        return cls(dataset=data["dataset"], protocol=data["protocol"],
                   algorithms=data["algorithms"], comparisons=data.get("comparisons", {}),
                   margins=data.get("margins", {}), seconds=data.get("seconds", 0.0))

    def margin_curves(self) -> dict[str, dict]:
        """{display name: {"x", "p"}} CDF points for ``solver.plots.plot_margin_cdf``."""
        return {display_name(k): v["cdf"] for k, v in self.margins.items()}


def _run_unit(shared: dict, unit: tuple[int, str], tick: Callable[[], Any]) -> dict:
    """One (split, algorithm) of the protocol in a worker: its search runs in that process."""
    return _fit_unit(shared, unit, 1, lambda _done, _total: tick())


def _fit_unit(shared: dict, unit: tuple[int, str], n_jobs: int | None,
              progress: Callable[[int, int], Any]) -> dict:
    """Search, refit and test one algorithm on split r (steps 2-4 of the protocol): the
    partition's seed is random_state + r (its folds and its seeded estimators)."""
    r, a = unit
    X, y = shared["X"], shared["y"]
    tr, te = shared["splits"][r]
    ts = time.perf_counter()
    plan = protocol.Plan(algorithm=a, kernel=shared["kernel"], params=shared["fixed"][a],
                         grid=shared["grids"][a], cv=shared["cv"],
                         seed=shared["random_state"] + r, scaling=shared["scaling"] == "train")
    fitted = protocol.fit(plan, X[tr], y[tr], search_callback=progress, n_jobs=n_jobs)
    keep = r == 0 and shared["keep_margins"]
    scored = protocol.evaluate(fitted, X[te], y[te], margins=keep)
    assert fitted.search is not None  # every plan here searches
    return {"unit": unit, "accuracy": scored.accuracy, "params": fitted.search.best_params,
            "cv_score": fitted.search.best_score, "seconds": time.perf_counter() - ts,
            "margins": scored.margins}


def _comparisons(out: dict[str, dict], algorithms: Sequence[str]) -> dict[str, dict]:
    """MSVMAv's paired comparison (``compare``) with every other algorithm, on the accuracies of
    the same partitions; empty when MSVMAv did not run."""
    if "msvmav" not in out:
        return {}
    return {a: compare(out["msvmav"]["accuracies"], out[a]["accuracies"])
            for a in algorithms if a != "msvmav"}


def run_experiment(X, y, *, algorithms: Sequence[str] = PAPER_ORDER, kernel: str = "linear",
                   splits: int = 30, test_size: float = 0.2, grid: str | dict = "quick",
                   cv: int = 5, random_state: int = 0, n_jobs: int | None = 2,
                   scaling: str = "train", callback: Callable[[int, int], Any] | None = None,
                   params: dict[str, dict] | None = None, dataset: str = "dataset",
                   keep_margins: bool = True) -> ExperimentResult:
    """Run the protocol (see the module docstring) for several algorithms on one data set.

    Parameters
    ----------
    X, y : data (dense or CSR) and labels, unscaled
    algorithms : names ("msvmav" and keys of comparators.ALGORITHMS)
    kernel : "linear" or "rbf"
    splits, test_size : number and test share of the random partitions (seeded by
        random_state + r for partition r; the CV folds use the same seed)
    grid : "paper", "quick" or {algorithm: {parameter: values}}
    cv : folds of the inner cross-validation
    n_jobs : worker processes: with several, the (split, algorithm) units run in parallel
        (joblib), each search in its worker; with 1, one unit after the other in this process.
        Inside ``solver.parallel.dask_cluster`` the units run on the Dask cluster. The result
        is the same in every case.
    scaling : "train" (fit on each training part, clip the test part) or "global"
    callback : callback(done_cells, total_cells); cells = CV fits + refits; raising aborts
    params : extra fixed parameters per algorithm, e.g. {"msvmav": {"max_iter": 100}}
    dataset : name stored in the result
    keep_margins : keep the margin statistics of the first partition's models
    """
    algorithms = list(algorithms)
    for name in algorithms:
        estimator_class(name)
    if scaling not in ("train", "global"):
        raise ValueError(f"scaling: use 'train' or 'global', got {scaling!r}")
    if splits < 1:
        raise ValueError(f"splits: needs at least 1, got {splits}")
    y = np.asarray(y)
    n, d = X.shape
    t0 = time.perf_counter()
    fixed = {a: dict((params or {}).get(a, {})) for a in algorithms}
    if "msvmav" in fixed:  # the paper's fixed T = 100, unless the caller says otherwise
        fixed["msvmav"] = {**PAPER_STOPPING, **fixed["msvmav"]}
    grids = {a: (grid[a] if isinstance(grid, dict) and a in grid else
                 ("quick" if isinstance(grid, dict) else grid)) for a in algorithms}
    cells = {a: n_cells(a, d, kernel=kernel, grid=grids[a], cv=cv) + 1 for a in algorithms}
    if scaling == "global":
        X = MinMaxScaling.fit(X).transform(X)
    splitter = ShuffleSplit(n_splits=splits, test_size=test_size, random_state=random_state)
    shared = {"X": X, "y": y, "splits": list(splitter.split(np.zeros(n))), "kernel": kernel,
              "cv": cv, "random_state": random_state, "scaling": scaling, "grids": grids,
              "fixed": fixed, "keep_margins": keep_margins}
    units = [(r, a) for r in range(splits) for a in algorithms]
    found = _run_units(shared, units, cells, n_jobs, callback)
    out, margins = _collect(found, units, algorithms)
    comparisons = _comparisons(out, algorithms)
    protocol = {"kernel": kernel, "splits": splits, "test_size": test_size,
                "grid": grid if isinstance(grid, str) else grids, "cv": cv,
                "random_state": random_state, "scaling": scaling, "n_samples": int(n),
                "n_features": int(d), "std_ddof": 1,
                "test": "paired two-sided t-test (scipy.stats.ttest_rel), alpha 0.05",
                "splitting": "ShuffleSplit (plain, unstratified)",
                "fixed_params": fixed}
    return ExperimentResult(dataset=dataset, protocol=protocol, algorithms=out,
                            comparisons=comparisons, margins=margins,
                            seconds=time.perf_counter() - t0)


Unit = tuple[int, str]  # (split, algorithm)


def _run_units(shared: dict, units: list[Unit], cells: dict[str, int], n_jobs: int | None,
               callback: Callable[[int, int], Any] | None) -> dict[Unit, dict]:
    """Every (split, algorithm) unit's result; ``callback(done_cells, total_cells)``."""
    total = sum(cells[a] for _, a in units)
    found: dict[Unit, dict] = {}
    done = 0
    if dask_client() is None and (effective_jobs(n_jobs) == 1 or len(units) == 1):
        # one (split, algorithm) after the other, each search with n_jobs processes
        for unit in units:
            base = done

            def progress(k: int, _total: int, base: int = base) -> None:
                if callback is not None:
                    callback(base + k, total)

            found[unit] = _fit_unit(shared, unit, n_jobs, progress)
            done = base + cells[unit[1]]
            if callback is not None:
                callback(done, total)
        return found
    # the (split, algorithm) units in parallel (joblib processes or the Dask cluster)
    with closing(run_tasks(_run_unit, shared, units, n_jobs)) as results:
        for res in results:  # None: no unit finished in the last POLL seconds
            if res is not None:
                found[res["unit"]] = res
                done += cells[res["unit"][1]]
            if callback is not None:
                callback(done, total)
    return found


def _collect(found: dict[Unit, dict], units: list[Unit], algorithms: list[str]
             ) -> tuple[dict[str, dict], dict[str, dict]]:
    """Per algorithm: accuracies, params, cv_scores (in split order), seconds, mean, std;
    and the kept margins."""
    out: dict[str, dict] = {a: {"accuracies": [], "params": [], "cv_scores": [],
                                "seconds": 0.0} for a in algorithms}
    margins: dict[str, dict] = {}
    for unit in units:  # in split order, whatever order they finished in
        res, rec = found[unit], out[unit[1]]
        rec["accuracies"].append(res["accuracy"])
        rec["params"].append(res["params"])
        rec["cv_scores"].append(res["cv_score"])
        rec["seconds"] += res["seconds"]
        if res["margins"] is not None:
            margins[unit[1]] = res["margins"]
    for rec in out.values():
        rec["mean"], rec["std"] = summarize(rec["accuracies"])
    return out, margins


# -- summaries -------------------------------------------------------------------------------------
def _as_result(r: ExperimentResult | dict) -> ExperimentResult:
    return r if isinstance(r, ExperimentResult) else ExperimentResult.from_dict(r)


def table_columns(results: dict[str, ExperimentResult], algorithms: Sequence[str] | None
                  ) -> list[str]:
    """The algorithms of a table's columns: ``algorithms`` when given, else every one the
    results hold, in the paper's order (then by name)."""
    if algorithms is not None:
        return list(algorithms)
    seen = {a for r in results.values() for a in r.algorithms}
    return [a for a in PAPER_ORDER if a in seen] + sorted(seen - set(PAPER_ORDER))


def win_tie_loss(results: dict[str, ExperimentResult | dict],
                 algorithms: Sequence[str] | None = None) -> dict[str, tuple[int, int, int]]:
    """{algorithm: (wins, ties, losses)} of MSVMAv over the data sets."""
    res = {k: _as_result(v) for k, v in results.items()}
    counts = {}
    for a in table_columns(res, algorithms):
        if a == "msvmav":
            continue
        outs = [r.comparisons[a]["outcome"] for r in res.values() if a in r.comparisons]
        counts[a] = (outs.count("win"), outs.count("tie"), outs.count("loss"))
    return counts


__all__ = ["ExperimentResult", "compare", "run_experiment", "summarize", "table_columns",
           "win_tie_loss"]
