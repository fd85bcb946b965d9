"""Writes tests/solver/data/models_v1/: one persisted model of each kernel and kind as
``to_dict`` stored it before the kernel types (commit 16beafb), its meta as JSON and its arrays
as .npy (no pickle), with sample rows and their decision values. Run once with that commit's
solver on the path: ``PYTHONPATH=<its checkout> python tests/solver/data/write_models_v1.py``."""

import json
import pathlib
import shutil

import numpy as np
from sklearn.datasets import make_classification
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.preprocessing import MinMaxScaler

from solver import LSSVM, MAMC, ODM, SVM, MSVMAv

OUT = pathlib.Path(__file__).with_name("models_v1")


def main() -> None:
    X, y = make_classification(n_samples=40, n_features=4, n_informative=3, n_redundant=0,
                               n_classes=3, n_clusters_per_class=1, random_state=2)
    X = MinMaxScaler().fit_transform(X)
    yb = (y > 0).astype(int)
    rows = np.random.default_rng(5).random((6, 4))
    K, Kt = rbf_kernel(X, X, gamma=0.5), rbf_kernel(rows, X, gamma=0.5)
    models = {
        "msvmav_linear": (MSVMAv(max_iter=20), X, y, rows),
        "msvmav_rbf_exact": (MSVMAv(kernel="rbf", max_iter=20, calibration="sigmoid"), X, yb,
                             rows),
        "msvmav_poly_low_rank": (MSVMAv(kernel="poly", degree=2, approximation="low_rank",
                                        n_components=10, max_iter=20, random_state=0), X, yb,
                                 rows),
        "msvmav_precomputed": (MSVMAv(kernel="precomputed", max_iter=20), K, yb, Kt),
        "svm_rbf": (SVM(kernel="rbf"), X, y, rows),
        "lssvm_poly": (LSSVM(kernel="poly", degree=2), X, yb, rows),
        "mamc_precomputed": (MAMC(kernel="precomputed"), K, yb, Kt),
        "odm_linear": (ODM(max_iter=20, random_state=0), X, yb, rows),
    }
    shutil.rmtree(OUT, ignore_errors=True)
    for name, (est, Xf, yf, test) in models.items():
        est.fit(Xf, yf)
        data = est.to_dict()
        folder = OUT / name
        folder.mkdir(parents=True)
        (folder / "meta.json").write_text(json.dumps(data["meta"], indent=1, sort_keys=True))
        for key, value in data["arrays"].items():
            np.save(folder / f"{key}.npy", value, allow_pickle=False)
        np.save(folder / "rows.npy", test, allow_pickle=False)
        np.save(folder / "decision.npy", est.decision_function(test), allow_pickle=False)


if __name__ == "__main__":
    main()
