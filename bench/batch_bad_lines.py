"""A 1M-row batch job with every kind of bad line (issue 45's "Done when"): each bad line is
reported once, at its line, and the job finishes.

    .venv/bin/python bench/batch_bad_lines.py                  # 1,000,000 rows, SQLite
    .venv/bin/python bench/batch_bad_lines.py --rows 200000    # smaller, when time is short

A CSV of ``--features`` numeric columns is written to ``--dir`` with ``--bad`` bad lines spread
through it, cycling through eight kinds: a cell that is not a number, a field too many, a field
too few, a quoted field too many (the tokenizer finds it), bytes that are not UTF-8, a blank
line (every value missing), ``inf``, and an empty cell. (The ninth kind of
tests/app/test_batch_as_used.py, an unknown category, needs a categorical model.) A linear
MSVMAv model is trained on 20,000 rows (bench/batch.py's), the file submitted with
``on_error=skip`` and scored by one ``msvmav worker`` process. Printed: the job's status and
seconds, the worker's peak RSS, the rows scored, and the check that the errors file lists
every bad line exactly once at its line with its kind's reason (exit status 1 otherwise).
The load (``os.getloadavg``) is printed beside the time: the machine is shared.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from bench.batch import run_job, train_model  # noqa: E402

# (kind, what the errors file's reason says, the line made from a good row's fields)
KINDS = [
    ("not a number", "not a number", lambda f: ",".join([f[0], "oops", *f[2:]])),
    ("a field too many", "fields", lambda f: ",".join([*f, "extra"])),
    ("a field too few", "fields", lambda f: ",".join(f[:-1])),
    ("a quoted field too many", "fields", lambda f: ",".join(f) + ',"a, b"'),
    ("not UTF-8", "UTF-8", None),
    ("a blank line", "missing value", lambda f: ""),
    ("an infinite value", "infinite value", lambda f: ",".join(["inf", *f[1:]])),
    ("an empty cell", "missing value", lambda f: ",".join(["", *f[1:]])),
]


def write_csv(path: Path, n_rows: int, d: int, n_bad: int) -> dict[int, int]:
    """The file, and {data row (0-based): kind index} of its bad lines (line = row + 2)."""
    rng = np.random.default_rng(0)
    bad_rows = np.linspace(10, n_rows - 10, n_bad).astype(int)
    bad = {int(r): i % len(KINDS) for i, r in enumerate(bad_rows)}
    with path.open("wb") as out:
        out.write((",".join(f"x{j}" for j in range(d)) + "\n").encode())
        for start in range(0, n_rows, 200_000):
            n = min(200_000, n_rows - start)
            block = pd.DataFrame(rng.normal(size=(n, d)) + (np.arange(n) % 2)[:, None])
            lines = block.to_csv(header=False, index=False, float_format="%.6f").splitlines()
            for k in range(start, start + n):
                if k in bad:
                    lines[k - start] = _bad_line(lines[k - start], bad[k])
            out.write(b"\n".join(x if isinstance(x, bytes) else x.encode() for x in lines))
            out.write(b"\n")
    return bad


def _bad_line(line: str, kind: int) -> str | bytes:
    make = KINDS[kind][2]
    if make is None:  # not UTF-8
        return line.encode() + b"\xff\xfe"
    return make(line.split(","))


def submit(database_url: str, model_id: int, path: Path) -> int:
    """POST /batch-predictions with the file, on_error=skip (in this process)."""
    from fastapi.testclient import TestClient

    from app.core.config import Settings
    from app.main import create_app

    settings = Settings(database_url=database_url, prediction_log=False, _env_file=None)
    with TestClient(create_app(settings)) as client, path.open("rb") as file:
        r = client.post("/batch-predictions", files={"file": (path.name, file)},
                        data={"model_id": str(model_id), "on_error": "skip"})
        assert r.status_code == 202, r.text
        return int(r.json()["id"])


def errors_and_rows(database_url: str, job_id: int) -> tuple[pd.DataFrame, int]:
    from fastapi.testclient import TestClient

    from app.core.config import Settings
    from app.main import create_app

    settings = Settings(database_url=database_url, prediction_log=False, _env_file=None)
    with TestClient(create_app(settings)) as client:
        job = client.get(f"/jobs/{job_id}").json()
        r = client.get(f"/batch-predictions/{job_id}/errors")
        errors = pd.read_csv(io.BytesIO(r.content), keep_default_na=False)
    return errors, int(job["result"]["n_rows"])


def check(errors: pd.DataFrame, bad: dict[int, int], n_rows: int, scored: int) -> list[str]:
    """What is wrong with the errors file (empty: each bad line once, at its line)."""
    problems = []
    if errors["row"].tolist() != sorted(bad):
        problems.append(f"{len(errors)} errors listed for {len(bad)} bad lines")
    elif errors["line"].tolist() != [k + 2 for k in sorted(bad)]:
        problems.append("an error's line is not its row's")
    else:
        for k, reason in zip(errors["row"], errors["reason"], strict=True):
            if KINDS[bad[k]][1] not in reason:
                problems.append(f"row {k} ({KINDS[bad[k]][0]}): {reason!r}")
    if scored != n_rows - len(bad):
        problems.append(f"{scored} rows scored, {n_rows - len(bad)} expected")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--bad", type=int, default=1_000)
    parser.add_argument("--features", type=int, default=10)
    parser.add_argument("--dir", default="/tmp")
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    from app.core.db import upgrade_to_head

    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite:///{tmp}/bench.db"
        upgrade_to_head(url)
        model_id = train_model(url, args.features)
        path = Path(args.dir) / f"msvmav_bad_lines_{args.rows}x{args.features}.csv"
        bad = write_csv(path, args.rows, args.features, args.bad)
        job_id = submit(url, model_id, path)
        seconds, peak, status = run_job(url, job_id, tmp)
        load = os.getloadavg()[0]
        print(f"{args.rows} rows, {len(bad)} bad lines of {len(KINDS)} kinds: {status[:70]}")
        print(f"job {seconds:.1f} s (load {load:.1f}), worker peak RSS {peak / 1024:.0f} MB")
        errors, scored = errors_and_rows(url, job_id)
        problems = check(errors, bad, args.rows, scored)
        print(f"{scored} rows scored; {len(errors)} bad lines reported: "
              + ("each once, at its line, with its reason" if not problems else "; ".join(
                  problems[:5])))
        path.unlink()
        sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
