"""A search job's message reports the job's real time (issue 45: "fitted in 11 s" for a 142 s
job): the whole training time, then the search's and the final fit's parts."""

from __future__ import annotations

import re

from tests.app.support import blobs, run_jobs, submit, to_csv, upload


def test_search_job_message_reports_search_and_fit_time(client, worker):
    X, y = blobs(n=120, d=3, shift=1.5)
    ds = upload(client, to_csv(X, y))
    job = submit(client, ds["id"], calibration="none", max_iter=20,
                 search={"grid": {"alpha": [1, 4, 16], "beta": [0.25, 1]}, "cv": 3})
    assert run_jobs(worker) == ["succeeded"]
    job = client.get(f"/jobs/{job['id']}").json()
    found = re.match(r"msvmav trained in ([\d.]+) s \(search ([\d.]+) s over 6 "
                     r"configurations, final fit ([\d.]+) s\)", job["message"])
    assert found, job["message"]
    total, search, fit = map(float, found.groups())
    model = client.get(f"/models/{job['model_id']}").json()
    assert search == round(model["search"]["seconds"], 2) and search > 0
    # the job's time holds both parts (each rounded to 0.01 s)
    assert total >= search + fit - 0.02
    assert "fitted in" not in job["message"]


def test_plain_job_message_keeps_the_fit_time(client, worker):
    X, y = blobs(n=60, d=3)
    ds = upload(client, to_csv(X, y))
    job = submit(client, ds["id"], calibration="none", max_iter=20)
    assert run_jobs(worker) == ["succeeded"]
    message = client.get(f"/jobs/{job['id']}").json()["message"]
    assert re.match(r"msvmav fitted in [\d.]+ s", message), message
