"""Where a dataset by reference may be read from, and where batch output may be written:
only under the roots an administrator configured (``MSVMAV_DATA_ROOTS``; outputs under
``MSVMAV_OUTPUT_ROOT`` too). A reference must never become a way to read the server's files or
to reach another host, so every rule answers 403 (or 422 for a location that is not one)
naming the rule it broke:

* no roots configured: nothing is accepted (403 saying MSVMAV_DATA_ROOTS is unset);
* a location is an absolute local path, a ``file://`` URL without a host (or ``localhost``),
  or a URL of a root's scheme and host; a relative path, a query, a fragment, user info or
  percent-escapes are malformed (422);
* no ``..`` segment anywhere (403), and the location lies under a root, segment by segment
  (``/data/in2`` is not under ``/data/in``);
* a URL must name a root's scheme and host exactly (``s3://other-bucket/...``,
  ``http://elsewhere/...``: 403);
* a directory is searched for Parquet files, leaving out parts starting with ``_`` or ``.``
  (batch outputs ``_scores-<job>/``, temporary files);
* every local file a directory or glob matches is resolved (``realpath``) and must still lie
  under a root's resolved path: a symlink (of the file or of any directory above it) out of
  the root is refused (403), not followed.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

from app.core.problems import Problem, invalid

#: the URL schemes read through fsspec (anything else is malformed)
REMOTE_SCHEMES = ("s3", "gs", "gcs", "abfs", "az", "http", "https", "hdfs", "memory")
_GLOB_CHARS = "*?["
PARQUET_SUFFIXES = (".parquet", ".parq", ".pq")


def forbidden(rule: str, loc: list[str | int]) -> Problem:
    """403 naming the path rule a location broke."""
    field = ".".join(str(p) for p in loc[1:]) or "uri"
    return Problem(403, f"{field}: {rule}", type="urn:msvmav:problem:forbidden-location",
                   title="Forbidden", errors=[{"loc": loc, "field": field, "message": rule}])


@dataclass(frozen=True)
class Location:
    """A checked location: ``scheme`` ("" for a local path), ``host``, ``path`` (absolute,
    normalised, without the scheme) and whether it holds glob characters."""

    scheme: str
    host: str
    path: str

    @property
    def local(self) -> bool:
        return self.scheme == ""

    @property
    def url(self) -> str:
        return self.path if self.local else f"{self.scheme}://{self.host}{self.path}"

    @property
    def is_glob(self) -> bool:
        return any(c in self.path for c in _GLOB_CHARS)


def parse(text: str, loc: list[str | int]) -> Location:
    """A location as written (a root or a request's uri); 422 for one that is not one, 403 for
    a ``..`` segment or a ``file://`` URL naming another host."""
    text = text.strip()
    if not text or "\x00" in text:
        raise invalid(loc, "an empty location (or one holding a NUL character)")
    if "%" in text or "\\" in text:
        raise invalid(loc, "percent-escapes and backslashes are not accepted in a location")
    if "://" not in text:
        if not text.startswith("/"):
            raise invalid(loc, f"{text!r} is neither an absolute path nor a URL")
        return Location("", "", _clean(text, loc))
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if parts.query or parts.fragment or "@" in parts.netloc:
        raise invalid(loc, "a location's URL holds no query, fragment or user info")
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise forbidden(f"file:// URLs name this machine only, not host {parts.netloc!r}",
                            loc)
        return Location("", "", _clean(parts.path or "/", loc))
    if scheme not in REMOTE_SCHEMES or not parts.netloc:
        raise invalid(loc, f"{text!r}: a URL needs a host (bucket) and one of the schemes "
                      f"{', '.join(REMOTE_SCHEMES)} (or file://)")
    return Location(scheme, parts.netloc.lower(), _clean(parts.path or "/", loc))


def _clean(path: str, loc: list[str | int]) -> str:
    if ".." in path.split("/"):
        raise forbidden("'..' segments are not accepted in a location", loc)
    cleaned = os.path.normpath(path) if path else "/"
    return "/" + cleaned.lstrip("/")


def roots_of(texts: list[str]) -> list[Location]:
    """The configured roots, parsed (a bad root is the administrator's error: ValueError)."""
    roots = []
    for text in texts:
        try:
            root = parse(text, ["MSVMAV_DATA_ROOTS"])
        except Problem as exc:
            raise ValueError(f"MSVMAV_DATA_ROOTS entry {text!r}: {exc.detail}") from None
        if root.is_glob:
            raise ValueError(f"MSVMAV_DATA_ROOTS entry {text!r} holds glob characters")
        roots.append(root)
    return roots


def check_roots(texts: list[str]) -> list[Location]:
    """The configured roots, refused at start-up (ValueError naming the entry) when one is
    malformed or its scheme's filesystem cannot be loaded here (``http(s)://`` needs aiohttp,
    ``s3://`` s3fs, ...): a root that every registration would refuse is the administrator's
    error, said once, not a 422 on every request."""
    roots = roots_of(texts)
    for root in roots:
        if root.local:
            continue
        try:
            import fsspec

            fsspec.get_filesystem_class(root.scheme)
        except (ImportError, ValueError) as exc:
            raise ValueError(f"MSVMAV_DATA_ROOTS entry {root.url!r}: {root.scheme}:// cannot be "
                             f"read here ({str(exc).splitlines()[0][:200]})") from None
    return roots


def under(path: str, root: str) -> bool:
    """Is ``path`` ``root`` or inside it (segment by segment)?"""
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root if root == "/" else root + "/")


def check(text: str, roots: list[Location], loc: list[str | int],
          setting: str = "MSVMAV_DATA_ROOTS") -> Location:
    """``text`` as a location under one of ``roots``; 403 naming the rule otherwise."""
    if not roots:
        raise forbidden(f"{setting} is unset: the administrator has configured no location "
                        "datasets may be read from (or written to)", loc)
    where = parse(text, loc)
    for root in roots:
        if (root.scheme, root.host) != (where.scheme, where.host):
            continue
        if under(where.path, root.path):
            return where
    if not where.local and not any((r.scheme, r.host) == (where.scheme, where.host)
                                   for r in roots):
        rule = f"{where.scheme}://{where.host} is not a configured root's scheme and host"
    else:
        rule = "the location is not under a configured root"
    shown = ", ".join(r.url for r in roots)
    raise forbidden(f"{rule} ({setting}: {shown})", loc)


def resolved_under(path: str, roots: list[Location]) -> bool:
    """Does the real path of a local file (every symlink resolved) lie under a local root's
    real path?"""
    real = os.path.realpath(path)
    return any(r.local and under(real, os.path.realpath(r.path)) for r in roots)


def hidden(relative: str) -> bool:
    """A path below a directory that a directory's search skips: one with a part starting
    with ``_`` or ``.`` (Hive's convention: ``_SUCCESS``, ``_scores-7/``, temporary files)."""
    return any(part[:1] in ("_", ".") for part in relative.split("/") if part)


#: files one reference may name, and directory entries its listing may visit: both bounded
#: while listing, before anything proportional to a larger count is kept
MAX_FILES = 10_000
MAX_VISITED = 1_000_000


class _Walk:
    """One listing's state: the entries visited (bounded), the directories entered (a
    directory reached twice through ``**`` or a link is walked once), the roots' real paths."""

    def __init__(self, roots: list[Location], loc: list[str | int], skip_private: bool):
        self.real_roots = [os.path.realpath(r.path) for r in roots if r.local]
        self.loc = loc
        self.skip_private = skip_private
        self.visited = 0
        self.entered: set[tuple[str, int]] = set()

    def inside(self, path: str) -> bool:
        real = os.path.realpath(path)
        return any(under(real, r) for r in self.real_roots)

    def entries(self, directory: str, pattern: str) -> list[os.DirEntry]:
        try:
            with os.scandir(directory) as it:
                found = list(it)
        except OSError:
            return []
        self.visited += len(found)
        if self.visited > MAX_VISITED:
            raise invalid(self.loc, f"the location's listing visits more than {MAX_VISITED} "
                          "directory entries: name a narrower directory or glob")
        hidden_ok = pattern.startswith(".")
        return [e for e in found if (hidden_ok or not e.name.startswith("."))
                and not (self.skip_private and e.name.startswith("_"))]

    def enter(self, entry: os.DirEntry, depth: int) -> bool:
        """May the walk go into this directory? A link out of the roots is refused, naming
        the link (which lies inside a root), never a name found beyond it."""
        if entry.is_symlink() and not self.inside(entry.path):
            raise forbidden(f"{entry.path!r} is a symbolic link to a place outside the "
                            "configured roots", self.loc)
        key = (os.path.realpath(entry.path), depth)
        if key in self.entered:
            return False
        self.entered.add(key)
        return True


def _segments(pattern: str) -> tuple[str, list[str]]:
    """A glob's directory before its first glob character, and the segments after it, runs
    of ``**`` collapsed into one (``a/**/**/x`` lists what ``a/**/x`` does, once)."""
    parts = [p for p in pattern.split("/") if p]
    static: list[str] = []
    while parts and not any(c in parts[0] for c in _GLOB_CHARS):
        static.append(parts.pop(0))
    segments: list[str] = []
    for part in parts:
        if not (part == "**" and segments and segments[-1] == "**"):
            segments.append(part)
    return "/" + "/".join(static), segments


def _matches(directory: str, segments: list[str], walk: _Walk) -> Iterator[str]:
    """What ``segments`` match below ``directory``, as ``glob(recursive=True)`` matches them,
    without entering a link out of the roots."""
    if not segments:
        yield directory
        return
    head, rest = segments[0], segments[1:]
    if head == "**":
        yield from _matches(directory, rest, walk)
        for entry in walk.entries(directory, head):
            if entry.is_dir():
                if walk.enter(entry, len(segments)):
                    yield from _matches(entry.path, segments, walk)
            elif not rest:
                yield entry.path
        return
    for entry in walk.entries(directory, head):
        if not fnmatch.fnmatchcase(entry.name, head):
            continue
        if not rest:
            yield entry.path
        elif entry.is_dir() and walk.enter(entry, len(rest)):
            yield from _matches(entry.path, rest, walk)


def local_files(where: Location, roots: list[Location], loc: list[str | int]) -> list[str]:
    """The Parquet files a local directory (recursively), file or glob names, sorted, each
    once (by its real path) and at most ``MAX_FILES``; each one's real path checked against
    the roots (403 naming the link that escapes, never a name beyond it)."""
    directory = not where.is_glob and os.path.isdir(where.path)
    if where.is_glob:
        base, segments = _segments(where.path)
    else:  # a directory: every file below it; a file: itself
        base, segments = where.path, (["**", "*"] if directory else [])
    walk = _Walk(roots, loc, skip_private=directory)
    if not walk.inside(base):
        raise forbidden(f"{base!r} resolves (through a symbolic link) to a place outside the "
                        "configured roots", loc)
    if not os.path.lexists(base):
        return []
    files: dict[str, str] = {}
    for f in _matches(base, segments, walk):
        if os.path.isdir(f) or (directory and not f.lower().endswith(PARQUET_SUFFIXES)):
            continue
        if not walk.inside(f):
            raise forbidden(f"{f!r} resolves (through a symbolic link) to a place outside "
                            "the configured roots", loc)
        files.setdefault(os.path.realpath(f), f)
        if len(files) > MAX_FILES:
            raise invalid(loc, f"the location names more than {MAX_FILES} files: name a "
                          "narrower directory or glob")
    return sorted(files.values())


def remote_files(where: Location, roots: list[Location], loc: list[str | int]) -> list[str]:
    """The Parquet files under a URL (directory listing or glob, through fsspec), as URLs;
    each listed name checked against the roots again."""
    base = fs_path(where)
    try:
        import fsspec

        fs = fsspec.filesystem(where.scheme)
        if where.is_glob:
            found = fs.glob(re.sub(r"(/\*\*)+(?=/|$)", "/**", base))
        elif fs.isdir(base):
            found = [f for f in fs.find(base) if f.lower().endswith(PARQUET_SUFFIXES)
                     and not hidden(f.lstrip("/")[len(base.lstrip("/")):])]
        else:
            found = [base] if fs.exists(base) else []
    except ImportError as exc:  # fsspec, or the scheme's filesystem (s3fs, gcsfs, ...)
        raise invalid(loc, f"{where.scheme}:// cannot be read here: {exc}") from None
    except OSError as exc:  # no credentials, no such bucket, no permission ...
        raise invalid(loc, f"{where.url!r} cannot be listed ({type(exc).__name__}: "
                      f"{str(exc)[:200]})") from None
    urls: list[str] = []
    for name in sorted(set(found)):
        if "://" in name:  # http(s) lists full URLs
            url = name
        else:
            host, _, path = name.lstrip("/").partition("/")
            url = f"{where.scheme}://{host}/{path}"
        check(url, roots, loc)
        urls.append(url)
        if len(urls) > MAX_FILES:
            raise invalid(loc, f"the location names more than {MAX_FILES} files: name a "
                          "narrower directory or glob")
    return urls


def fs_path(where: Location) -> str:
    """The path fsspec's filesystem of ``where.scheme`` takes: the whole URL for http(s),
    whose paths are URLs; bucket and key for the object stores."""
    if where.scheme in ("http", "https"):
        return where.url
    return f"{where.host}{where.path}"


def files_of(text: str, roots: list[Location], loc: list[str | int]) -> list[str]:
    """The checked Parquet files a reference names (422 when it names none)."""
    where = check(text, roots, loc)
    files = (local_files if where.local else remote_files)(where, roots, loc)
    if not files:
        raise invalid(loc, f"{where.url!r} names no Parquet file (a directory is searched "
                      f"for {', '.join(PARQUET_SUFFIXES)} files; a glob may name any)")
    return files
