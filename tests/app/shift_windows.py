"""Shifted windows of public data sets run through the real service (issue 47): train a model,
predict a window's rows, post their true labels as feedback, fetch the monitoring report. Used
by the acceptance test (tests/app/test_monitoring_shift_windows.py) and the bench beside
NannyML's CBPE (bench/cbpe.py --service).

Per data set (``load``: /work/shared/datasets, the label column ``class``), the rows are
shuffled (seed 0); the first ``TRAIN_FRACTION`` are uploaded and trained on (a linear
MSVMAv, a 30 % hold-out kept, sigmoid calibration), the rest are the pool the windows are
drawn from (``windows``), each of ``size`` rows (seeded):

- ``control``: drawn at random;
- ``high:<f>`` / ``low:<f>``: covariate shift inside the training range, drawn from the upper
  / lower half of the pool's rows ranked by feature f (ties in a random order), for the
  feature f most (and the one second most) correlated with the label in the training part
  (Spearman);
- ``inflated:<f>``: the control's rows with feature f multiplied by 1e4 (an input inflated
  upstream, beyond the training range);
- ``prior:balanced`` / ``prior:skewed``: label-prior shift, the classes drawn in equal shares
  / with the majority class at (1 + its share) / 2 (as the pool holds them, at most).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.io import arff

from solver import protocol
from tests.app.support import wait_for

DATA = Path(__file__).resolve().parents[3] / "shared" / "datasets"
LABEL = "class"
TRAIN_FRACTION = 0.6
# A linear MSVMAv, named so that /train runs no model search (a request setting no
# hyper-parameter runs search "auto", which may choose another model).
TRAIN_PARAMS = {"kernel": "linear", "test_fraction": 0.3, "calibration": "sigmoid", "seed": 0}


def _arff(file: str, label: str, rows: int | None = None) -> pd.DataFrame:
    data, _ = arff.loadarff(DATA / file)
    frame = pd.DataFrame(data)
    frame[LABEL] = frame.pop(label).str.decode("ascii")
    return frame


def _magic() -> pd.DataFrame:
    frame = pd.read_csv(DATA / "magic04.data", header=None)
    frame.columns = [f"f{j}" for j in range(frame.shape[1] - 1)] + [LABEL]
    return frame.sample(n=3000, random_state=0)


def _phishing() -> pd.DataFrame:
    frame = _arff("phishing_TrainingDataset.arff", "Result")
    features = [c for c in frame.columns if c != LABEL]
    frame[features] = frame[features].apply(lambda c: c.str.decode("ascii").astype(int))
    return frame.sample(n=4000, random_state=0)


SETS: dict[str, Callable[[], pd.DataFrame]] = {
    "phishing": _phishing,
    "magic": _magic,
    "kc1": lambda: _arff("kc1.arff", "defects"),
    "biodeg": lambda: _arff("qsar-biodeg.arff", "Class"),
    "diabetes": lambda: _arff("diabetes.arff", "class"),
}


def load(name: str) -> pd.DataFrame:
    """The data set shuffled (seed 0), features then ``class``."""
    frame = SETS[name]()
    return frame.sample(frac=1.0, random_state=0).reset_index(drop=True)


def _pick(rng: np.random.Generator, frame: pd.DataFrame, size: int) -> pd.DataFrame:
    return frame.iloc[np.sort(rng.choice(len(frame), min(size, len(frame)), replace=False))]


def _by_prior(rng: np.random.Generator, pool: pd.DataFrame, size: int,
              major: Any, share: float) -> pd.DataFrame:
    is_major = pool[LABEL] == major
    n_major = min(int(round(size * share)), int(is_major.sum()))
    n_minor = min(size - n_major, int((~is_major).sum()))
    return pd.concat([_pick(rng, pool[is_major], n_major), _pick(rng, pool[~is_major], n_minor)])


def windows(train: pd.DataFrame, pool: pd.DataFrame, size: int,
            seed: int = 1) -> list[tuple[str, pd.DataFrame]]:
    """The named windows of the module's docstring."""
    rng = np.random.default_rng(seed)
    features = [c for c in train.columns if c != LABEL]
    classes = sorted(train[LABEL].unique())
    positive = (train[LABEL] == classes[1]).astype(float)
    corr = train[features].corrwith(positive, method="spearman").abs().fillna(0.0)
    first, second = corr.sort_values(ascending=False, kind="stable").index[:2]
    control = _pick(rng, pool, size)
    out = [("control", control)]
    for f in (first, second):
        # the pool's halves by the feature's rank (ties in a random order)
        order = np.lexsort((rng.random(len(pool)), pool[f].to_numpy()))
        half = len(pool) // 2
        out.append((f"high:{f}", _pick(rng, pool.iloc[order[half:]], size)))
        out.append((f"low:{f}", _pick(rng, pool.iloc[order[:half]], size)))
    out.append((f"inflated:{first}", control.assign(**{first: control[first] * 1e4})))
    counts = train[LABEL].value_counts()
    major = counts.index[0]
    out.append(("prior:balanced", _by_prior(rng, pool, size, major, 0.5)))
    out.append(("prior:skewed", _by_prior(rng, pool, size, major,
                                          (1 + counts.iloc[0] / counts.sum()) / 2)))
    return out


def train_model(client: Any, train: pd.DataFrame, finish: Callable[[int], int]) -> int:
    """Upload ``train`` and train on it (``TRAIN_PARAMS``); ``finish`` runs or waits for the job
    (its id) and answers the model's id."""
    up = client.post("/datasets", files={"file": ("train.csv", train.to_csv(index=False))},
                     data={"label": LABEL})
    assert up.status_code == 201, up.text
    job = client.post("/train", json={"dataset_id": up.json()["id"], **TRAIN_PARAMS})
    assert job.status_code == 202, job.text
    return finish(job.json()["id"])


def predict(client: Any, model_id: int, rows: pd.DataFrame, tag: str) -> list[dict]:
    """The rows' predictions (ids ``tag0``, ``tag1``, …)."""
    ids = [f"{tag}{i}" for i in range(len(rows))]
    r = client.post("/predict", json={"model_id": model_id, "ids": ids,
                                      "instances": rows.drop(columns=[LABEL]).to_dict("records")})
    assert r.status_code == 200, r.text
    return r.json()["predictions"]


def run_window(client: Any, model_id: int, name: str, rows: pd.DataFrame,
               tag: str) -> dict[str, Any]:
    """Predict the window, post its labels, fetch its report (polled until its rows and their
    sample are in); the figures a window is judged by, and the rows' probabilities."""
    since = datetime.now(UTC)
    predictions = predict(client, model_id, rows, tag)
    fb = client.post("/feedback", json={"model_id": model_id, "ids": [p["id"] for p in predictions],
                                        "labels": rows[LABEL].tolist()})
    assert fb.status_code == 200 and fb.json()["matched"] == len(rows), fb.text

    def ready() -> dict | None:
        r = client.get(f"/models/{model_id}/monitoring", params={"since": since.isoformat()})
        assert r.status_code == 200, r.text
        est = r.json()["performance_estimate"]
        done = est and est["n"] == len(rows) and est["n_labelled"] == len(rows)
        return r.json() if done and est.get("domain_classifier") else None

    report = wait_for(ready, timeout=60.0, interval=0.2)
    est = report["performance_estimate"]
    realised = float(np.mean([str(p["label"]) == str(y) for p, y in zip(predictions, rows[LABEL],
                                                               strict=True)]))
    interval = est["interval"] or est  # (widened where the domain classifier ran)
    return {"window": name, "n": len(rows), "estimate": est["estimate"], "low": interval["low"],
            "high": interval["high"], "low_if_calibrated": est["low"],
            "high_if_calibrated": est["high"], "realised": realised,
            "report_realised": est["realised_accuracy"],
            "verdict": est["reliability"]["label_free_verdict"],
            "verdict_with_feedback": est["reliability"]["verdict"],
            "codes": est["reliability"]["codes"], "reasons": est["reliability"]["reasons"],
            "atc": est["atc"], "importance_weighted": est["importance_weighted"],
            "domain": est["domain_classifier"], "label_shift": est["label_shift"],
            "clipped": report["live"]["clipped_fraction"],
            "warnings": [w["code"] for w in report["warnings"]],
            "probabilities": [p["probabilities"] for p in predictions],
            "labels": [p["label"] for p in predictions], "truth": rows[LABEL].tolist()}


def run_set(client: Any, name: str, size: int, finish: Callable[[int], int],
            reference: bool = False, seeds: tuple[int, ...] = (1,)) -> dict[str, Any]:
    """Every window of data set ``name`` (``windows``, of each of ``seeds``) through one model;
    with ``reference``, also the predictions of the model's hold-out rows (a labelled reference
    for NannyML)."""
    frame = load(name)
    cut = int(len(frame) * TRAIN_FRACTION)
    train, pool = frame.iloc[:cut], frame.iloc[cut:]
    model_id = train_model(client, train, finish)
    out: dict[str, Any] = {"model_id": model_id, "windows": []}
    if reference:
        # NannyML's reference: the model's own hold-out rows (its split: TRAIN_PARAMS'
        # test_fraction and seed over the uploaded rows), predicted
        _, held = protocol.split_indices(train[LABEL].to_numpy().astype(str),
                                         TRAIN_PARAMS["test_fraction"], TRAIN_PARAMS["seed"])
        ref = train.iloc[held]
        out["reference"] = {"probabilities": [p["probabilities"] for p in
                                              predict(client, model_id, ref, "ref-")],
                            "truth": ref[LABEL].tolist()}
    for seed in seeds:
        for k, (window, rows) in enumerate(windows(train, pool, size, seed)):
            found = run_window(client, model_id, window, rows, f"s{seed}w{k}-")
            out["windows"].append(found | {"seed": seed})
    return out
