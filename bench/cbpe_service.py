"""The monitoring report's label-free estimate against the realised accuracy on shifted windows
built through the real service (issue 47), side by side with NannyML's CBPE given the same
probabilities: ``msvmav serve --workers 1`` on a scratch SQLite database; per data set a model
is trained, each window's rows predicted, their labels posted as feedback and the report
fetched (tests/app/shift_windows.py: control, covariate shift inside the training range,
an input inflated x 1e4, label-prior shift). NannyML's CBPE is fitted on the model's own
hold-out rows (predicted through the service) and estimates every window from the same
probabilities the service answered.

Per window: our estimate, its interval, the realised accuracy, the verdict (label-free, and
with the feedback), ATC, the importance-weighted and the label-shift estimates, the domain
classifier's AUC and its seconds, and NannyML's estimate. Then, per data set and over all:
the windows called reliable, how many of them are within 0.05 and covered by the interval,
and the mean absolute error on them, ours and NannyML's on the same windows.

    .venv/bin/python bench/cbpe.py --service [--sets magic kc1 phishing] [--window 400]
        [--seeds 1 2 3] [--auto-search]

``--auto-search`` trains with /train's default model search instead of a linear MSVMAv.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from bench._api import live_api
from tests.app import shift_windows

SETS = ["magic", "kc1", "phishing"]  # magic: the verdict's limits were chosen on it


def _finish(client: Any):
    def finish(job_id: int) -> int:
        end = time.monotonic() + 1800
        while time.monotonic() < end:
            job = client.get(f"/jobs/{job_id}").json()
            if job["status"] in ("succeeded", "failed", "cancelled"):
                if job["status"] != "succeeded":
                    raise SystemExit(f"training failed: {job}")
                return job["model_id"]
            time.sleep(0.5)
        raise SystemExit("training took over 30 min")
    return finish


def _positive(rows: list[dict], classes: list[str]) -> dict[str, np.ndarray]:
    proba = np.array([r[classes[1]] for r in rows])
    return {"proba": proba, "pred": (proba >= 0.5).astype(int)}


def nannyml(found: dict[str, Any]) -> list[float] | str:
    """NannyML CBPE's accuracy per window (reference: the hold-out), or why there is none."""
    try:
        import nannyml as nml
        import pandas as pd
    except ImportError as exc:
        return f"nannyml not installed ({exc.name}); pip install -e '.[bench]'"
    ref = found["reference"]
    classes = list(ref["probabilities"][0])

    def frame(probabilities: list[dict], truth: list) -> pd.DataFrame:
        part = _positive(probabilities, classes)
        y = (np.array([str(t) for t in truth]) == classes[1]).astype(int)
        return pd.DataFrame({"proba": part["proba"], "pred": part["pred"], "y": y})

    out = []
    for w in found["windows"]:
        est = nml.CBPE(y_pred_proba="proba", y_pred="pred", y_true="y", metrics=["accuracy"],
                       problem_type="classification_binary", chunk_number=1)
        est.fit(frame(ref["probabilities"], ref["truth"]))
        result = est.estimate(frame(w["probabilities"], w["truth"])).filter(
            period="analysis").to_df()
        out.append(float(result[("accuracy", "value")].to_numpy(dtype=float)[0]))
    return out


def _print_set(name: str, found: dict[str, Any], theirs: list[float] | str) -> list[dict]:
    print(f"\n{name}: model {found['model_id']}, {len(found['windows'])} windows")
    print(f"  {'window':22} {'estimate':>8} {'interval':>15} {'realised':>8} {'verdict':>10} "
          f"{'+feedback':>10} {'ATC':>6} {'IW':>6} {'MLLS':>6} {'AUC':>6} {'s':>5} {'NannyML':>7}"
          "  reasons")
    rows = []
    for k, w in enumerate(found["windows"]):
        nml_v = theirs[k] if isinstance(theirs, list) else None
        iw = (w["importance_weighted"] or {}).get("estimate", float("nan"))
        auc = (w["domain"] or {}).get("auc", float("nan"))
        sec = (w["domain"] or {}).get("seconds", float("nan"))
        mlls = (w["label_shift"] or {}).get("estimate", float("nan"))
        print(f"  {w['window']:22} {w['estimate']:8.3f}  [{w['low']:.3f}, {w['high']:.3f}] "
              f"{w['realised']:8.3f} {w['verdict']:>10} {w['verdict_with_feedback']:>10} "
              f"{w['atc']['estimate']:6.3f} {iw:6.3f} {mlls:6.3f} {auc:6.3f} {sec:5.2f} "
              f"{'-' if nml_v is None else f'{nml_v:7.3f}'}  {','.join(w['codes'])}")
        rows.append(w | {"set": name, "nannyml": nml_v})
    return rows


def _summary(label: str, rows: list[dict], key: str) -> None:
    reliable = [r for r in rows if r[key] == "reliable"]
    if not reliable:
        print(f"  {label}: no window called reliable ({key})")
        return
    err = [abs(r["estimate"] - r["realised"]) for r in reliable]
    covered = [r["low"] <= r["realised"] <= r["high"] for r in reliable]
    line = (f"  {label}: {len(reliable)}/{len(rows)} reliable ({key}); within 0.05 "
            f"{sum(e <= 0.05 for e in err)}/{len(reliable)}, covered {sum(covered)}/"
            f"{len(reliable)}; MAE ours {np.mean(err):.4f}")
    if all(r["nannyml"] is not None for r in reliable):
        theirs = np.mean([abs(r["nannyml"] - r["realised"]) for r in reliable])
        line += f", NannyML CBPE {theirs:.4f}"
    unreliable = [abs(r["estimate"] - r["realised"]) for r in rows if r[key] != "reliable"]
    if unreliable:
        line += f"; the unreliable windows' MAE ours {np.mean(unreliable):.4f}"
    print(line)


def main(args: Any) -> int:
    rows = []
    if getattr(args, "auto_search", False):  # /train's default: search "auto" chooses the model
        shift_windows.TRAIN_PARAMS = {k: v for k, v in shift_windows.TRAIN_PARAMS.items()
                                      if k != "kernel"}
    with live_api({"MSVMAV_LOG_LEVEL": "WARNING"}, 600, ("--workers", "1")) as (client, _pid):
        for name in args.sets or SETS:
            found = shift_windows.run_set(client, name, args.window, _finish(client),
                                          reference=True, seeds=tuple(args.seeds))
            rows += _print_set(name, found, nannyml(found))
    print("\nsummary (reliable windows: the verdict's; MAE against the realised accuracy)")
    for name in dict.fromkeys(r["set"] for r in rows):
        part = [r for r in rows if r["set"] == name]
        _summary(name, part, "verdict")
        _summary(name, part, "verdict_with_feedback")
    _summary("all", rows, "verdict")
    _summary("all", rows, "verdict_with_feedback")
    return 0
