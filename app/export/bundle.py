"""A model as one self-contained file: a zip of JSON and npy members, never pickle.

Members::

    manifest.json      {"format": "msvmav.bundle", "version": 1, "members": {name: {"sha256",
                        "size"}}} -- every other member, with its checksum
    model.json         metadata: algorithm, params, classes, feature names, n_features, scaling,
                       training summary, source model id
    encoding.json      the training data's column encoding (numeric / one-hot categorical)
    estimator.json     the estimator's ``to_dict()["meta"]`` (``solver.model_from_dict``)
    arrays/est.<name>.npy      the estimator's fitted arrays
    arrays/scaling.<name>.npy  min-max scaling (data_min, data_max), when the model has one

``read_bundle`` refuses (``BundleError`` naming the problem) a file that is not such a zip or is
truncated, a member whose checksum differs (tampered or corrupted), a missing or unexpected
member, a format version newer than ``BUNDLE_VERSION``, and anything pickled: npy arrays are read
with ``allow_pickle=False`` after their header is checked: no object dtype, an itemsize of at
least 1, and the declared shape times the itemsize (in Python integers) equal to the bytes that
follow the header, before any array is made. Sizes are checked from the zip's directory before
any member is read, and the bytes actually decompressed are capped as they are read: each JSON
member at ``MAX_JSON_BYTES`` (8 MiB), all members together at the upload limit. A JSON member is
refused before it is parsed when it nests deeper than ``MAX_JSON_DEPTH`` (32) levels, and after
when a string or key holds a NUL (U+0000; PostgreSQL's text cannot hold one). The members must
agree with what they describe: model.json's ``algorithm`` names estimator.json's estimator class,
every estimator array has the dtype kind and dimensions its class declares
(``solver.model_from_dict``), a text array holds no NUL, and the scaling's ``data_min`` is at
most its ``data_max``, finite, column by column.

``load_bundle(path)`` gives the service's own ``ServedModel`` (app.serving.model) whose
``predict``/``decision_function``/``predict_proba`` take raw rows as ``/predict`` does, labelled
by the exported rule. This module imports neither the web framework nor the database layer.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from app.core.jsonable import jsonable
from app.ingest import Encoder, IngestError
from app.serving.model import ServedModel
from solver import (
    ALGORITHMS,
    MinMaxScaling,
    RuleError,
    array_problem,
    attributes_problem,
    check_rule,
    model_from_dict,
)

BUNDLE_FORMAT = "msvmav.bundle"
BUNDLE_VERSION = 1
MANIFEST = "manifest.json"
JSON_MEMBERS = ("model.json", "encoding.json", "estimator.json")
ARRAY_DIR = "arrays/"
EST_PREFIX, SCALING_PREFIX = "est.", "scaling."
MODEL_KEYS = ("algorithm", "params", "scaling", "classes", "n_features", "feature_names")
# The manifest and JSON members are small; this bounds what is parsed before checksums.
MAX_MANIFEST_BYTES = 1024 * 1024
# A JSON member's bytes and nesting, checked before it is parsed (parsed JSON costs up to ~30
# times its text: 8 MiB of ``{},`` is ~220 MiB of Python objects). The app's own request rule.
MAX_JSON_BYTES = 8 * 1024 * 1024
MAX_JSON_DEPTH = 32
_READ_CHUNK = 1024 * 1024
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET_STEP = np.zeros(256, dtype=np.int8)
_BRACKET_STEP[[ord("["), ord("{")]] = 1
_BRACKET_STEP[[ord("]"), ord("}")]] = -1
PICKLE_MAGIC = b"\x80"
_NPY_HEADERS = {
    (1, 0): np.lib.format.read_array_header_1_0,
    (2, 0): np.lib.format.read_array_header_2_0,
}


class BundleError(ValueError):
    """A bundle that cannot be imported; ``member`` names the part at fault, if one is."""

    def __init__(self, message: str, member: str | None = None) -> None:
        super().__init__(message)
        self.member = member


class BundleTooLargeError(BundleError):
    """The bundle (or what it unpacks to) is beyond the size limit."""


@dataclass
class Bundle:
    """What a bundle holds, checked: ``meta`` is model.json."""

    meta: dict[str, Any]
    encoding: dict[str, Any]
    estimator_meta: dict[str, Any]
    estimator_arrays: dict[str, np.ndarray]
    scaling_arrays: dict[str, np.ndarray]
    estimator: Any = field(repr=False)
    scaling: MinMaxScaling | None


# -- writing ----------------------------------------------------------------------------------
def _npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, np.asarray(array), allow_pickle=False)
    return out.getvalue()


def _json(value: Any) -> bytes:
    return json.dumps(value, indent=1, sort_keys=True, allow_nan=False).encode()


def write_bundle(
    *, meta: dict[str, Any], encoding: dict[str, Any], estimator: Any, scaling: MinMaxScaling | None
) -> bytes:
    """The zip's bytes; ``meta`` becomes model.json (see ``app.export.service``)."""
    d = estimator.to_dict()
    arrays = {EST_PREFIX + k: np.asarray(v) for k, v in d["arrays"].items()}
    if scaling is not None:
        arrays |= {SCALING_PREFIX + k: v for k, v in scaling.to_arrays().items()}
    members = {  # (jsonable: NaN/inf become null, which the reader requires)
        "model.json": _json(jsonable(meta)),
        "encoding.json": _json(jsonable(encoding)),
        "estimator.json": _json(jsonable(d["meta"])),
    }
    for name, array in arrays.items():
        if array.dtype.hasobject:
            array = array.astype(str)  # (classes_ as text: to_dict's own rule)
        members[f"{ARRAY_DIR}{name}.npy"] = _npy(array)
    manifest = {
        "format": BUNDLE_FORMAT,
        "version": BUNDLE_VERSION,
        "members": {
            name: {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
            for name, data in members.items()
        },
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(MANIFEST, _json(manifest))
        for name, data in members.items():
            zf.writestr(name, data)
    return out.getvalue()


# -- reading ----------------------------------------------------------------------------------
def _open_zip(data: bytes, max_bytes: int) -> zipfile.ZipFile:
    if len(data) > max_bytes:
        raise BundleTooLargeError(f"bundle is {len(data)} bytes; the limit is {max_bytes}")
    if data[:1] == PICKLE_MAGIC:
        raise BundleError("the file is a pickle, not a bundle; bundles hold JSON and npy only")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, EOFError):
        raise BundleError("not a bundle: not a zip archive, or truncated") from None
    total = sum(info.file_size for info in zf.infolist())
    if total > max_bytes:
        raise BundleTooLargeError(f"bundle unpacks to {total} bytes; the limit is {max_bytes}")
    return zf


class _Budget:
    """The bytes a bundle may still unpack to, counted as they are actually decompressed."""

    def __init__(self, total: int) -> None:
        self.left = total


def _read_member(
    zf: zipfile.ZipFile,
    name: str,
    limit: int,
    budget: _Budget,
    refuse: type[BundleError] = BundleTooLargeError,
) -> bytes:
    """The member's bytes, decompressed a chunk at a time and never beyond ``limit`` or what is
    left of ``budget`` (whatever the zip's directory declares); beyond ``limit``, ``refuse``
    (BundleTooLargeError beyond the budget)."""
    info = zf.getinfo(name)
    cap = min(limit, budget.left)
    if cap < limit:
        refuse = BundleTooLargeError
    if info.file_size > cap:
        raise refuse(
            f"member {name} is {info.file_size} bytes; the limit is {cap}", name
        )
    chunks, size = [], 0
    try:
        with zf.open(info) as f:
            while size <= cap and (chunk := f.read(min(_READ_CHUNK, cap + 1 - size))):
                chunks.append(chunk)
                size += len(chunk)
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        raise BundleError(
            f"member {name} cannot be read (truncated or corrupted: {exc})", name
        ) from None
    if size > cap:
        raise refuse(f"member {name} unpacks beyond {cap} bytes", name)
    budget.left -= size
    return b"".join(chunks)


def _json_depth(data: bytes) -> int:
    """How deep the JSON text nests (its strings skipped), computed without parsing it."""
    if data.count(b"[") + data.count(b"{") <= MAX_JSON_DEPTH:
        return 0
    bare = _JSON_STRING.sub(b"0", data)
    steps = _BRACKET_STEP[np.frombuffer(bare, dtype=np.uint8)]
    return int(np.cumsum(steps, dtype=np.int64).max(initial=0))


def _nul_path(value: Any) -> str | None:
    """Where the first NUL (U+0000) in a string or key of parsed JSON is, else None (depth is
    bounded by ``MAX_JSON_DEPTH`` before parsing: no deep recursion)."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                return path or "(the document)"
        elif isinstance(node, dict):
            for key, item in node.items():
                step = f"{path}.{key}" if path else str(key)
                if "\x00" in key:
                    return step.replace("\x00", "\\u0000")
                stack.append((item, step))
        elif isinstance(node, list):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(node))
    return None


def _load_json(name: str, data: bytes) -> Any:
    if data[:1] == PICKLE_MAGIC:
        raise BundleError(f"member {name} is a pickle, not JSON", name)
    if len(data) > MAX_JSON_BYTES:
        raise BundleError(
            f"member {name} is {len(data)} bytes; a JSON member's limit is {MAX_JSON_BYTES}", name
        )
    if _json_depth(data) > MAX_JSON_DEPTH:
        raise BundleError(f"member {name}: JSON nested deeper than {MAX_JSON_DEPTH} levels", name)
    try:
        value = json.loads(data, parse_constant=_no_constant)
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError, RecursionError) as exc:
        raise BundleError(f"member {name} is not valid JSON: {exc}", name) from None
    where = _nul_path(value) if b"\\u0000" in data else None
    if where is not None:
        raise BundleError(
            f"member {name}: {where} must not contain NUL (U+0000) characters", name
        )
    return value


def _no_constant(token: str) -> Any:
    # NaN and Infinity are not JSON (and PostgreSQL's JSON type refuses them).
    raise ValueError(f"{token} is not a JSON number")


def _manifest(zf: zipfile.ZipFile) -> dict[str, Any]:
    if MANIFEST not in zf.namelist():
        raise BundleError("not a bundle: manifest.json is missing", MANIFEST)
    data = _read_member(zf, MANIFEST, MAX_MANIFEST_BYTES, _Budget(MAX_MANIFEST_BYTES))
    manifest = _load_json(MANIFEST, data)
    if not isinstance(manifest, dict) or manifest.get("format") != BUNDLE_FORMAT:
        raise BundleError(
            f"not a bundle: manifest.json's format is not {BUNDLE_FORMAT!r}", MANIFEST
        )
    version = manifest.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BundleError(f"manifest.json: version {version!r} is not a format version", MANIFEST)
    if version > BUNDLE_VERSION:
        raise BundleError(
            f"bundle format version {version} is newer than this service "
            f"reads (up to {BUNDLE_VERSION}); upgrade msvmav",
            MANIFEST,
        )
    members = manifest.get("members")
    if not isinstance(members, dict) or not all(
        isinstance(v, dict) and isinstance(v.get("sha256"), str) for v in members.values()
    ):
        raise BundleError("manifest.json: members must map each name to its sha256", MANIFEST)
    return members


def _check_names(zf: zipfile.ZipFile, listed: dict[str, Any]) -> None:
    present = set(zf.namelist()) - {MANIFEST}
    for name in sorted(present | set(listed)):
        allowed = name in JSON_MEMBERS or (
            name.startswith(ARRAY_DIR)
            and name.endswith(".npy")
            and "/" not in name[7:]
            and name[len(ARRAY_DIR) :].startswith((EST_PREFIX, SCALING_PREFIX))
        )
        if not allowed:
            raise BundleError(
                f"member {name} is not part of a bundle (JSON members and "
                "arrays/*.npy only; no pickles)",
                name,
            )
        if name not in present:
            raise BundleError(
                f"member {name} is listed in manifest.json but missing (truncated bundle?)", name
            )
        if name not in listed:
            raise BundleError(f"member {name} is not listed in manifest.json", name)
    for name in JSON_MEMBERS:
        if name not in present:
            raise BundleError(f"member {name} is missing", name)


def _load_npy(name: str, data: bytes) -> np.ndarray:
    """The array, its header checked before anything is made: no object (pickled) dtype, an
    itemsize of at least 1 (a zero itemsize lets any shape pass a size check), and the shape's
    product times the itemsize, in Python integers (no overflow), exactly the bytes that follow
    the header."""
    f = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(f)
        read_header = _NPY_HEADERS.get(version)
        if read_header is None:
            raise BundleError(f"member {name}: npy format version {version} is not read", name)
        shape, _order, dtype = read_header(f)
        if dtype.hasobject:
            raise BundleError(
                f"member {name} holds pickled Python objects (an object array); "
                "bundles carry plain numeric or text arrays only",
                name,
            )
        if dtype.itemsize < 1 or dtype.fields is not None or dtype.subdtype is not None:
            raise BundleError(
                f"member {name}: dtype {dtype.str} is not a plain numeric or text dtype "
                "(itemsize at least 1, no fields)",
                name,
            )
        nbytes = math.prod(int(n) for n in shape) * dtype.itemsize
        if nbytes != len(data) - f.tell():
            raise BundleError(
                f"member {name}: its header declares shape {tuple(shape)} of {dtype.str} "
                f"({nbytes} bytes), but {len(data) - f.tell()} bytes follow (truncated?)",
                name,
            )
        f.seek(0)
        array = np.load(f, allow_pickle=False)
    except BundleError:
        raise
    except (ValueError, OSError, EOFError, OverflowError, TypeError) as exc:
        raise BundleError(f"member {name} is not a valid npy array: {exc}", name) from None
    if array.dtype.kind in "SU" and _holds_nul(array):
        raise BundleError(f"member {name}: text must not contain NUL (U+0000) characters", name)
    return array


def _holds_nul(array: np.ndarray) -> bool:
    """Whether a text array has a NUL inside a string (numpy pads strings with NULs at the end:
    a zero code before the string's last non-zero one)."""
    unit = np.uint32 if array.dtype.kind == "U" else np.uint8
    width = array.dtype.itemsize // np.dtype(unit).itemsize
    if array.size == 0 or width == 0:
        return False
    codes = np.ascontiguousarray(array).reshape(-1).view(unit).reshape(-1, width)
    nonzero = codes != 0
    used = np.where(nonzero.any(axis=1), width - np.argmax(nonzero[:, ::-1], axis=1), 0)
    return bool(np.any(nonzero.sum(axis=1) < used))


def _members(data: bytes, max_bytes: int) -> dict[str, bytes]:
    """Every member but the manifest, each matching its checksum."""
    zf = _open_zip(data, max_bytes)
    budget = _Budget(max_bytes)
    with zf:
        listed = _manifest(zf)
        _check_names(zf, listed)
        out = {}
        for name, entry in listed.items():
            if name in JSON_MEMBERS:
                blob = _read_member(zf, name, MAX_JSON_BYTES, budget, BundleError)
            else:
                blob = _read_member(zf, name, max_bytes, budget)
            if hashlib.sha256(blob).hexdigest() != entry["sha256"]:
                raise BundleError(
                    f"member {name}: sha256 checksum mismatch (tampered with or corrupted)", name
                )
            out[name] = blob
    return out


def _check_meta(meta: Any) -> None:
    if not isinstance(meta, dict):
        raise BundleError("model.json must be an object", "model.json")
    missing = [k for k in MODEL_KEYS if k not in meta]
    if missing:
        raise BundleError(f"model.json: missing {', '.join(missing)}", "model.json")
    if not isinstance(meta["n_features"], int) or not isinstance(meta["classes"], list):
        raise BundleError(
            "model.json: n_features must be an integer and classes a list", "model.json"
        )
    names = meta["feature_names"]
    if not isinstance(names, list) or len(names) != meta["n_features"]:
        raise BundleError("model.json: feature_names must list n_features names", "model.json")


def _estimator_arrays(
    meta_algorithm: Any, est_meta: dict, arrays: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """The estimator's arrays, refusing a class other than model.json's algorithm, and names,
    dtype kinds or dimensions its class does not persist (``solver._base.array_problem``)."""
    klass = next((c for c in ALGORITHMS.values() if c.__name__ == est_meta.get("estimator")), None)
    if klass is None:
        raise BundleError(
            f"estimator.json: unknown estimator {est_meta.get('estimator')!r}", "estimator.json"
        )
    attributes = est_meta.get("attributes")
    problem = attributes_problem(klass, attributes)
    if problem is not None:
        raise BundleError(f"estimator.json: {problem}", "estimator.json")
    if ALGORITHMS.get(meta_algorithm) is not klass:
        raise BundleError(
            f"model.json: algorithm {meta_algorithm!r} is not estimator.json's "
            f"{klass.__name__}",
            "model.json",
        )
    out = {k[len(EST_PREFIX) :]: v for k, v in arrays.items() if k.startswith(EST_PREFIX)}
    for name, value in sorted(out.items()):
        problem = array_problem(klass, name, value)
        if problem is not None:
            member = f"{ARRAY_DIR}{EST_PREFIX}{name}.npy"
            raise BundleError(f"member {member}: {problem}", member)
    return out


def _scaling(arrays: dict[str, np.ndarray], width: int) -> MinMaxScaling | None:
    """The min-max scaling: data_min and data_max, ``width`` finite float64s each, min <= max."""
    sc_arrays = {
        k[len(SCALING_PREFIX) :]: v for k, v in arrays.items() if k.startswith(SCALING_PREFIX)
    }
    if not sc_arrays:
        return None
    member = f"{ARRAY_DIR}{SCALING_PREFIX}data_min.npy"
    if set(sc_arrays) != {"data_min", "data_max"} or any(
        a.shape != (width,) or a.dtype.kind != "f" or a.dtype.itemsize != 8
        for a in sc_arrays.values()
    ):
        raise BundleError(
            f"the scaling arrays must be data_min and data_max, {width} float64s each", member
        )
    low, high = sc_arrays["data_min"], sc_arrays["data_max"]
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise BundleError("the scaling's data_min and data_max must be finite", member)
    swapped = np.flatnonzero(low > high)
    if swapped.size:
        raise BundleError(
            f"the scaling's data_min exceeds its data_max in column {int(swapped[0])}", member
        )
    return MinMaxScaling.from_arrays(sc_arrays)


def _check_predicts(estimator: Any, meta: dict) -> None:
    """The rebuilt estimator answers finite decisions for rows in [0, 1] and has model.json's
    classes (a bundle whose arrays disagree is refused here, not at its first prediction)."""
    d = int(estimator.n_features_in_)
    try:
        D = estimator.decision_function(np.vstack([np.zeros(d), np.ones(d)]))
    except (ValueError, TypeError, IndexError, AttributeError) as exc:
        raise BundleError(
            f"the estimator's arrays do not fit together: {exc}", "estimator.json"
        ) from None
    if not np.all(np.isfinite(D)):
        raise BundleError(
            "the estimator's arrays give non-finite decision values", "estimator.json"
        )
    if estimator.calibrated:  # its probabilities, too
        try:
            P = estimator.probabilities(D)
        except (ValueError, TypeError, IndexError, KeyError) as exc:
            raise BundleError(
                f"estimator.json: the calibrator does not fit the model: {exc}", "estimator.json"
            ) from None
        if P.shape != (2, estimator.classes_.size) or not np.all(np.isfinite(P)):
            raise BundleError(
                "estimator.json: the calibrator gives no probabilities", "estimator.json"
            )
    if [str(c) for c in estimator.classes_.tolist()] != [str(c) for c in meta["classes"]]:
        raise BundleError("model.json's classes differ from the estimator's", "model.json")


def _rebuild(meta: dict, encoding: dict, est_meta: dict, arrays: dict[str, np.ndarray]) -> tuple:
    est_arrays = _estimator_arrays(meta["algorithm"], est_meta, arrays)
    try:
        estimator = model_from_dict({"meta": est_meta, "arrays": est_arrays})
        width = Encoder.from_dict(encoding).width
    except (ValueError, TypeError, KeyError, AttributeError, IngestError) as exc:
        raise BundleError(f"estimator.json/encoding.json: {exc}", "estimator.json") from None
    scaling = _scaling(arrays, width)
    sc_arrays = scaling.to_arrays() if scaling is not None else {}
    if not (width == meta["n_features"] == estimator.n_features_in_):
        raise BundleError(
            f"the encoding gives {width} features, model.json says "
            f"{meta['n_features']}, the estimator takes "
            f"{estimator.n_features_in_}",
            "model.json",
        )
    _check_predicts(estimator, meta)
    return est_arrays, sc_arrays, estimator, scaling


def read_bundle(data: bytes, max_bytes: int) -> Bundle:
    """The bundle checked and rebuilt; BundleError (BundleTooLargeError) naming what is wrong."""
    members = _members(data, max_bytes)
    meta = _load_json("model.json", members["model.json"])
    encoding = _load_json("encoding.json", members["encoding.json"])
    est_meta = _load_json("estimator.json", members["estimator.json"])
    _check_meta(meta)
    if not isinstance(encoding, dict) or not isinstance(est_meta, dict):
        raise BundleError("encoding.json and estimator.json must be objects", "encoding.json")
    arrays = {
        name[len(ARRAY_DIR) : -4]: _load_npy(name, blob)
        for name, blob in members.items()
        if name.startswith(ARRAY_DIR)
    }
    est_arrays, sc_arrays, estimator, scaling = _rebuild(meta, encoding, est_meta, arrays)
    return Bundle(meta, encoding, est_meta, est_arrays, sc_arrays, estimator, scaling)


# -- using a bundle without the service ---------------------------------------------------------
def served_model(bundle: Bundle) -> ServedModel:
    """The bundle's model as the service's own served model (app.serving.model): the same
    pipeline raw rows -> encoding -> imputation -> scaling (clipped) -> estimator, labelled by
    model.json's ``decision_rule`` (the exported reference's rule; checked: BundleError)."""
    meta = bundle.meta
    rule = meta.get("decision_rule")
    if rule is not None:
        try:
            rule = check_rule(rule, len(meta["classes"]))
        except (RuleError, TypeError, AttributeError) as exc:
            raise BundleError(f"model.json: decision_rule: {exc}", "model.json") from None
    source = meta.get("source")
    model_id = source.get("model_id") if isinstance(source, dict) else None
    return ServedModel(
        id=model_id if isinstance(model_id, int) else 0,  # (the exporting service's id)
        n_features=int(meta["n_features"]),
        encoding=bundle.encoding,
        estimator=bundle.estimator,
        scaling=bundle.scaling,
        rule=rule,
        algorithm=str(meta["algorithm"]),
        feature_names=tuple(meta["feature_names"]),
        extras={"model.json": meta},
    )


def load_bundle(source: str | Path | bytes, *, max_bytes: int = 1 << 31) -> ServedModel:
    """Load an exported bundle (a path or its bytes), checked as ``read_bundle`` does: a
    ``ServedModel`` whose ``predict`` / ``decision_function`` / ``predict_proba`` take raw rows,
    records or a DataFrame and answer as /predict does."""
    if not isinstance(source, bytes) and Path(source).stat().st_size > max_bytes:
        raise BundleTooLargeError(f"{source} is larger than {max_bytes} bytes")
    data = source if isinstance(source, bytes) else Path(source).read_bytes()
    return served_model(read_bundle(data, max_bytes))
