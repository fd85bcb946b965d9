"""Benchmark: one batch through the protocols against /predict (the anchor) on the same model
and rows, end to end (request sent to answer decoded) with the stock clients' ways of sending it.

    .venv/bin/python bench/protocols.py                 # 20,000 rows x 30 features, 5 repeats
    .venv/bin/python bench/protocols.py --rows 100000 --repeat 3

Starts ``msvmav serve`` on a temporary SQLite database (tests.live_server), uploads
examples/wdbc.arff, trains a linear MSVMAv, then sends ``--rows`` rows drawn from wdbc's as
/predict JSON (httpx), Open Inference Protocol binary tensors (tritonclient's default), its JSON
tensors, and MLflow ``dataframe_split``; prints the median seconds and the ratio to /predict,
and checks that every route's decisions equal /predict's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT)] + [
    p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent
]

import numpy as np  # noqa: E402
import tritonclient.http as triton  # noqa: E402

from msvmav_client import Client  # noqa: E402
from tests.live_server import live_server  # noqa: E402


def median_seconds(call: Callable[[], np.ndarray], repeat: int) -> tuple[float, np.ndarray]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = call()
        times.append(time.perf_counter() - t0)
    assert out is not None
    return statistics.median(times), out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, live_server(Path(tmp)) as server:
        client = Client(server.url, timeout=600)
        dataset = client.upload(ROOT / "examples" / "wdbc.arff")
        job = client.train(dataset["id"], kernel="linear", alpha=16, beta=0.25)
        model_id = job.wait(timeout=300, poll=0.1)["model_id"]
        base = np.array(
            [
                [float(v) for v in line.split(",")[:-1]]
                for line in (ROOT / "examples" / "wdbc.arff").read_text().split("@data")[1].split()
                if line.count(",") == 30
            ]
        )
        rng = np.random.default_rng(0)
        X = base[rng.integers(0, len(base), args.rows)] * rng.uniform(0.95, 1.05, (args.rows, 30))
        rows = X.tolist()
        columns = [f"V{j}" for j in range(1, 31)]
        tc = triton.InferenceServerClient(server.url.removeprefix("http://"), network_timeout=600)

        def by_predict() -> np.ndarray:
            answer = client.predict(model_id, rows)
            return np.array([p["decision_value"] for p in answer["predictions"]])

        def by_v2(binary: bool) -> Callable[[], np.ndarray]:
            def call() -> np.ndarray:
                tensor = triton.InferInput("input", list(X.shape), "FP64")
                tensor.set_data_from_numpy(X, binary_data=binary)
                outputs = [triton.InferRequestedOutput("decision", binary_data=binary)]
                return tc.infer(str(model_id), [tensor], outputs=outputs).as_numpy("decision")

            return call

        def by_mlflow() -> np.ndarray:
            body = {"dataframe_split": {"columns": columns, "data": rows}}
            r = client.http.post(f"/models/{model_id}/invocations", json=body)
            return np.array([p["decision_value"] for p in r.json()["predictions"]])

        anchor, reference = median_seconds(by_predict, args.repeat)
        print(
            f"{args.rows} rows x 30 features, median of {args.repeat}; decisions equal /predict's"
        )
        print(f"{'/predict JSON (anchor)':32s} {anchor:8.3f} s   1.00")
        for name, call in [
            ("/v2 infer, binary tensors", by_v2(True)),
            ("/v2 infer, JSON tensors", by_v2(False)),
            ("/invocations dataframe_split", by_mlflow),
        ]:
            seconds, decision = median_seconds(call, args.repeat)
            assert np.array_equal(decision, reference), name
            print(f"{name:32s} {seconds:8.3f} s   {seconds / anchor:.2f}")
        tc.close()
        client.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
