"""Benchmark: what the depth and NUL check of every JSON body (``app.core.validation``) costs,
against the JSON parse it follows (the anchor, orjson as /predict parses, same body, same run).

    .venv/bin/python bench/json_check.py              # 100,000 rows of 30 values
    .venv/bin/python bench/json_check.py --rows 20000 --repeat 5

Bodies (each about 30 MB at the default size, under MSVMAV_MAX_JSON_BYTES):

* ``records``: /predict rows as objects (numbers and category strings) — the walk's worst
  common case (``check_request`` walks it: it has more than 32 brackets);
* ``records + NUL``: the same with one escaped NUL in the last row, so the NUL walk runs too
  (the body is refused);
* ``numeric``: rows of numbers parsed whole (bodies above 1 MiB keep their rows as bytes in
  ``app.predict.numeric_rows`` and are not walked row by row; this is the bound).

Prints the best time of ``--repeat`` runs of each and the ratio check / parse.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from app.core.problems import Problem  # noqa: E402
from app.core.validation import check_json  # noqa: E402


def _best(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _check(value: object, nul: bool) -> None:
    with contextlib.suppress(Problem):  # the NUL body is refused: that is the case measured
        check_json(value, nul=nul)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--columns", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    cols = range(args.columns)
    records = [{f"c{j}": (j * 0.5 if j % 3 else f"cat{j}") for j in cols} for _ in range(args.rows)]
    numeric = [[i * 0.1 + j for j in cols] for i in range(args.rows)]
    with_nul = [*records[:-1], {**records[-1], "c0": "x\x00"}]
    cases = [
        ("records", {"model_id": 1, "instances": records}, False),
        ("records + NUL", {"model_id": 1, "instances": with_nul}, True),
        ("numeric", {"model_id": 1, "instances": numeric}, False),
    ]
    print(f"{'body':<14} {'MB':>6} {'parse s':>8} {'check s':>8} {'check/parse':>12}")
    for name, value, nul in cases:
        body = orjson.dumps(value)
        parsed = orjson.loads(body)
        parse = _best(lambda body=body: orjson.loads(body), args.repeat)
        check = _best(lambda parsed=parsed, nul=nul: _check(parsed, nul), args.repeat)
        mb = len(body) / 1e6
        print(f"{name:<14} {mb:>6.1f} {parse:>8.3f} {check:>8.3f} {check / parse:>12.2f}")


if __name__ == "__main__":
    main()
