"""A corpus of malformed files and bodies (tests/app/corpus/, listed in manifest.json): each
gets its documented 4xx as problem+json, the message names the field (and the row/column of a
file where the manifest gives them), and no table gains or loses a row.

Manifest entries: ``endpoint``; ``file`` (a corpus file, uploaded as multipart ``file``),
``form`` (form fields), ``json`` (a JSON body) or ``raw`` (a corpus file sent as the JSON
body); ``status``; ``field``, ``row``, ``column`` the answer must name; ``xfail`` (a reason)
for defects fixed on another branch (with ``"run": false`` when the unfixed defect
would exhaust the machine's memory). ``$dataset`` / ``$model`` (and ``MODEL`` in raw bodies)
stand for a stored dataset and model; ``@LONG256`` for a 256-character text, ``@ID_COLUMN_CSV``
for a 5,000-row CSV with a unique id column (both made here, not stored).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from app.tables import Base
from tests.app.support import assert_problem, trained_model

CORPUS = Path(__file__).parent / "corpus"
MANIFEST: list[dict[str, Any]] = json.loads((CORPUS / "manifest.json").read_text())


def _id_column_csv() -> bytes:
    lines = ["id,x,y"] + [f"user-{i:05d},{i % 17},{'a' if i % 3 else 'b'}" for i in range(5000)]
    return ("\n".join(lines) + "\n").encode()


GENERATED = {"@LONG256": lambda: "n" * 256, "@ID_COLUMN_CSV": _id_column_csv}


def _params(case: dict[str, Any]):
    marks = []
    if "xfail" in case:
        # "run": false for a case that, unfixed, would exhaust the machine's memory
        run = case.get("run", True)
        marks.append(pytest.mark.xfail(reason=case["xfail"], strict=False, run=run))
    return pytest.param(case, id=case["id"], marks=marks)


def _row_counts(engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {
            t.name: conn.execute(select(func.count()).select_from(t)).scalar_one()
            for t in Base.metadata.sorted_tables
        }


def _substitute(value: Any, ids: dict[str, int]) -> Any:
    if isinstance(value, str):
        if value.startswith("$"):
            return ids[value[1:]]
        if value in GENERATED:
            return GENERATED[value]()
        return value
    if isinstance(value, list):
        return [_substitute(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, ids) for k, v in value.items()}
    return value


def _send(client, case: dict[str, Any], ids: dict[str, int]):
    endpoint = case["endpoint"]
    if "raw" in case:
        body = (CORPUS / case["raw"]).read_bytes().replace(b"MODEL", str(ids["model"]).encode())
        return client.post(endpoint, content=body, headers={"content-type": "application/json"})
    if "json" in case:
        return client.post(endpoint, json=_substitute(case["json"], ids))
    form = {k: str(v) for k, v in _substitute(case.get("form", {}), ids).items()}
    files = None
    if "file" in case:
        name = case["file"]
        content = GENERATED[name]() if name in GENERATED else (CORPUS / name).read_bytes()
        files = {"file": (name.lstrip("@").lower() + ".csv" if name in GENERATED else name,
                          content)}
    else:  # multipart without a file part
        files = {"other": ("x.txt", b"x")}
    return client.post(endpoint, files=files, data=form)


def test_corpus_is_large_and_every_file_is_used():
    assert len(MANIFEST) >= 40
    used = {c.get("file") for c in MANIFEST} | {c.get("raw") for c in MANIFEST}
    stored = {p.name for p in CORPUS.iterdir()} - {"manifest.json"}
    assert stored <= used, stored - used
    assert len({c["id"] for c in MANIFEST}) == len(MANIFEST)


@pytest.fixture
def stored(client, worker) -> dict[str, int]:
    """A dataset and a model trained on it (features x0, x1, x2; labels neg/pos)."""
    model = trained_model(client, worker)
    return {"dataset": model["dataset_id"], "model": model["id"]}


@pytest.mark.parametrize("case", [_params(c) for c in MANIFEST])
def test_malformed_input_is_refused_naming_what_is_wrong(client, engine, stored, case):
    before = _row_counts(engine)
    r = _send(client, case, stored)
    body = assert_problem(r, case["status"], case.get("field"))
    if "row" in case:
        assert body.get("row") == case["row"], body
        assert str(case["row"]) in body["detail"], body
    if "column" in case:
        assert body.get("column") == case["column"], body
        assert case["column"] in body["detail"], body
    assert _row_counts(engine) == before
