"""The `msvmav` command on a user's mistakes: one line on stderr, no traceback, exit 2 for usage
errors and 1 for a file's contents or the environment; defaults in --help; comma-separated
--algorithms; progress lines or a bar on a terminal.

The real command (a subprocess) where the process is the point: its exit status through
``sys.exit``, Dask, the experiment's progress output and the terminal. The checks of
arguments, settings, a database URL and a file's contents call ``app.cli.main.main`` in this
process (``in_process``: the same function the command runs, with this process's stdout and
stderr replaced and the logging it configures put back): each new process costs ~2 s of
imports, and these checks are about what ``main`` answers, not about the process."""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import logging
import os
import pty
import struct
import subprocess
import sys
import termios
from unittest import mock

import pytest

from app.cli.main import main
from solver import parallel
from tests.app.support import blobs, to_csv

RUN = {"timeout": 180, "capture_output": True, "text": True}
SMALL = ["--splits", "2", "--cv", "2", "--n-jobs", "1", "--format", "csv"]


def msvmav(*args: str, env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MSVMAV_")}
    return subprocess.run([sys.executable, "-m", "app.cli.main", *args],
                          env={**environ, **(env or {})},
                          cwd=cwd, **RUN)


def in_process(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``msvmav *args`` as ``app.cli.main.main(args)`` here: the MSVMAV_* variables of this
    process replaced by ``env``, stdout and stderr captured (a log handler the command installs
    writes to the captured stderr), the root logger's handlers and the loggers the command
    configures restored afterwards. An unexpected exception propagates: the test fails, as a
    traceback on the real command's stderr would make it."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MSVMAV_")}
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging.getLogger("uvicorn.access").disabled,
             logging.getLogger("alembic.runtime.migration").level)
    out, err = io.StringIO(), io.StringIO()
    try:
        with (mock.patch.dict(os.environ, {**environ, **(env or {})}, clear=True),
              contextlib.redirect_stdout(out), contextlib.redirect_stderr(err)):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse: --help (0) and usage errors (2)
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        root.handlers[:], level, disabled, alembic = saved
        root.setLevel(level)
        logging.getLogger("uvicorn.access").disabled = disabled
        logging.getLogger("alembic.runtime.migration").setLevel(alembic)
    return subprocess.CompletedProcess(["msvmav", *args], code, out.getvalue(), err.getvalue())


def assert_user_error(out: subprocess.CompletedProcess, code: int, *words: str) -> str:
    assert out.returncode == code, (out.returncode, out.stderr)
    assert "Traceback" not in out.stderr and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("msvmav"), lines
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def data_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "blobs.csv"
    path.write_bytes(to_csv(*blobs(n=40, seed=4, shift=2.0)))
    return path


def test_missing_file(tmp_path):
    missing = tmp_path / "nope.csv"
    assert_user_error(in_process("experiment", "--dataset", str(missing)), 2, "no such file",
                      str(missing))


def test_wrong_label(data_file):
    out = in_process("experiment", "--dataset", str(data_file), "--label", "Klass", *SMALL)
    assert_user_error(out, 2, "--label", "'Klass' not found", "'y'")


def test_binary_file(tmp_path):
    path = tmp_path / "model.csv"
    path.write_bytes(b"\x00\x01\x02PK\x03\x04" * 50)
    assert_user_error(in_process("experiment", "--dataset", str(path), *SMALL), 1, "binary")


def test_malformed_file(tmp_path):
    path = tmp_path / "broken.csv"
    path.write_text("a,b,y\n1,2,pos\n3,4,5,neg\n1,1,neg\n")
    assert_user_error(in_process("experiment", "--dataset", str(path), *SMALL), 1, "Line 3")


def test_directory_as_dataset(tmp_path):
    assert_user_error(in_process("experiment", "--dataset", str(tmp_path)), 2, "not a file")


@pytest.mark.parametrize("url", ["foo", "foo://bar"])
def test_malformed_database_url(url):
    assert_user_error(in_process("--database-url", url, "migrate"), 2, "--database-url",
                      "not a usable database URL")


def test_unreachable_database():
    line = assert_user_error(
        in_process("--database-url", "postgresql+psycopg://postgres@127.0.0.1:1/none", "migrate"),
        1, "cannot use the database", "127.0.0.1")
    assert "SELECT" not in line and "sqlalche.me" not in line


def test_invalid_setting_names_the_variable():
    out = in_process("migrate", env={"MSVMAV_SEARCH_JOBS": "0"})
    assert_user_error(out, 2, "MSVMAV_SEARCH_JOBS")


@pytest.mark.parametrize(("option", "value", "word"), [
    ("--splits", "0", "--splits"),
    ("--cv", "1", "--cv"),
    ("--test-size", "1.5", "--test-size"),
    ("--algorithms", "msvmav,xgboost", "'xgboost'"),
    ("--kernel", "sigmoid", "--kernel"),
])
def test_invalid_option_values(data_file, option, value, word):
    args = ["experiment", "--dataset", str(data_file), "--splits", "2", option, value]
    assert_user_error(in_process(*args), 2, word)


def test_unknown_command():
    assert_user_error(msvmav("train"), 2, "invalid choice")


def test_unreachable_dask_scheduler(data_file, monkeypatch):
    # in process, with a 1 s connect timeout instead of CONNECT_TIMEOUT's 10 (idle wall time)
    monkeypatch.setattr(parallel, "CONNECT_TIMEOUT", 1.0)
    out = in_process("experiment", "--dataset", str(data_file), *SMALL,
                     env={"MSVMAV_DASK_SCHEDULER": "tcp://127.0.0.1:9"})
    assert_user_error(out, 1, "Dask scheduler tcp://127.0.0.1:9 cannot be reached within 1 s")


def test_help_shows_defaults():
    top = in_process("--help")
    assert top.returncode == 0 and "experiment" in top.stdout
    exp = in_process("experiment", "--help")
    assert exp.returncode == 0
    text = " ".join(exp.stdout.split())
    for shown in ("(default: 30)", "(default: 0.2)", "(default: quick)", "(default: 5)",
                  "(default: 2)", "(default: train)", "MSVMAV_DASK_SCHEDULER"):
        assert shown in text, shown
    serve = " ".join(in_process("serve", "--help").stdout.split())
    assert "(default: 8000)" in serve and "(default: 127.0.0.1)" in serve


def _table(out: subprocess.CompletedProcess) -> list[dict]:
    assert out.returncode == 0, out.stderr
    return list(csv.DictReader(io.StringIO(out.stdout)))


def test_comma_separated_algorithms_equal_space_separated(data_file):
    comma = msvmav("experiment", "--dataset", str(data_file), "--algorithms", "msvmav,svm",
                   "mamc", *SMALL)
    space = in_process("experiment", "--dataset", str(data_file), "--algorithms", "msvmav", "svm",
                       "mamc", *SMALL)
    rows = _table(comma)
    assert rows == _table(space)
    assert {"MSVMAv_mean", "SVM_mean", "MAMC_mean"} <= set(rows[0])
    # not a terminal: plain progress lines, the last one complete
    lines = comma.stderr.strip().splitlines()
    assert lines and all(line.startswith("blobs: ") for line in lines)
    assert lines[-1].endswith("fits (100 %)")


def test_progress_bar_on_a_terminal(data_file):
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    try:
        environ = {k: v for k, v in os.environ.items() if not k.startswith("MSVMAV_")}
        proc = subprocess.run(
            [sys.executable, "-m", "app.cli.main", "experiment", "--dataset", str(data_file),
             "--algorithms", "svm", *SMALL], stdout=subprocess.PIPE, stderr=secondary,
            env=environ, timeout=180, text=True)
        os.close(secondary)
        secondary = None
        chunks = []
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # the terminal's other end is closed: all read
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        if secondary is not None:
            os.close(secondary)
        os.close(primary)
    assert proc.returncode == 0
    shown = b"".join(chunks).decode()
    assert "\r" in shown and "fit/s" in shown and "100%" in shown  # tqdm's bar, redrawn
    assert "blobs: " in shown


def test_the_api_process_hands_the_gil_over_every_millisecond(monkeypatch):
    """While uvicorn serves, the switch interval is SWITCH_INTERVAL (the event loop waits at most
    that long for the GIL while the prediction log's writer runs Python code); restored after."""
    import uvicorn

    from app.cli.main import SWITCH_INTERVAL, _run_http

    seen = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: seen.append(sys.getswitchinterval()))
    before = sys.getswitchinterval()
    assert before != SWITCH_INTERVAL
    _run_http(object(), "127.0.0.1", 0, 5.0)
    assert seen == [SWITCH_INTERVAL] and sys.getswitchinterval() == before
