"""Tensors of the Open Inference Protocol (KServe V2) over REST, with the binary tensor data
extension: an inference request's JSON header and its binary tail read into numpy arrays, and
output tensors written back as JSON ``data`` or as binary data after the JSON header.

Binary data is little-endian, row-major; a BYTES element is a 4-byte little-endian length and
its bytes. A request with binary inputs says how long its JSON header is in the
``Inference-Header-Content-Length`` header, and each binary input its byte count in
``parameters.binary_data_size``, in input order. Every count is checked against the bytes
actually sent before anything is allocated for it.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from app.core.validation import json_containers
from app.protocols.errors import v2_error

HEADER_LENGTH = "Inference-Header-Content-Length"
# Datatypes an input may have, and their numpy types (little-endian).
NUMERIC = {
    "FP32": np.dtype("<f4"),
    "FP64": np.dtype("<f8"),
    "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"),
}
BYTES = "BYTES"
# A tensor's dimensions: how many, and how large each may be.
MAX_DIMENSIONS = 32
MAX_DIMENSION = 2**31 - 1
_LENGTH = struct.Struct("<I")


@dataclass(frozen=True)
class ContainerBound:
    """Most arrays and objects a request's JSON may hold, and why (for the 413)."""

    limit: int
    why: str


@dataclass
class Tensor:
    """An input tensor: ``values`` is a numeric array of ``shape``, or (BYTES) a list of str."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    values: Any


@dataclass
class InferRequest:
    id: str | None
    inputs: list[Tensor]
    # Requested outputs: name -> binary (None: as binary_default); None: every output.
    outputs: dict[str, bool | None] | None
    binary_default: bool = False
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass
class OutputTensor:
    name: str
    datatype: str
    shape: list[int]
    values: np.ndarray | list[Any]  # flat, row-major


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise v2_error(400, f"{where} must be a JSON object")
    return value


def _header(
    body: bytes, header_length: str | None, bound: ContainerBound | None = None
) -> tuple[dict[str, Any], memoryview]:
    """The JSON header and the binary tail of the body; 413 before the header is parsed when
    it holds more arrays and objects than ``bound`` allows."""
    view = memoryview(body)
    if header_length is None:
        end = len(body)
    else:
        digits = header_length.strip()
        # ASCII digits only: str.isdigit() also takes "²", which int() refuses
        if not (digits.isascii() and digits.isdigit()) or int(digits) > len(body):
            raise v2_error(
                400,
                f"{HEADER_LENGTH} must be an integer between 0 and the body's {len(body)} "
                f"bytes; got {header_length!r}",
            )
        end = int(digits)
    if bound is not None:
        text = body if end == len(body) else bytes(view[:end])
        count = json_containers(text, bound.limit)
        if count > bound.limit:
            raise v2_error(
                413,
                f"the inference request holds {count} JSON arrays and objects, more than "
                f"{bound.limit}: {bound.why}",
            )
    try:
        header = orjson.loads(view[:end])
    except orjson.JSONDecodeError as exc:
        raise v2_error(400, f"the inference request is not JSON: {exc}") from None
    return _object(header, "the inference request"), view[end:]


def _shape(raw: Any, where: str) -> tuple[int, ...]:
    """At most ``MAX_DIMENSIONS`` integers in [0, ``MAX_DIMENSION``] (numpy's own bounds are
    wider, and past them reshaping even an empty tensor fails)."""
    if isinstance(raw, list):  # 5.0 is the integer 5, as the document's ``integer`` has it
        raw = [int(d) if type(d) is float and d.is_integer() and 0 <= d <= MAX_DIMENSION
               else d for d in raw]
    if (
        not isinstance(raw, list)
        or not raw
        or len(raw) > MAX_DIMENSIONS
        or not all(type(d) is int and 0 <= d <= MAX_DIMENSION for d in raw)
    ):
        raise v2_error(
            400,
            f"{where}.shape must be a non-empty list of at most {MAX_DIMENSIONS} integers "
            f"between 0 and {MAX_DIMENSION}",
        )
    return tuple(raw)


def _flatten(data: Any, where: str) -> list[Any]:
    """JSON tensor data, flat or nested row-major, as one flat list."""
    if not isinstance(data, list):
        raise v2_error(400, f"{where}.data must be a list")
    if not any(isinstance(v, list) for v in data):
        return data
    flat: list[Any] = []
    stack = [iter(data)]
    while stack:
        for v in stack[-1]:
            if isinstance(v, list):
                stack.append(iter(v))
                break
            flat.append(v)
        else:
            stack.pop()
    return flat


def _json_values(datatype: str, data: Any, count: int, where: str) -> Any:
    flat = _flatten(data, where)
    if len(flat) != count:
        raise v2_error(400, f"{where} has {len(flat)} values; its shape holds {count}")
    if datatype == BYTES:
        if not all(isinstance(v, str) for v in flat):
            raise v2_error(400, f"{where}: BYTES data in JSON must be strings")
        return flat
    kinds = (int,) if datatype.startswith("INT") else (int, float)
    if not all(type(v) in kinds for v in flat):
        kind = "integers" if datatype.startswith("INT") else "numbers"
        raise v2_error(400, f"{where}: {datatype} data must be {kind}")
    try:
        return np.array(flat, dtype=NUMERIC[datatype])
    except OverflowError:
        raise v2_error(400, f"{where}: a value does not fit {datatype}") from None


def _binary_values(datatype: str, raw: memoryview, count: int, where: str) -> Any:
    if datatype != BYTES:
        dtype = NUMERIC[datatype]
        if len(raw) != count * dtype.itemsize:
            raise v2_error(
                400,
                f"{where}: binary_data_size is {len(raw)} bytes; {count} {datatype} values "
                f"take {count * dtype.itemsize}",
            )
        return np.frombuffer(raw, dtype=dtype)
    values: list[str] = []
    pos = 0
    while pos < len(raw):
        if pos + 4 > len(raw) or len(values) == count:
            break
        (n,) = _LENGTH.unpack_from(raw, pos)
        if pos + 4 + n > len(raw):
            break
        try:
            values.append(bytes(raw[pos + 4 : pos + 4 + n]).decode("utf-8"))
        except UnicodeDecodeError:
            raise v2_error(400, f"{where}: element {len(values)} is not UTF-8 text") from None
        pos += 4 + n
    if len(values) != count or pos != len(raw):
        raise v2_error(
            400,
            f"{where}: the binary BYTES data does not hold exactly {count} length-prefixed "
            "elements",
        )
    return values


def _input(raw: Any, i: int, tail: memoryview, offset: int) -> tuple[Tensor, int]:
    """Input ``i`` and the offset of the next binary input's data."""
    where = f"inputs[{i}]"
    spec = _object(raw, where)
    name, datatype = spec.get("name"), spec.get("datatype")
    if not isinstance(name, str) or not name:
        raise v2_error(400, f"{where}.name must be a non-empty string")
    where = f"input {name!r}"
    if datatype not in NUMERIC and datatype != BYTES:
        raise v2_error(
            400,
            f"{where}: datatype {datatype!r} is not supported; use FP32, FP64, INT32, "
            "INT64, or BYTES for categorical columns",
        )
    shape = _shape(spec.get("shape"), where)
    count = math.prod(shape)
    parameters = _object(spec.get("parameters") or {}, f"{where}.parameters")
    size = parameters.get("binary_data_size")
    if size is None:
        if "data" not in spec:
            raise v2_error(400, f"{where} has neither data nor parameters.binary_data_size")
        values = _json_values(datatype, spec["data"], count, where)
    else:
        if type(size) is not int or size < 0 or offset + size > len(tail):
            raise v2_error(
                400,
                f"{where}: binary_data_size {size!r} goes beyond the {len(tail)} bytes of "
                "binary data after the JSON header",
            )
        values = _binary_values(datatype, tail[offset : offset + size], count, where)
        offset += size
    if datatype != BYTES:
        values = values.reshape(shape)
    return Tensor(name, datatype, shape, values), offset


def _requested_outputs(header: dict[str, Any]) -> dict[str, bool | None] | None:
    raw = header.get("outputs")
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise v2_error(400, "outputs must be a list")
    out: dict[str, bool | None] = {}
    for i, item in enumerate(raw):
        spec = _object(item, f"outputs[{i}]")
        name = spec.get("name")
        if not isinstance(name, str):
            raise v2_error(400, f"outputs[{i}].name must be a string")
        binary = _object(spec.get("parameters") or {}, f"outputs[{i}].parameters").get(
            "binary_data"
        )
        out[name] = None if binary is None else binary is True
    return out


def parse_request(
    body: bytes, header_length: str | None, bound: ContainerBound | None = None
) -> InferRequest:
    """An inference request, JSON or JSON + binary tensor data; 400 naming what is wrong, 413
    when its JSON holds more arrays and objects than ``bound`` allows (checked before it is
    parsed)."""
    header, tail = _header(body, header_length, bound)
    inputs = header.get("inputs")
    if not isinstance(inputs, list) or not inputs:
        raise v2_error(400, "inputs must be a non-empty list of tensors")
    tensors, offset = [], 0
    for i, raw in enumerate(inputs):
        tensor, offset = _input(raw, i, tail, offset)
        tensors.append(tensor)
    if offset != len(tail):
        raise v2_error(
            400,
            f"{len(tail)} bytes follow the JSON header but the inputs' binary_data_size add "
            f"up to {offset}",
        )
    names = [t.name for t in tensors]
    if len(set(names)) != len(names):
        raise v2_error(400, "two inputs have the same name")
    parameters = _object(header.get("parameters") or {}, "parameters")
    request_id = header.get("id")
    return InferRequest(
        id=request_id if isinstance(request_id, str) else None,
        inputs=tensors,
        outputs=_requested_outputs(header),
        binary_default=parameters.get("binary_data_output") is True,
        parameters=parameters,
    )


def _binary(tensor: OutputTensor) -> bytes:
    if tensor.datatype == BYTES:
        parts = []
        for v in tensor.values:
            data = str(v).encode("utf-8")
            parts += [_LENGTH.pack(len(data)), data]
        return b"".join(parts)
    return np.ascontiguousarray(tensor.values, dtype=NUMERIC[tensor.datatype]).tobytes()


def _json_data(tensor: OutputTensor) -> list[Any]:
    if tensor.datatype == BYTES:
        return [str(v) for v in tensor.values]
    return np.asarray(tensor.values).tolist()


def encode_response(
    head: dict[str, Any], outputs: list[tuple[OutputTensor, bool]]
) -> tuple[bytes, int | None]:
    """The response body and, when some output is binary, the JSON header's length (the
    ``Inference-Header-Content-Length`` to send)."""
    described, tail = [], []
    for tensor, binary in outputs:
        out: dict[str, Any] = {
            "name": tensor.name,
            "datatype": tensor.datatype,
            "shape": tensor.shape,
        }
        if binary:
            data = _binary(tensor)
            out["parameters"] = {"binary_data_size": len(data)}
            tail.append(data)
        else:
            out["data"] = _json_data(tensor)
        described.append(out)
    header = orjson.dumps({**head, "outputs": described})
    if not tail:
        return header, None
    return header + b"".join(tail), len(header)
