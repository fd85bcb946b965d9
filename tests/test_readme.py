"""README.md runs as written: its `bash` and `python` blocks are executed in order, in one shell,
against a real `msvmav serve` on a temporary SQLite database and a free port, and every shown
output is compared with what the command printed.

Conventions (also stated in the README's "How this README is tested"):

* a block right after a ``<!-- not run: reason -->`` line is skipped;
* ``# `` lines right under a command (no blank line between) are that command's output; a
  ``text`` block right after a code block is the output of its last command (of the whole block
  for ``python``);
* ``...`` stands for any text (several lines too); a number shown with fewer digits than printed
  matches when they differ by at most one unit of its last shown digit; other numbers are equal.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.live_server import ROOT, LiveServer, live_server

README = ROOT / "README.md"
README_API = "http://127.0.0.1:8000"
NOT_RUN = re.compile(r"^<!--\s*not run\b.*-->\s*$")
FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
NUMBER = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
TOKEN = re.compile(r"(\.\.\.|" + NUMBER + ")")


@dataclass
class Command:
    text: str
    line: int  # 1-based line in README.md
    expected: str | None = None


@dataclass
class Block:
    lang: str
    line: int
    body: str
    skipped: bool
    commands: list[Command] = field(default_factory=list)


def parse_blocks(markdown: str) -> list[Block]:
    """The fenced ``bash``/``python`` blocks in order, their commands and shown outputs."""
    lines = markdown.splitlines()
    blocks: list[Block] = []
    i, previous_text = 0, ""
    last_code: Block | None = None
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            if lines[i].strip():
                previous_text = lines[i].strip()
                last_code = None
            i += 1
            continue
        indent, lang = len(m.group(1)), m.group(2)
        start = i + 1
        i += 1
        while i < len(lines) and not FENCE.match(lines[i]):
            i += 1
        body = "\n".join(line[indent:] for line in lines[start:i])
        i += 1
        if lang == "text" and last_code is not None:
            if last_code.commands:
                last_code.commands[-1].expected = body
            last_code = None
        elif lang in ("bash", "python"):
            block = Block(lang, start, body, bool(NOT_RUN.match(previous_text)))
            if lang == "bash":
                block.commands = split_commands(body, start + 1)
            else:
                block.commands = [Command(body, start + 1)]
            blocks.append(block)
            last_code = block
        else:
            last_code = None
        previous_text = ""
    return blocks


def split_commands(body: str, first_line: int) -> list[Command]:
    """Shell commands (continued over ``\\`` and open single quotes) and the ``# `` lines
    right under each."""
    commands: list[Command] = []
    pending: list[str] = []
    last: Command | None = None
    for offset, line in enumerate(body.splitlines()):
        if pending:
            pending.append(line)
        elif not line.strip():
            last = None
            continue
        elif line.startswith("#"):
            if last is not None:  # output of the command just above
                shown = line[2:] if line.startswith("# ") else line[1:]
                last.expected = shown if last.expected is None else last.expected + "\n" + shown
            continue
        else:
            pending = [line]
            start = first_line + offset
        text = "\n".join(pending)
        if text.count("'") % 2 == 0 and not text.endswith("\\"):
            last = Command(text, start)
            commands.append(last)
            pending = []
    assert not pending, f"README line {start}: unterminated command"
    return commands


def _pattern(expected: str) -> re.Pattern[str]:
    parts = []
    for token in TOKEN.split(expected.strip()):
        if token == "...":
            parts.append(r"[\s\S]*?")
        elif token and re.fullmatch(NUMBER, token):
            parts.append(f"({NUMBER})")
        else:
            parts.append(r"\s+".join(re.escape(w) for w in re.split(r"\s+", token)))
    return re.compile("".join(parts))


def _number_ok(shown: str, printed: str) -> bool:
    if shown == printed:
        return True
    if "e" in shown.lower() or "e" in printed.lower():
        return math.isclose(float(shown), float(printed), rel_tol=1e-9)
    decimals = len(shown.split(".")[1]) if "." in shown else 0
    printed_decimals = len(printed.split(".")[1]) if "." in printed else 0
    if printed_decimals <= decimals:
        return float(shown) == float(printed)
    return abs(float(shown) - float(printed)) <= 10.0**-decimals * (1 + 1e-9)


def output_matches(expected: str, printed: str) -> bool:
    """``printed`` is ``expected`` up to ``...`` elisions, whitespace runs and rounding."""
    m = _pattern(expected).fullmatch(printed.strip())
    if m is None:
        return False
    shown = [t for t in TOKEN.split(expected.strip()) if t != "..." and re.fullmatch(NUMBER, t)]
    return all(_number_ok(s, p) for s, p in zip(shown, m.groups(), strict=True))


@pytest.mark.parametrize(
    ("expected", "printed", "ok"),
    [
        ('{"a":0.7088,"b":[1,2]}', '{"a":0.7088240660980902,"b":[1,2]}', True),
        ('{"a":0.7088}', '{"a":0.7090}', False),
        ('{"a":0.7088}', '{"a":0.70}', False),  # printed less precise than shown
        ('{"n":569}', '{"n":568}', False),
        ("fitted in ... s, 100 iterations", "fitted in 0.01 s, 100 iterations", True),
        ("fitted in ... s, 100 iterations", "fitted in 0.01 s, 99 iterations", False),
        ("| a |\n...", "| a |\n| b |\n| c |", True),
        ("0.9719±0.0096", "0.9719±0.0097", False),  # same digits: equal
        ("0.9719±–", "0.9719±0.0000", False),
    ],
)
def test_output_matching_rules(expected: str, printed: str, ok: bool) -> None:
    assert output_matches(expected, printed) is ok


def test_readme_parsing_finds_commands_and_outputs() -> None:
    blocks = parse_blocks(README.read_text())
    skipped = [b for b in blocks if b.skipped]
    run = [b for b in blocks if not b.skipped]
    assert any("pip install" in b.body and "msvmav serve" in b.body for b in skipped)
    assert any(b.body.strip() == "bash .ci/run" for b in skipped)
    assert not any("pip install" in b.body or ".ci/run" in b.body for b in run)
    commands = [c for b in run for c in b.commands]
    assert sum(c.expected is not None for c in commands) >= 25
    assert any(b.lang == "python" and "make_pipeline(MinMaxScaler(), MSVMAv" in b.body for b in run)
    assert not any("shared/datasets" in b.body for b in blocks)  # only files of the repository


def test_readme_and_docs_show_the_pytest_command_of_ci() -> None:
    """The suite's command shown in README.md and docs/testing.md is the one .ci/run runs."""
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    line = next(x for x in ci if x.startswith(".venv/bin/pytest "))
    command = line.replace('"$@"', "").strip()
    assert "-n " in command and "--durations=" in command, command
    for doc in (README, ROOT / "docs" / "testing.md"):
        shown = [c.text for b in parse_blocks(doc.read_text()) for c in b.commands]
        assert command in shown, (doc.name, command, shown)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    """``msvmav serve`` on a fresh SQLite database with the prediction log on (as the README's
    quick start starts it), run from a scratch directory holding examples/ (so the README's
    relative paths work and its outputs land there)."""
    if shutil.which("jq") is None or shutil.which("curl") is None:
        pytest.fail("the README needs curl and jq (apt-get install curl jq)")
    # the quick start's database, ./msvmav.db (and its reserve) in the working directory
    with live_server(tmp_path, MSVMAV_DATABASE_URL="sqlite:///./msvmav.db") as server:
        yield server


def not_ignored(work: Path, written_by_test: set[str]) -> list[str]:
    """The files the README's commands left in ``work`` (the repository root, for a reader who
    runs them there) that the repository's .gitignore does not ignore: what ``git status``
    would show them."""
    left = sorted(
        str(p.relative_to(work)) for p in work.rglob("*")
        if p.is_file() and p.relative_to(work).parts[0] != "examples"
        and p.name not in written_by_test
    )
    checked = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"], cwd=ROOT, input="\n".join(left),
        capture_output=True, text=True, check=False,
    )
    assert checked.returncode in (0, 1), checked.stderr  # 1: none of them is ignored
    return sorted(set(left) - set(checked.stdout.split()))


def test_what_the_readme_writes_is_ignored_by_git(tmp_path: Path) -> None:
    """The files the walkthrough writes in the repository root (the quick start's database and
    its reserve, the batch result, the bad rows' file, the figures) are ignored; anything else
    is reported."""
    left = ["msvmav.db", "msvmav.db-wal", "msvmav.db.reserve", "result.csv", "bad-rows.csv",
            "margins.png", "wdbc.svg", "wdbc.json", "stray.txt", "readme_block_0.py"]
    for name in left:
        (tmp_path / name).write_text("x")
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "own.txt").write_text("x")
    assert not_ignored(tmp_path, {"readme_block_0.py"}) == ["stray.txt"]


def test_readme_runs_as_written(server: LiveServer) -> None:
    work, env, api = server.cwd, server.env, server.url
    blocks = [b for b in parse_blocks(README.read_text()) if not b.skipped]
    commands = [c for b in blocks for c in b.commands]
    script = ["set -o pipefail"]
    for n, block in enumerate(blocks):
        for c in block.commands:
            k = commands.index(c)
            if block.lang == "python":
                path = work / f"readme_block_{n}.py"
                path.write_text(c.text.replace(README_API, api) + "\n")
                run = f"{sys.executable} {path.name}"
            else:
                run = c.text.replace(README_API, api)
            script.append(f"{run}\nprintf '\\n@@README %d %d %s@@\\n' {k} $? $EPOCHREALTIME")
    t0 = time.monotonic()
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    seconds = time.monotonic() - t0
    outputs: dict[int, tuple[str, int]] = {}
    rest = done.stdout
    ends = {}
    for m in re.finditer(r"\n@@README (\d+) (\d+) ([\d.]+)@@\n", done.stdout):
        k = int(m.group(1))
        ends[k] = float(m.group(3))
        outputs[k] = (rest[: rest.index(m.group(0))], int(m.group(2)))
        rest = rest[rest.index(m.group(0)) + len(m.group(0)) :]
    failures = []
    for k, c in enumerate(commands):
        if k not in outputs:
            failures.append(f"README line {c.line}: not reached\n{c.text}\nstderr:\n{done.stderr}")
            break
        printed, rc = outputs[k]
        if rc != 0:
            failures.append(f"README line {c.line}: exit {rc}\n{c.text}\n{printed}")
        elif c.expected is not None and not output_matches(c.expected, printed):
            shown = f"--- shown:\n{c.expected}\n--- printed:\n{printed}"
            failures.append(f"README line {c.line}:\n{c.text}\n{shown}")
    assert not failures, "\n\n".join(failures) + f"\n(stderr:\n{done.stderr[-3000:]})"
    scripts = {f"readme_block_{n}.py" for n in range(len(blocks))}
    assert not_ignored(work, scripts) == [], "files git would show after the README's commands"
    took = sorted(
        ((ends[k] - ends.get(k - 1, ends[k]), commands[k].line) for k in ends), reverse=True
    )
    print(f"README: {len(commands)} commands in {seconds:.1f} s; slowest (s, line): {took[:5]}")
