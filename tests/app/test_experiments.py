"""/experiments: the paper's protocol as a job, its Table 1 (Markdown, CSV) and Figure 1
(PNG, SVG); and the `msvmav experiment` command."""

from __future__ import annotations

import csv
import io
import re
import subprocess
import sys

import pytest

from app.cli.main import main as cli_main
from tests.app.support import (
    assert_png,
    assert_problem,
    assert_svg,
    blobs,
    run_jobs,
    submit,
    to_csv,
    upload,
)

ALGOS = ["msvmav", "svm", "lssvm", "mamc"]
SMALL = {
    "algorithms": ALGOS,
    "splits": 3,
    "cv": 3,
    "grid": {"msvmav": {"alpha": [1, 16], "beta": [0.25, 1]}, "svm": {"C": [0.25, 4]}},
    "params": {"msvmav": {"max_iter": 30}},
}
CELL = re.compile(r"^(\d\.\d{4})±(\d\.\d{4})(?: ([●○]))?$")


def _datasets(client) -> tuple[dict, dict]:
    a = upload(client, to_csv(*blobs(n=60, seed=1)), filename="easy.csv")
    b = upload(client, to_csv(*blobs(n=60, seed=2, shift=1.0)), filename="hard.csv")
    return a, b


def _submit(client, dataset_ids, **body) -> dict:
    r = client.post("/experiments", json={"dataset_ids": dataset_ids, **SMALL, **body})
    assert r.status_code == 202, r.text
    assert r.headers["location"] == f"/jobs/{r.json()['id']}"
    return r.json()


def test_experiment_end_to_end(client, worker):
    a, b = _datasets(client)
    exp = _submit(client, [a["id"], b["id"]])
    eid = exp["id"]
    assert exp["status"] == "queued" and exp["results"] is None
    job = client.get(f"/jobs/{eid}").json()
    assert job["kind"] == "experiment"

    assert run_jobs(worker) == ["succeeded"]
    job = client.get(f"/jobs/{eid}").json()
    assert job["progress"] == 1 and "2 data set(s) × 3 split(s)" in job["message"]

    body = client.get(f"/experiments/{eid}").json()
    assert body["status"] == "succeeded"
    assert [r["dataset_id"] for r in body["results"]] == [a["id"], b["id"]]
    assert [r["name"] for r in body["results"]] == ["easy.csv", "hard.csv"]
    res = body["results"][1]["result"]
    assert set(res["algorithms"]) == set(ALGOS)
    for algo in ALGOS:
        rec = res["algorithms"][algo]
        assert len(rec["accuracies"]) == 3 and len(rec["params"]) == 3
    assert all(p in ({"alpha": x, "beta": y} for x in (1, 16) for y in (0.25, 1))
               for p in res["algorithms"]["msvmav"]["params"])
    assert set(res["comparisons"]) == {"svm", "lssvm", "mamc"}
    assert res["protocol"]["splits"] == 3 and res["protocol"]["cv"] == 3
    assert set(res["margins"]) == set(ALGOS)
    summary = body["summary"]["datasets"][1]
    assert summary["mean_accuracy"]["svm"] == res["algorithms"]["svm"]["mean"]

    # Markdown: header, one row per data set with mean±std [mark] cells, win/tie/loss row.
    r = client.get(f"/experiments/{eid}/table.md")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/markdown")
    rows = [
        [c.strip() for c in line.strip("|").split("|")]
        for line in r.text.splitlines()
        if line.startswith("|")
    ]
    assert rows[0] == ["dataset", "MSVMAv", "SVM", "LSSVM", "MAMC"]
    assert [row[0] for row in rows[2:]] == ["easy.csv", "hard.csv", "win/tie/loss"]
    for row, result in zip(rows[2:4], body["results"], strict=True):
        for cell, algo in zip(row[1:], ALGOS, strict=True):
            m = CELL.match(cell)
            assert m, cell
            rec = result["result"]["algorithms"][algo]
            assert float(m.group(1)) == pytest.approx(rec["mean"], abs=5e-5)
            assert float(m.group(2)) == pytest.approx(rec["std"], abs=5e-5)
            outcome = result["result"]["comparisons"].get(algo, {}).get("outcome", "tie")
            assert m.group(3) == {"win": "●", "loss": "○", "tie": None}[outcome]
    assert all(re.fullmatch(r"\d+/\d+/\d+", c) for c in rows[-1][2:])

    # CSV: parsed by the csv module, same numbers.
    r = client.get(f"/experiments/{eid}/table.csv")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(r.text)))
    assert [t["dataset"] for t in table] == ["easy.csv", "hard.csv", "win/tie/loss"]
    assert float(table[1]["SVM_mean"]) == pytest.approx(
        res["algorithms"]["svm"]["mean"], abs=5e-5
    )
    assert table[1]["SVM_vs_MSVMAv"] in (
        "tie",
        "MSVMAv_significantly_better",
        "MSVMAv_significantly_worse",
    )

    # Figure 1: PNG of the first data set, SVG of the second.
    assert_png(client.get(f"/experiments/{eid}/margins.png"))
    svg = assert_svg(client.get(f"/experiments/{eid}/margins.svg?dataset_id={b['id']}"))
    assert "hard.csv" in svg and "LSSVM" in svg
    assert_problem(client.get(f"/experiments/{eid}/margins.png?dataset_id=999"), 404, "dataset_id")

    listed = client.get("/experiments").json()["items"]
    assert [e["id"] for e in listed] == [eid] and "results" not in listed[0]


def test_experiment_on_dask_connects_to_the_scheduler_once(client, worker):
    """All the data sets' cells go through one client of the Dask scheduler, not one each."""
    distributed = pytest.importorskip("distributed")
    a, b = _datasets(client)
    _submit(client, [a["id"], b["id"]], algorithms=["svm", "lssvm"], splits=1,
            grid={"svm": {"C": [0.25, 4]}}, params={})
    with distributed.LocalCluster(processes=False, protocol="tcp://", host="127.0.0.1",
                                  n_workers=1, threads_per_worker=2,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster.scheduler_address) as observer:

        def clients_added() -> int:
            return observer.run_on_scheduler(lambda dask_scheduler: sum(
                ev.get("action") == "add-client" for _, ev in dask_scheduler.get_events("all")))

        before = clients_added()
        worker.settings.dask_scheduler = cluster.scheduler_address
        assert run_jobs(worker) == ["succeeded"]
        assert clients_added() - before == 1


def test_tables_and_plots_answer_409_until_succeeded(client, worker):
    a, _ = _datasets(client)
    eid = _submit(client, [a["id"]])["id"]
    for suffix in ("table.md", "table.csv", "margins.png", "margins.svg"):
        body = assert_problem(client.get(f"/experiments/{eid}/{suffix}"), 409)
        assert "queued" in body["detail"]
    got = client.get(f"/experiments/{eid}").json()
    assert got["status"] == "queued" and got["results"] is None
    assert client.post(f"/jobs/{eid}/cancel").json()["status"] == "cancelled"
    body = assert_problem(client.get(f"/experiments/{eid}/table.md"), 409)
    assert "cancelled" in body["detail"]


def test_unknown_experiments_are_404(client, worker):
    assert_problem(client.get("/experiments/424242"), 404)
    assert_problem(client.get("/experiments/424242/table.csv"), 404)
    ds = upload(client, to_csv(*blobs(n=20)))
    train_job = submit(client, ds["id"])  # a job, but not an experiment
    assert_problem(client.get(f"/experiments/{train_job['id']}"), 404)
    assert_problem(client.get(f"/experiments/{train_job['id']}/margins.png"), 404)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"dataset_ids": []}, "dataset_ids"),
        ({"algorithms": ["msvmav", "xgboost"]}, "algorithms[1]"),
        ({"algorithms": []}, "algorithms"),
        ({"algorithms": ["svm", "svm"]}, "algorithms[1]"),
        ({"grid": "fast"}, "grid"),
        ({"grid": {}}, "grid"),
        ({"grid": {"msvmav": {"alphaa": [1]}}}, "grid.msvmav.alphaa"),
        ({"grid": {"xgboost": {"C": [1]}}}, "grid.xgboost"),
        ({"grid": {"odm": {"C": [1]}}}, "grid.odm"),  # not among the algorithms
        ({"params": {"svm": {"C": -1}}}, "params.svm.C"),
        ({"kernel": "poly"}, "kernel"),
        ({"splits": 0}, "splits"),
        ({"cv": 1}, "cv"),
        ({"test_size": 1.5}, "test_size"),
        ({"unknown": 1}, "unknown"),
    ],
)
def test_invalid_experiment_requests_answer_422_naming_the_field(client, body, field):
    ds = upload(client, to_csv(*blobs(n=30)))
    request = {"dataset_ids": [ds["id"]], **SMALL, **body}
    assert_problem(client.post("/experiments", json=request), 422, field)
    assert client.get("/experiments").json()["items"] == []


def test_experiment_datasets_are_checked(client):
    ds = upload(client, to_csv(*blobs(n=30)))
    tiny = upload(client, to_csv(*blobs(n=4)))
    r = client.post("/experiments", json={"dataset_ids": [ds["id"], 999999], **SMALL})
    assert_problem(r, 404, "dataset_ids[1]")
    r = client.post("/experiments", json={"dataset_ids": [ds["id"], ds["id"]], **SMALL})
    assert_problem(r, 422, "dataset_ids[1]")
    r = client.post("/experiments", json={"dataset_ids": [tiny["id"]], **SMALL, "cv": 5})
    assert_problem(r, 422, "dataset_ids[0]")


def test_datasets_of_a_queued_experiment_cannot_be_deleted(client, worker):
    a, b = _datasets(client)
    eid = _submit(client, [a["id"], b["id"]])["id"]
    assert_problem(client.delete(f"/datasets/{b['id']}"), 409)
    client.post(f"/jobs/{eid}/cancel")
    assert client.delete(f"/datasets/{b['id']}").status_code == 204


def test_cli_experiment_help_and_run(tmp_path, capsys):
    out = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "experiment", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "usage: msvmav experiment" in out.stdout and "--dataset" in out.stdout
    path = tmp_path / "blobs.csv"
    path.write_bytes(to_csv(*blobs(n=40)))
    code = cli_main(
        [
            "experiment",
            "--dataset",
            str(path),
            "--label",
            "y",
            "--algorithms",
            "msvmav",
            "mamc",
            "--splits",
            "2",
            "--cv",
            "2",
            "--n-jobs",
            "1",
            "--format",
            "csv",
            "--quiet",
        ]
    )
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert rows[0]["dataset"] == "blobs" and float(rows[0]["MSVMAv_mean"]) >= 0.9
    assert "MAMC_vs_MSVMAv" in rows[0]


@pytest.mark.parametrize("global_options", [
    ["--database-url", "sqlite:////nonexistent/dir/unused.db"],
    ["--database-url=sqlite:////nonexistent/dir/unused.db"],
])
def test_cli_experiment_after_global_options(tmp_path, capsys, global_options):
    """The experiment needs no database: a --database-url before it is accepted, not used."""
    path = tmp_path / "blobs.csv"
    path.write_bytes(to_csv(*blobs(n=40)))
    code = cli_main([*global_options, "experiment", "--dataset", str(path), "--label", "y",
                     "--algorithms", "msvmav", "mamc", "--splits", "1", "--cv", "2",
                     "--grid", "quick", "--n-jobs", "1", "--format", "csv", "--quiet"])
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert rows[0]["dataset"] == "blobs" and float(rows[0]["MAMC_mean"]) > 0.5


def test_documented_examples_of_the_new_bodies_are_accepted(client):
    """Swagger's "Try it out" with each documented example (dataset ids made to exist)."""
    ds = upload(client, to_csv(*blobs(n=60)))
    spec = client.get("/openapi.json").json()
    for path in ("/train", "/experiments"):
        examples = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"][
            "examples"
        ]
        assert len(examples) >= 3
        for name, example in examples.items():
            body = dict(example["value"])
            if "dataset_id" in body:
                body["dataset_id"] = ds["id"]
            else:
                body["dataset_ids"] = [ds["id"]]
            r = client.post(path, json=body)
            assert r.status_code == 202, (path, name, r.text)
    for path in ("/experiments/{experiment_id}/margins.png", "/models/{model_id}/margins.png"):
        assert "image/png" in spec["paths"][path]["get"]["responses"]["200"]["content"]
    assert "experiments" in {t["name"] for t in spec["tags"]}
