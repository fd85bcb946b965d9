"""OpenAPI documentation of the Open Inference Protocol's bodies (the routes read and write them
through app.protocols.tensors, since a body may carry binary tensor data after its JSON)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.predict.schemas import WDBC_BENIGN, WDBC_MALIGNANT
from app.protocols.tensors import MAX_DIMENSION, MAX_DIMENSIONS


class ServerMetadata(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"name": "msvmav", "version": "0.1.0", "extensions": ["binary_tensor_data"]}
            ]
        }
    )

    name: str = Field(examples=["msvmav"])
    version: str = Field(examples=["0.1.0"])
    extensions: list[str] = Field(examples=[["binary_tensor_data"]])


class Live(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"live": True}]})

    live: bool


class Ready(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"ready": True}]})

    ready: bool


class ModelReady(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"name": "1", "ready": True}]})

    name: str
    ready: bool


class TensorMetadata(BaseModel):
    name: str = Field(description="`input` (all columns), a column's name, `label`, `decision`")
    datatype: str = Field(description="FP64, INT64 or BYTES")
    shape: list[int] = Field(description="-1: any number of rows")


class ModelMetadata(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "1",
                    "versions": [],
                    "platform": "msvmav/msvmav",
                    "inputs": [{"name": "input", "datatype": "FP64", "shape": [-1, 30]}],
                    "outputs": [
                        {"name": "label", "datatype": "INT64", "shape": [-1]},
                        {"name": "decision", "datatype": "FP64", "shape": [-1]},
                    ],
                }
            ]
        }
    )

    name: str
    versions: list[str] = Field(
        description="Every version of the registered model, ascending (each one can be "
        "requested at `/v2/models/{name}/versions/{v}`); empty for a stored model's id"
    )
    platform: str = Field(description="`msvmav/<algorithm>`")
    inputs: list[TensorMetadata]
    outputs: list[TensorMetadata]


class OutputTensor(BaseModel):
    name: str
    datatype: str
    shape: list[int]
    data: list[Any] | None = Field(None, description="Row-major values (JSON outputs)")
    parameters: dict[str, Any] | None = Field(
        None, description="`binary_data_size`: the output's bytes after the JSON header"
    )


class InferResponse(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "model_name": "1",
                    "outputs": [
                        {"name": "label", "datatype": "INT64", "shape": [2], "data": [2, 1]},
                        {
                            "name": "decision",
                            "datatype": "FP64",
                            "shape": [2],
                            "data": [0.7088, -0.5912],
                        },
                    ],
                }
            ]
        }
    )

    model_name: str
    model_version: str | None = None
    id: str | None = None
    outputs: list[OutputTensor]


_TENSOR_IN = {
    "type": "object",
    "required": ["name", "datatype", "shape"],
    "description": "`data` holds as many values as the shape's product; or, with the binary "
    "tensor data extension, `parameters.binary_data_size` counts its bytes after the JSON "
    "header",
    "anyOf": [{"required": ["data"]},
              {"required": ["parameters"],
               "properties": {"parameters": {"required": ["binary_data_size"]}}}],
    "properties": {
        "name": {"type": "string", "minLength": 1, "description": "`input`, or a column's name"},
        "datatype": {"type": "string", "enum": ["FP32", "FP64", "INT32", "INT64", "BYTES"]},
        "shape": {"type": "array", "minItems": 1, "maxItems": MAX_DIMENSIONS,
                  "items": {"type": "integer", "minimum": 0, "maximum": MAX_DIMENSION}},
        "data": {
            "type": "array",
            "description": "Values, flat or nested row-major (absent with binary_data_size)",
        },
        "parameters": {
            "type": "object",
            "properties": {"binary_data_size": {"type": "integer", "minimum": 0}},
        },
    },
}

INFER_REQUEST_BODY: dict[str, Any] = {
    "required": True,
    "description": (
        "JSON, or (binary tensor data extension) a JSON header of "
        "`Inference-Header-Content-Length` bytes followed by each binary input's "
        "`binary_data_size` bytes, little-endian, in input order."
    ),
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["inputs"],
                "properties": {
                    "id": {"type": "string"},
                    "parameters": {
                        "type": "object",
                        "properties": {"binary_data_output": {"type": "boolean"}},
                    },
                    "inputs": {
                        "type": "array", "minItems": 1, "items": _TENSOR_IN,
                        "description": "Each input's name once (else 400: two inputs have the "
                        "same name); an input's `data` holds its shape's product of values "
                        "(else 400: `input 'x' has 3 values; its shape holds 4`); binary inputs "
                        "need their bytes (else 400: `binary_data_size is` ... or `goes beyond` "
                        "the bytes of binary data after the JSON header)",
                    },
                    "outputs": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["name"],
                            "properties": {
                                "name": {"type": "string", "enum": ["label", "decision"]},
                                "parameters": {
                                    "type": "object",
                                    "properties": {"binary_data": {"type": "boolean"}},
                                },
                            },
                        },
                    },
                },
            },
            "examples": {
                "matrix": {
                    "summary": "One FP64 tensor [n, d] (model 1 of the README: wdbc)",
                    "value": {
                        "inputs": [
                            {
                                "name": "input",
                                "datatype": "FP64",
                                "shape": [2, 30],
                                "data": [WDBC_MALIGNANT, WDBC_BENIGN],
                            }
                        ]
                    },
                }
            },
        }
    },
}
