"""Ingest benchmark: POST /datasets beside pandas (read_csv + one-hot), and peak memory.

    .venv/bin/python bench/ingest.py                      # bank-full.csv + a wide synthetic CSV
    .venv/bin/python bench/ingest.py --datasets DIR --repeat 5

Upload path: ``POST /datasets`` through the ASGI app (FastAPI TestClient) on a temporary SQLite
database: multipart parsing, ``parse_dataset`` (pandas' C parser fast path), the checks, and
storing the arrays. Anchor, in the same process: ``pandas.read_csv`` (C engine) followed by
``pandas.get_dummies`` over the feature columns. Both are timed best-of-``--repeat``; the ratio
is upload / anchor (goal: <= 3 on bank-full.csv).

Files: bank-full.csv (45,211 rows, 9 categorical columns, ``;``-separated, label ``y``) from
``--datasets`` (default ../shared/datasets beside the repository, else /work/shared/datasets),
and a synthetic CSV written here: 20,000 rows, 4 numeric columns and 3 categorical ones of 400,
200 and 40 values (the encoded matrix is 644 wide and stored as CSR).

Memory: for the svmlight file of issue 8 (``printf '1 1099511627776:1\n-1 1:1\n'``) and
a 5,000-row CSV with a unique string id column (refused with 422; then uploaded with
``drop=id``), a fresh Python process uploads the file once; the figure is its peak RSS growth
during the request (VmHWM reset through /proc/self/clear_refs just before it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

warnings.filterwarnings("ignore", message=".*httpx.*")  # starlette's TestClient chatter

SVMLIGHT_BOMB = b"1 1099511627776:1\n-1 1:1\n"


def default_datasets() -> Path:
    for cand in (ROOT.parent / "shared" / "datasets", Path("/work/shared/datasets")):
        if (cand / "bank-full.csv").is_file():
            return cand
    return ROOT.parent / "shared" / "datasets"


def wide_csv(n: int = 20_000, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    cols = {f"x{k}": np.round(rng.normal(size=n), 6) for k in range(4)}
    for name, k in (("city", 400), ("shop", 200), ("kind", 40)):
        cols[name] = np.array([f"{name}{v}" for v in rng.integers(0, k, n)])
    y = np.where(cols["x0"] + rng.normal(scale=0.5, size=n) > 0, "pos", "neg")
    lines = [",".join([*cols, "y"])]
    values = list(cols.values())
    for i in range(n):
        lines.append(",".join([*(str(v[i]) for v in values), y[i]]))
    return ("\n".join(lines) + "\n").encode()


def id_column_csv(n: int = 5_000) -> bytes:
    lines = ["id,x,y"] + [f"user{i:05d},{i % 13},{'ab'[i % 2]}" for i in range(n)]
    return ("\n".join(lines) + "\n").encode()


def best_of(repeat: int, fn) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def make_client(tmp: Path):
    from fastapi.testclient import TestClient

    from app.core.config import Settings
    from app.core.db import upgrade_to_head
    from app.main import create_app

    url = f"sqlite:///{tmp / 'bench.db'}"
    upgrade_to_head(url)
    settings = Settings(database_url=url, _env_file=None)
    return TestClient(create_app(settings))


def upload(client, content: bytes, filename: str, **form) -> dict:
    r = client.post("/datasets", files={"file": (filename, content)}, data=form)
    if r.status_code != 201:
        raise SystemExit(f"upload of {filename} failed: {r.status_code} {r.text[:300]}")
    return r.json()


def anchor(content: bytes, sep: str, label: str) -> None:
    import io

    import pandas as pd

    frame = pd.read_csv(io.BytesIO(content), sep=sep)
    pd.get_dummies(frame.drop(columns=[label]))


def time_case(client, name: str, content: bytes, sep: str, label: str, repeat: int) -> None:
    from app.ingest import parse_dataset

    body = upload(client, content, name, label=label)  # warm-up, and what it stored
    t_upload = best_of(repeat, lambda: upload(client, content, name, label=label))
    t_parse = best_of(repeat, lambda: parse_dataset(content, name, label=label))
    t_anchor = best_of(repeat, lambda: anchor(content, sep, label))
    print(f"{name}: {body['n_rows']} rows x {body['n_features']} features, "
          f"sparse={body['sparse']}, {len(content) / 1e6:.1f} MB")
    print(f"  upload (POST /datasets)        {t_upload:8.3f} s")
    print(f"  parse_dataset alone            {t_parse:8.3f} s")
    print(f"  pandas read_csv + get_dummies  {t_anchor:8.3f} s")
    print(f"  ratio upload / pandas          {t_upload / t_anchor:8.2f}x  (goal <= 3x)")


def _status_kb(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1])
    raise RuntimeError(f"{key} not in /proc/self/status")


def memory_child(path: Path, filename: str, form: dict) -> None:
    """In a fresh process: one warm-up upload, then the measured one."""
    content = path.read_bytes()
    with tempfile.TemporaryDirectory() as tmp, make_client(Path(tmp)) as client:
        client.post("/datasets", files={"file": ("warm.csv", b"a,y\n1,p\n2,q\n")})
        Path("/proc/self/clear_refs").write_text("5")  # peak (VmHWM) := current RSS
        before = _status_kb("VmRSS:")
        r = client.post("/datasets", files={"file": (filename, content)}, data=form)
        peak = _status_kb("VmHWM:")
    print(json.dumps({"status": r.status_code, "growth_kb": peak - before,
                      "detail": r.json().get("detail", "")[:240]}))


def memory_case(label: str, content: bytes, filename: str, form: dict) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / filename
        path.write_bytes(content)
        out = subprocess.run([sys.executable, __file__, "--memory-child", str(path), filename,
                              json.dumps(form)], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        print(f"  {label}: measurement failed: {out.stderr.strip()[-400:]}")
        return
    res = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"  {label} ({len(content)} bytes): HTTP {res['status']}, peak RSS growth "
          f"{res['growth_kb'] / 1024:.1f} MiB; {res['detail']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=default_datasets())
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--memory-child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        path, filename, form = args.memory_child
        memory_child(Path(path), filename, json.loads(form))
        return
    with tempfile.TemporaryDirectory() as tmp, make_client(Path(tmp)) as client:
        bank = args.datasets / "bank-full.csv"
        if bank.is_file():
            time_case(client, "bank-full.csv", bank.read_bytes(), ";", "y", args.repeat)
        else:
            print(f"bank-full.csv: skipped ({bank} is absent)")
        time_case(client, "wide-synthetic.csv", wide_csv(), ",", "y", args.repeat)
    print("peak RSS growth of one upload (fresh process):")
    memory_case("issue 8 svmlight file (index 2**40)", SVMLIGHT_BOMB, "b.svm", {})
    memory_case("5,000-row CSV, unique id column", id_column_csv(), "ids.csv", {})
    memory_case("same CSV with drop=id", id_column_csv(), "ids.csv", {"drop": "id"})


if __name__ == "__main__":
    main()
