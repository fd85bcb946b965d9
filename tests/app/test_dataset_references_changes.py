"""Datasets by reference as a hostile or careless caller finds them (issue 45): every read
(train, profile, batch) re-resolves and re-checks the files, a change since registration is a
409 naming the file, no answer names a path beyond a root, globs list each file once and are
bounded, and an http(s) root works."""

from __future__ import annotations

import functools
import http.server
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from app.core.config import Settings
from app.core.problems import Problem
from app.datasets import locations
from tests.app.reference_support import (  # noqa: F401  (fixtures: the app's data root)
    frame,
    root_fixture,
    settings_fixture,
    write_parts,
)
from tests.app.support import assert_problem, run_jobs, submit


def _register(client, uri: str) -> dict:
    r = client.post("/datasets/references", json={"uri": uri, "label": "label"})
    assert r.status_code == 201, r.text
    return r.json()


def _job_error(client, worker, dataset_id: int) -> str:
    job = submit(client, dataset_id, max_iter=20)
    assert run_jobs(worker) == ["failed"]
    return client.get(f"/jobs/{job['id']}").json()["error"]


# --- a change since registration ---------------------------------------------------------------


def test_a_symlink_swapped_out_of_the_root_after_registration_is_refused_at_every_read(
        client, worker, root: Path, tmp_path: Path):
    write_parts(frame(), root / "d")
    secret = write_parts(frame(seed=1), tmp_path / "secret")
    dataset = _register(client, str(root / "d"))
    os.replace(root / "d" / "part-1.parquet", tmp_path / "moved.parquet")
    os.symlink(secret[1], root / "d" / "part-1.parquet")
    body = assert_problem(client.get(f"/datasets/{dataset['id']}/profile"), 409)
    assert str(root / "d" / "part-1.parquet") in body["detail"]
    assert str(tmp_path / "secret") not in body["detail"]
    error = _job_error(client, worker, dataset["id"])
    assert "part-1.parquet" in error and "since the dataset was registered" in error
    assert "secret" not in error


def test_a_file_rewritten_after_registration_is_a_409_not_its_new_rows(client, worker,
                                                                       root: Path):
    write_parts(frame(), root / "d")
    dataset = _register(client, str(root / "d"))
    bigger = frame(n=240, seed=3)
    bigger.to_parquet(root / "d" / "part-0.parquet", index=False)  # twice the rows
    body = assert_problem(client.get(f"/datasets/{dataset['id']}/profile"), 409)
    assert "part-0.parquet" in body["detail"] and "changed" in body["detail"]
    assert "part-0.parquet" in _job_error(client, worker, dataset["id"])


def test_a_file_whose_types_changed_is_a_409_on_profile_not_a_500(client, root: Path):
    write_parts(frame(), root / "d")
    dataset = _register(client, str(root / "d"))
    path = root / "d" / "part-2.parquet"
    stat = path.stat()
    changed = pd.read_parquet(path).assign(x1=lambda f: f["x1"].astype(str))
    changed.to_parquet(path, index=False)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the same mtime: types still seen
    r = client.get(f"/datasets/{dataset['id']}/profile")
    assert r.status_code == 409, r.text
    assert "part-2.parquet" in r.json()["detail"]


# --- listings: no oracle, each file once, bounded ------------------------------------------------


def test_a_directory_link_out_of_the_root_names_the_link_never_what_lies_beyond(tmp_path: Path):
    root, outside = tmp_path / "data", tmp_path / "etc"
    write_parts(frame(), root / "ok")
    write_parts(frame(), outside)
    (outside / "shadow-secret.parquet").write_bytes(b"x")
    os.symlink(outside, root / "linked")
    roots = locations.roots_of([str(root)])
    details = []
    for uri in (f"{root}/**/*.parquet", f"{root}/*/shadow-*", f"{root}/*/nothing-here-*",
                f"{root}/linked/shadow-secret.parquet", f"{root}/linked/absent.parquet",
                f"{root}/linked"):
        with pytest.raises(Problem) as info:
            locations.files_of(uri, roots, ["uri"])
        assert info.value.status == 403, (uri, info.value.detail)
        details.append(info.value.detail)
    # the globs' answers name the link, never a name found beyond it
    assert not any("shadow-secret" in d or "part-0" in d for d in details[:3]), details
    # an existing and an absent name beyond the link get the same answer
    assert details[3].replace("shadow-secret", "X") == details[4].replace("absent", "X")


def test_globs_list_each_file_once_however_they_repeat_stars(client, root: Path):
    for k in range(4):
        write_parts(frame(n=30, seed=k), root / f"day={k}" / "hour=1", parts=2)
    single = locations.files_of(f"{root}/**/*.parquet", locations.roots_of([str(root)]), ["u"])
    assert len(single) == 8
    start = time.perf_counter()
    repeated = f"{root}" + "/**" * 40 + "/*.parquet"
    assert locations.files_of(repeated, locations.roots_of([str(root)]), ["u"]) == single
    assert time.perf_counter() - start < 5.0
    os.symlink(root / "day=0", root / "again")  # a second way to the same files
    dataset = _register(client, f"{root}/**/**/*.parquet")
    assert dataset["n_rows"] == 120 and len(dataset["reference"]["files"]) == 8


def test_a_listing_is_bounded_while_it_runs(tmp_path: Path, monkeypatch):
    root = tmp_path / "data"
    write_parts(frame(), root / "d", parts=6)
    monkeypatch.setattr(locations, "MAX_FILES", 4)
    with pytest.raises(Problem) as info:
        locations.files_of(str(root / "d"), locations.roots_of([str(root)]), ["body", "uri"])
    assert info.value.status == 422 and "more than 4 files" in info.value.detail
    monkeypatch.setattr(locations, "MAX_VISITED", 3)
    with pytest.raises(Problem) as info:
        locations.files_of(f"{root}/**/*.parquet", locations.roots_of([str(root)]), ["uri"])
    assert info.value.status == 422 and "directory entries" in info.value.detail


# --- an http(s) root ---------------------------------------------------------------------------


@pytest.fixture
def http_root(root: Path) -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 serving ``root`` (directory listings, HEAD, GET)."""
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def test_an_http_root_registers_and_profiles(client, settings: Settings, root: Path,
                                             http_root: str):
    write_parts(frame(), root / "web")
    settings.data_roots = [f"{http_root}/web"]
    dataset = _register(client, f"{http_root}/web/")
    assert dataset["n_rows"] == 120
    assert [f["path"] for f in dataset["reference"]["files"]] == [
        f"{http_root}/web/part-{k}.parquet" for k in range(3)]
    profile = client.get(f"/datasets/{dataset['id']}/profile")
    assert profile.status_code == 200, profile.text
    frame(n=90, seed=5).to_parquet(root / "web" / "part-1.parquet", index=False)
    body = assert_problem(client.get(f"/datasets/{dataset['id']}/profile"), 409)
    assert "part-1.parquet" in body["detail"]


def test_a_root_whose_scheme_cannot_be_read_here_is_refused_at_start_up(database_url: str):
    from app.main import create_app

    settings = Settings(database_url=database_url, data_roots=["gs://bucket/data"],
                        _env_file=None)
    with pytest.raises(ValueError, match=r"MSVMAV_DATA_ROOTS entry 'gs://bucket/data'"):
        create_app(settings)
