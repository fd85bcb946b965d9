"""Label-free accuracy estimate (``solver.performance_estimate.expected_accuracy``) against the
realised accuracy on shifted windows of shared data sets, side by side with NannyML's CBPE
given the same probabilities and windows.

Per data set (binary): a stratified split into a training part (50 %), a labelled reference
part (20 %, NannyML's CBPE is fitted on it — it may recalibrate there; ours does not use it)
and a pool (30 %). ``MSVMAv(calibration="sigmoid")`` (``--calibration``) is fitted on the
training part (min-max scaled). Windows of ``--window`` rows are drawn from the pool with a
covariate shift of growing strength: row i's weight is exp(s z_i), z_i the standardised value
of the feature with the largest |weight| in the model, s from -2 to 2 (P(y | x) is untouched,
the shift CBPE assumes). For each window: the realised accuracy (from the labels), our
estimate with its 95 % interval, and NannyML's estimate; then the mean absolute error of each
over the windows.

NannyML is a bench-only anchor (the ``bench`` extra); without it the figures print alone.

    .venv/bin/python bench/cbpe.py [--windows 10] [--window 400] [--calibration isotonic]

``--service`` (bench/cbpe_service.py): the report's estimate, interval and reliability verdict
on shifted windows built through the real service (control, covariate shift inside the
training range, an input inflated x 1e4, label-prior shift), beside NannyML's CBPE.

    .venv/bin/python bench/cbpe.py --service [--sets magic kc1 phishing] [--seeds 1 2 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# NannyML reports usage over the network unless told not to
os.environ.setdefault("NML_DISABLE_USAGE_LOGGING", "1")

import numpy as np  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from app.ingest import parse_dataset  # noqa: E402
from solver import MSVMAv  # noqa: E402
from solver.performance_estimate import expected_accuracy  # noqa: E402
from solver.scaling import MinMaxScaling  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
SETS = [
    ("magic", "magic04.data", {}),
    ("phishing", "phishing_TrainingDataset.arff", {}),
    ("bank", "bank-full.csv", {}),
    ("kc1", "kc1.arff", {}),
    ("biodeg", "qsar-biodeg.arff", {}),
]


def load(file: str, options: dict) -> tuple[np.ndarray, np.ndarray]:
    path = DATA / file
    parsed = parse_dataset(path.read_bytes(), path.name, **options)
    X = parsed.X.toarray() if hasattr(parsed.X, "toarray") else np.asarray(parsed.X)
    return X, np.asarray(parsed.y)


def shifted_windows(z: np.ndarray, n_windows: int, size: int, seed: int) -> list[np.ndarray]:
    """Index sets into the pool, each drawn with weights exp(s z), s from -2 to 2."""
    rng = np.random.default_rng(seed)
    size = min(size, z.size // 2)
    out = []
    for s in np.linspace(-2.0, 2.0, n_windows):
        w = np.exp(s * (z - z.max() if s > 0 else z - z.min()))
        out.append(rng.choice(z.size, size=size, replace=False, p=w / w.sum()))
    return out


def nannyml_estimates(ref: dict, windows: list[dict]) -> list[float] | str:
    """NannyML CBPE's accuracy estimate per window, or why there is none."""
    try:
        import nannyml as nml
        import pandas as pd
    except ImportError as exc:
        return f"nannyml not installed ({exc.name}); pip install -e '.[bench]'"
    size = len(windows[0]["y"])

    def frame(part: dict) -> pd.DataFrame:
        return pd.DataFrame({"proba": part["proba"], "pred": part["pred"], "y": part["y"]})

    est = nml.CBPE(y_pred_proba="proba", y_pred="pred", y_true="y", metrics=["accuracy"],
                   problem_type="classification_binary", chunk_size=size)
    est.fit(frame(ref))
    analysis = pd.concat([frame(w) for w in windows], ignore_index=True)
    result = est.estimate(analysis).filter(period="analysis").to_df()
    return result[("accuracy", "value")].to_numpy(dtype=float).tolist()[:len(windows)]


def run_set(name: str, X: np.ndarray, y: np.ndarray, args) -> dict:
    classes = np.unique(y)
    y01 = (y == classes[1]).astype(int)
    Xtr, Xrest, ytr, yrest = train_test_split(X, y01, train_size=0.5, stratify=y01,
                                              random_state=0)
    Xref, Xpool, yref, ypool = train_test_split(Xrest, yrest, train_size=0.4, stratify=yrest,
                                                random_state=0)
    scaling = MinMaxScaling.fit(Xtr)
    Xtr, Xref, Xpool = (scaling.transform(a) for a in (Xtr, Xref, Xpool))
    model = MSVMAv(calibration=args.calibration, random_state=0).fit(Xtr, ytr)
    feature = int(np.argmax(np.abs(model.coef_[0])))
    z = (Xpool[:, feature] - Xpool[:, feature].mean()) / (Xpool[:, feature].std() or 1.0)

    def part(Xp: np.ndarray, yp: np.ndarray) -> dict:
        P = model.predict_proba(Xp)
        pred = np.argmax(P, axis=1)
        return {"proba": P[:, 1], "P": P, "pred": pred, "y": yp}

    ref = part(Xref, yref)
    windows = [part(Xpool[i], ypool[i])
               for i in shifted_windows(z, args.windows, args.window, seed=1)]
    ours = [expected_accuracy(w["P"]) for w in windows]
    realised = [float(np.mean(w["pred"] == w["y"])) for w in windows]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = nannyml_estimates(ref, windows)
    print(f"\n{name}: {X.shape[0]} rows x {X.shape[1]} features; windows of "
          f"{len(windows[0]['y'])} rows shifted along feature {feature}")
    print(f"  {'window':>6} {'realised':>9} {'ours':>7} {'ours 95% interval':>19} "
          f"{'NannyML':>8}")
    for k, (r, o) in enumerate(zip(realised, ours, strict=True)):
        nml_v = f"{theirs[k]:8.4f}" if isinstance(theirs, list) else "       -"
        print(f"  {k:6d} {r:9.4f} {o['estimate']:7.4f}   [{o['low']:.4f}, {o['high']:.4f}] "
              f"{nml_v}")
    mae = float(np.mean([abs(o["estimate"] - r) for o, r in zip(ours, realised, strict=True)]))
    covered = float(np.mean([o["low"] <= r <= o["high"]
                             for o, r in zip(ours, realised, strict=True)]))
    out = {"ours": mae, "covered": covered}
    line = f"  MAE ours {mae:.4f} (interval covers {covered:.0%} of windows)"
    if isinstance(theirs, list):
        out["nannyml"] = float(np.mean(np.abs(np.array(theirs) - np.array(realised))))
        line += f"   MAE NannyML CBPE {out['nannyml']:.4f}"
    else:
        line += f"   NannyML: {theirs}"
    print(line)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--windows", type=int, default=10)
    ap.add_argument("--window", type=int, default=400)
    ap.add_argument("--calibration", default="sigmoid", choices=["sigmoid", "isotonic"])
    ap.add_argument("--sets", nargs="*", help="only these data sets")
    ap.add_argument("--service", action="store_true",
                    help="shifted windows through the real service (bench/cbpe_service.py)")
    ap.add_argument("--seeds", nargs="*", type=int, default=[1],
                    help="--service: the windows' seeds")
    ap.add_argument("--auto-search", action="store_true",
                    help="--service: train with /train's default model search, not linear")
    args = ap.parse_args(argv)
    if args.service:
        from bench import cbpe_service

        return cbpe_service.main(args)
    print(f"MSVMAv(calibration={args.calibration!r}); {args.windows} windows")
    results = {name: run_set(name, *load(file, options), args)
               for name, file, options in SETS if not args.sets or name in args.sets}
    print("\nsummary: mean absolute error of the estimated vs realised accuracy per window")
    for name, r in results.items():
        theirs = f"{r['nannyml']:.4f}" if "nannyml" in r else "-"
        print(f"  {name:10} ours {r['ours']:.4f}   NannyML CBPE {theirs}   "
              f"(our interval covers {r['covered']:.0%})")
    mean_ours = np.mean([r["ours"] for r in results.values()])
    line = f"  {'mean':10} ours {mean_ours:.4f}"
    if all("nannyml" in r for r in results.values()):
        line += f"   NannyML CBPE {np.mean([r['nannyml'] for r in results.values()]):.4f}"
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
