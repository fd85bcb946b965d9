"""Issue 28's hostile bundles (points 1, 5, 6, 7): every one a 422 naming the member (or a 413),
quickly, with nothing stored, on each database. Each failed before the fix: a hang (itemsize
0), a 500 (huge shapes, deep JSON, a NUL on PostgreSQL) or a 201 (misstated members, a NUL
stored on SQLite, 9 MiB of JSON)."""

from __future__ import annotations

import io
import json
import threading
import zipfile
from collections.abc import Callable

import numpy as np
import pytest

from app.export.bundle import BundleError, read_bundle
from tests.app.export_support import (
    _counts,
    import_bundle,
    linear_bundle,  # noqa: F401 - a fixture
    npy,
    rezip,
)
from tests.app.support import assert_problem

COEF = "arrays/est.coef_.npy"


def npy_header_only(descr: str, shape: tuple[int, ...]) -> bytes:
    """An npy member whose header declares ``shape`` of ``descr`` and whose data is empty."""
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        out, {"descr": descr, "fortran_order": False, "shape": shape}
    )
    return out.getvalue()


def deflated(content: bytes) -> bytes:
    """The same zip, its members deflated: small on the wire, large unpacked."""
    with zipfile.ZipFile(io.BytesIO(content)) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for n, b in members.items():
            zf.writestr(n, b)
    return out.getvalue()


def _member(name: str, data: bytes) -> Callable[[dict], None]:
    return lambda m: m.update({name: data})


def _coef(convert: Callable[[np.ndarray], np.ndarray]) -> Callable[[dict], None]:
    def change(m: dict) -> None:
        m[COEF] = npy(convert(np.load(io.BytesIO(m[COEF]))))

    return change


def _model_json(change_meta: Callable[[dict], None]) -> Callable[[dict], None]:
    def change(m: dict) -> None:
        meta = json.loads(m["model.json"])
        change_meta(meta)
        m["model.json"] = json.dumps(meta).encode()

    return change


def _nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def _swap_scaling(m: dict) -> None:
    low, high = m["arrays/scaling.data_min.npy"], m["arrays/scaling.data_max.npy"]
    m["arrays/scaling.data_min.npy"], m["arrays/scaling.data_max.npy"] = high, low


def _padded_model_json(m: dict) -> None:
    m["model.json"] = m["model.json"] + b" " * (9 * 1024 * 1024)


def _nul_feature(meta: dict) -> None:
    meta["feature_names"][0] = "x\x00y"


# (id, change, status, member named, words in the detail)
HOSTILE: list[tuple[str, Callable[[dict], None], int, str, str]] = [
    ("shape-2**64", _member(COEF, npy_header_only("<f8", (2**64,))), 422, COEF, "declares"),
    ("shape-product-overflow", _member(COEF, npy_header_only("<f8", (2**40, 2**40))), 422, COEF,
     "declares"),
    ("void-dtype", _member(COEF, npy(np.zeros((1, 3), dtype="V8"))), 422, COEF, "float64"),
    ("deep-brackets", _member("model.json", b"[" * 100_000 + b"]" * 100_000), 422, "model.json",
     "deeper than 32"),
    ("params-400-deep", _model_json(lambda meta: meta.update(params=_nested(400))), 422,
     "model.json", "deeper than 32"),
    ("nul-in-model-json", _model_json(_nul_feature), 422, "model.json", "NUL"),
    ("nul-in-text-array", _member("arrays/est.classes_.npy", npy(np.array(["a\x00b", "c"]))),
     422, "arrays/est.classes_.npy", "NUL"),
    ("json-beyond-8-mib", _padded_model_json, 422, "model.json", "limit"),
    ("algorithm-misstated", _model_json(lambda meta: meta.update(algorithm="svm")), 422,
     "model.json", "is not estimator.json's MSVMAv"),
    ("coef-complex128", _coef(lambda a: a.astype(np.complex128)), 422, COEF, "float64"),
    ("coef-float16", _coef(lambda a: a.astype(np.float16)), 422, COEF, "float64"),
    ("coef-bool", _coef(lambda a: a != 0), 422, COEF, "float64"),
    ("coef-uint64", _coef(lambda a: np.abs(a * 1000).astype(np.uint64)), 422, COEF, "float64"),
    ("coef-3d", _coef(lambda a: a[None]), 422, COEF, "dimension"),
    ("scaling-swapped", _swap_scaling, 422, "arrays/scaling.data_min.npy", "exceeds"),
]


@pytest.mark.parametrize(
    ("change", "status", "member", "words"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE]
)
def test_a_hostile_bundle_is_refused_naming_the_member(
    client, engine, linear_bundle, change, status, member, words  # noqa: F811
):
    spoilt = deflated(rezip(linear_bundle, change))
    before = _counts(engine)
    body = assert_problem(import_bundle(client, spoilt), status, "file")
    assert words in body["detail"], body["detail"]
    assert body.get("member") == member, body
    assert _counts(engine) == before
    with pytest.raises(BundleError, match=words.split()[0]):
        read_bundle(spoilt, 1 << 30)


def test_an_itemsize_0_member_is_refused_at_once(client, engine, linear_bundle):  # noqa: F811
    """Point 1: dtype V0 (itemsize 0) with shape (2**40,) passed the size check and then made
    model_from_dict walk 2**40 elements (hours): refused from the header now."""
    spoilt = rezip(linear_bundle, _member(COEF, npy_header_only("|V0", (2**40,))))
    before = _counts(engine)
    answer: list = []
    thread = threading.Thread(
        target=lambda: answer.append(import_bundle(client, spoilt)), daemon=True
    )
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the import still runs after 60 s"
    body = assert_problem(answer[0], 422, "file")
    assert "itemsize" in body["detail"] and body["member"] == COEF, body
    assert _counts(engine) == before


def test_the_decompressed_bytes_are_capped_as_they_are_read(linear_bundle):  # noqa: F811
    """Point 6: what is actually decompressed stops at the budget, whatever the sizes."""
    big = deflated(rezip(linear_bundle, _member(COEF, npy(np.zeros((1, 2_000_000))))))
    assert len(big) < 1024 * 1024
    with pytest.raises(BundleError, match="limit|beyond"):
        read_bundle(big, 8 * 1024 * 1024)
