"""``msvmav experiment``: the paper's protocol (``solver.experiments.run_experiment``) on one
data file, from the command line."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app.cli.errors import CommandParser
from app.core.jsonable import jsonable
from app.experiments.tables import to_csv, to_markdown
from app.ingest import parse_dataset
from solver import PAPER_ORDER, dask_cluster, run_experiment


# ----------------------------------------------------------------------------------
def _algorithm_list(text: str) -> list[str]:
    """One --algorithms value: a name or comma-separated names ("msvmav,svm")."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in names if t not in PAPER_ORDER]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown algorithm {', '.join(map(repr, unknown)) or repr(text)}; use "
            f"{', '.join(PAPER_ORDER)} (space- or comma-separated)")
    return names


def _int_at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(
        prog="msvmav experiment",
        description="Run the paper's protocol (random splits, CV grid search, refit, paired "
                    "t-test against MSVMAv) on one data file.")
    p.add_argument("--dataset", required=True, type=Path, help="CSV/TSV, ARFF or svmlight file")
    p.add_argument("--label", help="label column, name or index (None: the parser's choice)")
    p.add_argument("--drop", nargs="*", default=None, help="columns to drop (globs allowed)")
    p.add_argument("--missing", choices=["error", "drop"], default="error",
                   help="rows with missing values: refuse the file or drop the rows")
    p.add_argument("--n-features", type=_int_at_least(1), default=None,
                   help="svmlight feature count (None: the largest index in the file)")
    p.add_argument("--algorithms", nargs="+", type=_algorithm_list, default=list(PAPER_ORDER),
                   metavar="NAME", help="algorithms, space- or comma-separated, from "
                   + ", ".join(PAPER_ORDER))
    p.add_argument("--kernel", choices=["linear", "rbf"], default="linear", help="kernel")
    p.add_argument("--splits", type=_int_at_least(1), default=30, help="random train/test splits")
    p.add_argument("--test-size", type=_share, default=0.2, help="test share of each split")
    p.add_argument("--grid", choices=["paper", "quick"], default="quick",
                   help="hyper-parameter grid")
    p.add_argument("--cv", type=_int_at_least(2), default=5,
                   help="folds of the inner cross-validation")
    p.add_argument("--seed", type=int, default=0, help="seed of the splits and folds")
    p.add_argument("--n-jobs", type=int, default=2,
                   help="local worker processes (-1: all cores); ignored with a Dask scheduler")
    p.add_argument("--dask-scheduler", default=os.environ.get("MSVMAV_DASK_SCHEDULER") or None,
                   metavar="ADDRESS", help="run the fits on this Dask cluster, e.g. "
                   "tcp://host:8786 (default from MSVMAV_DASK_SCHEDULER)")
    p.add_argument("--scaling", choices=["train", "global"], default="train",
                   help="min-max scaling fitted on each training part or on all the data")
    p.add_argument("--out", type=Path, help="write the full results as JSON here")
    p.add_argument("--format", choices=["markdown", "csv", "json"], default="markdown",
                   help="what to print on stdout")
    p.add_argument("--plot", type=Path, help="write the margin CDF of the first split (png/svg)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return p


class _Progress:
    """Progress on stderr: a tqdm bar on a terminal, a plain line every few seconds
    otherwise."""

    def __init__(self, name: str, quiet: bool, every: float = 5.0) -> None:
        self.name, self.quiet, self.every = name, quiet, every
        self.bar: Any = None
        self.last = -math.inf

    def __call__(self, done: int, total: int) -> None:
        if self.quiet:
            return
        if sys.stderr.isatty():
            if self.bar is None:
                from tqdm import tqdm

                self.bar = tqdm(total=total, desc=self.name, unit="fit", file=sys.stderr,
                                dynamic_ncols=True)
            self.bar.update(done - self.bar.n)
            return
        now = time.monotonic()
        if now - self.last >= self.every or done == total:
            self.last = now
            print(f"{self.name}: {done}/{total} fits ({100.0 * done / total:.0f} %)",
                  file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def main(argv: Sequence[str] | None = None) -> int:
    """``msvmav experiment ...``: see ``build_parser``. Returns the exit status; a user's
    mistake raises (``app.cli.main`` prints it as one line)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.algorithms = list(dict.fromkeys(  # the default is a list of names, not of lists
        a for names in args.algorithms for a in ([names] if isinstance(names, str) else names)))
    if not args.dataset.is_file():
        what = "not a file" if args.dataset.exists() else "no such file"
        parser.error(f"--dataset: {what}: {args.dataset}")
    options: dict[str, Any] = {"missing": args.missing}
    if args.label is not None:
        options["label"] = args.label
    if args.drop:
        options["drop"] = args.drop
    if args.n_features is not None:
        options["n_features"] = args.n_features
    parsed = parse_dataset(args.dataset.read_bytes(), args.dataset.name, **options)
    name = args.dataset.stem

    progress = _Progress(name, args.quiet)
    try:
        with dask_cluster(args.dask_scheduler):
            result = run_experiment(parsed.X, np.asarray(parsed.y), algorithms=args.algorithms,
                                    kernel=args.kernel, splits=args.splits,
                                    test_size=args.test_size, grid=args.grid, cv=args.cv,
                                    random_state=args.seed, n_jobs=args.n_jobs,
                                    scaling=args.scaling, callback=progress, dataset=name)
    finally:
        progress.close()
    payload = {"datasets": {name: jsonable(result.to_dict())}}
    if args.out:
        args.out.write_text(json.dumps(payload, indent=1))
    if args.plot:
        from solver import plot_margin_cdf

        fmt = "svg" if args.plot.suffix.lower() == ".svg" else "png"
        args.plot.write_bytes(plot_margin_cdf(result.margin_curves(), fmt=fmt,
                                              title=f"{name}: margin distribution (test part)"))
    if args.format == "json":
        print(json.dumps(payload, indent=1))
    elif args.format == "csv":
        print(to_csv({name: result}), end="")
    else:
        print(to_markdown({name: result}), end="")
    return 0
