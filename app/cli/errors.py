"""How the ``msvmav`` command reports a user's mistake: one line on stderr, no traceback.

Exit status 2 for usage errors (an option, a missing file, a malformed database URL: what the
command line got wrong), 1 for errors in a file's contents or the environment (a binary or
malformed data file, a database or Dask scheduler that cannot be reached). Anything else is a
bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn

#: IngestError fields that name a command-line option (the rest are about the file's contents)
OPTION_FIELDS = {"label": "--label", "drop": "--drop", "missing": "--missing",
                 "n_features": "--n-features"}


class UsageError(Exception):
    """A command-line mistake found after parsing (exit status 2)."""


class DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """--help text with "(default: X)" for every option that has a default (not for unset
    ones: None, False)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default is None or action.default is False or action.required:
            return action.help or ""
        return super()._get_help_string(action) or ""


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (``prog: error: ...``, exit 2) and whose
    --help shows the defaults."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", DefaultsFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def user_error(exc: BaseException) -> tuple[int, str] | None:
    """(exit status, one-line message) for an exception that is the user's to fix, else None."""
    from pydantic import ValidationError
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError

    from app.ingest.errors import IngestError
    from solver import SchedulerUnreachableError

    if isinstance(exc, UsageError):
        return 2, str(exc)
    if isinstance(exc, IngestError):
        if exc.field in OPTION_FIELDS:
            return 2, f"{OPTION_FIELDS[exc.field]}: {exc}"
        return 1, str(exc)
    if isinstance(exc, ArgumentError | NoSuchModuleError):
        return 2, f"--database-url / MSVMAV_DATABASE_URL is not a usable database URL ({exc})"
    if isinstance(exc, OperationalError):
        # the driver's own first line: never the SQL text or parameters
        reason = str(exc.orig or exc).strip().splitlines()[0]
        return 1, f"cannot use the database: {reason}"
    if isinstance(exc, ValidationError):
        fields = "; ".join(f"MSVMAV_{'_'.join(map(str, e['loc'])).upper()}: {e['msg']}"
                           for e in exc.errors())
        return 2, f"configuration: {fields}"
    if isinstance(exc, SchedulerUnreachableError):
        return 1, str(exc)
    if isinstance(exc, FileNotFoundError | IsADirectoryError | PermissionError):
        return 2, f"{exc.strerror}: {exc.filename}"
    if isinstance(exc, ValueError):  # the solver's parameter checks ("splits: needs ...")
        return 2, str(exc)
    return None


def run_reporting_errors(prog: str, command: Callable[[], int]) -> int:
    """``command()``; a user error is printed as one line on stderr and becomes the exit
    status."""
    try:
        return command()
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        found = user_error(exc)
        if found is None:
            raise
        code, message = found
        text = " ".join(message.split())  # one line
        print(f"{prog}: error: {text}", file=sys.stderr)
        return code
