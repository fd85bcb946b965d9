"""One ONNX graph from raw feature columns to ``label`` and ``decision`` (core operators only,
in double precision): one-hot encoding, min-max scaling with its clip to [0, 1], and the model's
linear or kernel expansion (``app.export.expansion``).

Imputed columns (app.ingest.imputation): a missing cell — NaN in a DOUBLE input, or a STRING
spelling a missing value ("", "?", "NA", "NaN", "nan") — is replaced by the column's fill before
the encoding. Inputs: when the model has a categorical column, one input per feature column in
training order, named as the column, shape [n, 1]: DOUBLE for numeric columns, STRING for
categorical ones (as skl2onnx does for a ColumnTransformer). Otherwise a single DOUBLE input
``X`` of shape [n, d].
Outputs: ``label`` [n] (the class values: STRING, INT64 or DOUBLE as the classes are) and
``decision`` ([n] for two classes, > 0 meaning classes[1]; [n, k] one-vs-rest scores) and, for
a calibrated model, ``probabilities`` ([n, k] in the order of the classes: the model's
calibrator (solver.calibration) on the decision values — Platt's sigmoid, or the isotonic
thresholds interpolated linearly and clipped at their ends as ``np.interp`` does — one-vs-rest
columns normalised to sum 1). The label is a calibrated model's first most probable class, as
the service's; an uncalibrated model's is classes[1] where the decision is > 0 (two classes),
else the first highest score. ``onnx`` is imported here only
(and this module only when an ONNX export is asked for), so the service runs without it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from app.export.expansion import Expansion, UnsupportedModelError
from app.ingest.text import MISSING_TOKENS
from solver import MinMaxScaling

# Equal on strings is in the default domain from opset 19.
OPSET = 19
IR_VERSION = 9
SINGLE_INPUT = "X"
RESERVED = ("label", "decision", "probabilities")
# A serialised ModelProto must stay under protobuf's 2 GiB; leave room for the rest.
MAX_GRAPH_BYTES = 1 << 30


class _Graph:
    """Nodes and constants being collected, with unique internal names."""

    def __init__(self) -> None:
        self.h, self.nh = helper, numpy_helper
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.count = 0

    def const(self, value: np.ndarray) -> str:
        name = f"msvmav/c{len(self.initializers)}"
        self.initializers.append(self.nh.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, *inputs: str, **attrs: Any) -> str:
        self.count += 1
        out = f"msvmav/{op_type.lower()}{self.count}"
        self.nodes.append(self.h.make_node(op_type, list(inputs), [out], **attrs))
        return out


def _class_constant(classes: np.ndarray) -> tuple[np.ndarray, int]:
    if classes.dtype.kind in "US":
        return np.asarray(classes.astype(str), dtype=object), TensorProto.STRING
    if classes.dtype.kind in "iub":
        return classes.astype(np.int64), TensorProto.INT64
    return classes.astype(np.float64), TensorProto.DOUBLE


def _fill(spec: dict) -> Any:
    """The column's fitted imputation fill, or None."""
    impute = spec.get("impute")
    return None if impute is None else impute.get("fill")


def _imputed(g: _Graph, name: str, spec: dict) -> str:
    """A [n, 1] input with its missing cells replaced by the column's fill: NaN for a numeric
    column; for a categorical one a string spelling a missing value (app.ingest.text)."""
    fill = _fill(spec)
    if fill is None:
        return name
    if spec["kind"] != "categorical":
        return g.op("Where", g.op("IsNaN", name), g.const(np.array(float(fill))), name)
    tokens = g.const(np.asarray(sorted(MISSING_TOKENS), dtype=object))
    hits = g.op("Cast", g.op("Equal", name, tokens), to=TensorProto.DOUBLE)  # [n, m]
    hit = g.op("Cast", g.op("ReduceMax", hits, g.const(np.array([1], dtype=np.int64)),
                            keepdims=1), to=TensorProto.BOOL)
    return g.op("Where", hit, g.const(np.asarray([str(fill)], dtype=object)), name)


def _single_input(g: _Graph, specs: list[dict]) -> str:
    """The one DOUBLE input X with each imputed column's NaN replaced by its fill."""
    fills = [_fill(s) for s in specs]
    if all(f is None for f in fills):
        return SINGLE_INPUT
    values = np.asarray([np.nan if f is None else float(f) for f in fills], dtype=np.float64)
    return g.op("Where", g.op("IsNaN", SINGLE_INPUT), g.const(values), SINGLE_INPUT)


def _features(g: _Graph, specs: list[dict]) -> tuple[str, list[Any]]:
    """The encoded feature matrix [n, D] and the graph inputs it reads (missing cells of
    imputed columns first replaced by their fills)."""
    h = g.h
    if not any(s["kind"] == "categorical" for s in specs):
        return _single_input(g, specs), [
            h.make_tensor_value_info(SINGLE_INPUT, TensorProto.DOUBLE, [None, len(specs)])
        ]
    clash = [s["name"] for s in specs if s["name"] in RESERVED or s["name"].startswith("msvmav/")]
    if clash:
        raise UnsupportedModelError(
            f"column {clash[0]!r} has the name of a graph output or node; "
            "the ONNX graph names its inputs after the columns"
        )
    inputs, blocks = [], []
    for spec in specs:
        if spec["kind"] == "categorical":
            inputs.append(h.make_tensor_value_info(spec["name"], TensorProto.STRING, [None, 1]))
            cats = g.const(np.asarray(spec["categories"], dtype=object))
            hot = g.op("Equal", _imputed(g, spec["name"], spec), cats)  # [n, 1] vs [k] -> [n, k]
            blocks.append(g.op("Cast", hot, to=TensorProto.DOUBLE))
        else:
            inputs.append(h.make_tensor_value_info(spec["name"], TensorProto.DOUBLE, [None, 1]))
            blocks.append(_imputed(g, spec["name"], spec))
    return g.op("Concat", *blocks, axis=1), inputs


def _scaled(g: _Graph, X: str, scaling: MinMaxScaling | None) -> str:
    """clip((X - data_min) * scale, 0, 1), the order of operations of MinMaxScaling."""
    if scaling is None:
        return X
    shifted = g.op("Sub", X, g.const(np.asarray(scaling.data_min, dtype=np.float64)))
    scaled = g.op("Mul", shifted, g.const(np.asarray(scaling.scale, dtype=np.float64)))
    low = g.op("Max", scaled, g.const(np.array(0.0)))
    return g.op("Min", low, g.const(np.array(1.0)))


class _GraphOps:
    """``solver.KernelOps`` as ONNX nodes over the scaled rows X [n, D] and the centres Z
    [m, D]: a kernel's ``formula`` written into the graph."""

    def __init__(self, g: _Graph, X: str, Z: np.ndarray) -> None:
        self.g, self.X, self.Z = g, X, Z
        self._cross: str | None = None

    def inner(self) -> str:  # [n, m]
        if self._cross is None:
            self._cross = self.g.op("MatMul", self.X, self.g.const(np.ascontiguousarray(self.Z.T)))
        return self._cross

    def squared_distance(self) -> str:
        """||x||^2 - 2 <x, z> + ||z||^2, clipped at 0 as scikit-learn does."""
        g, X, Z = self.g, self.X, self.Z
        axis = g.const(np.array([1], dtype=np.int64))
        sq = g.op("ReduceSum", g.op("Mul", X, X), axis, keepdims=1)
        d2 = g.op(
            "Add",
            g.op("Sub", sq, g.op("Mul", self.inner(), g.const(np.array(2.0)))),
            g.const(np.einsum("ij,ij->i", Z, Z)[None, :]),
        )
        return g.op("Max", d2, g.const(np.array(0.0)))

    def affine(self, a: str, scale: float, shift: float) -> str:
        out = a if scale == 1.0 else self.g.op("Mul", a, self.g.const(np.array(float(scale))))
        return out if shift == 0.0 else self.g.op("Add", out, self.g.const(np.array(float(shift))))

    def exp(self, a: str) -> str:
        return self.g.op("Exp", a)

    def power(self, a: str, exponent: float) -> str:
        return self.g.op("Pow", a, self.g.const(np.array(float(exponent))))


def _scores(g: _Graph, X: str, exp: Expansion) -> str:
    """[n, T] decision values of the scaled rows X."""
    if exp.kernel.primal:
        linear = g.op("MatMul", X, g.const(exp.weights))
        return g.op("Add", linear, g.const(exp.intercept))
    K = exp.kernel.formula(_GraphOps(g, X, exp.centres))
    return g.op("Add", g.op("MatMul", K, g.const(exp.weights)), g.const(exp.intercept))


def _ruled(g: _Graph, P: str, k: int, rule: dict[str, Any] | None) -> str:
    """[n] class indices of the probabilities P [n, k] under the decision rule
    (solver.decision.apply_rule): argmax (the first most probable, as most_probable); a
    threshold: class c where P_c >= t, else the first most probable other class; a cost
    matrix C: the first of argmin_j (P C)_j."""
    kind = "argmax" if rule is None else rule["kind"]
    if kind == "cost":
        expected = g.op("MatMul", P, g.const(np.asarray(rule["matrix"], dtype=np.float64)))
        return g.op("ArgMin", expected, axis=1, keepdims=0, select_last_index=0)
    if kind != "threshold":
        return g.op("ArgMax", P, axis=1, keepdims=0, select_last_index=0)
    c, t = int(rule["class_index"]), float(rule["threshold"])
    p_c = g.op("Gather", P, g.const(np.array(c, np.int64)), axis=1)
    above = g.op("GreaterOrEqual", p_c, g.const(np.array(t)))
    is_c = np.arange(k) == c  # [k]: column c left out of the others' argmax
    others = g.op("Where", g.const(is_c), g.const(np.array(-np.inf)), P)
    best_other = g.op("ArgMax", others, axis=1, keepdims=0, select_last_index=0)
    return g.op("Where", above, g.const(np.array(c, np.int64)), best_other)


def _outputs(g: _Graph, scores: str, exp: Expansion, calibrator: Any,
             rule: dict[str, Any] | None = None) -> list[Any]:
    """``decision`` and ``label`` (and a calibrated model's ``probabilities``) from the [n, T]
    scores. The label: calibrated, the model's decision rule on the probabilities (``_ruled``:
    argmax by default, as solver.calibration.most_probable); otherwise > 0 (two classes), else
    the first highest score."""
    classes, label_type = _class_constant(exp.classes)
    if exp.n_tasks == 1:
        decision = g.op("Squeeze", scores, g.const(np.array([1], dtype=np.int64)))
        positive = g.op("Greater", decision, g.const(np.array(0.0)))
        index = g.op("Cast", positive, to=TensorProto.INT64)
        shape: list[Any] = [None]
    else:
        decision = scores
        index = g.op("ArgMax", scores, axis=1, keepdims=0, select_last_index=0)
        shape = [None, exp.n_tasks]
    g.nodes.append(g.h.make_node("Identity", [decision], ["decision"]))
    outputs = [
        g.h.make_tensor_value_info("label", label_type, [None]),
        g.h.make_tensor_value_info("decision", TensorProto.DOUBLE, shape),
    ]
    if calibrator is not None:
        P = _probabilities(g, decision, calibrator, len(exp.classes))
        g.nodes.append(g.h.make_node("Identity", [P], ["probabilities"]))
        outputs.append(
            g.h.make_tensor_value_info("probabilities", TensorProto.DOUBLE, [None, len(classes)])
        )
        index = _ruled(g, P, len(exp.classes), rule)
    g.nodes.append(g.h.make_node("Gather", [g.const(classes), index], ["label"], axis=0))
    return outputs


def _column(g: _Graph, f: str, params: dict[str, Any], method: str) -> str:
    """[n] calibrated probability of one decision column f [n]."""
    if method == "sigmoid":  # 1 / (1 + exp(a f + b))
        z = g.op(
            "Add",
            g.op("Mul", f, g.const(np.array(float(params["a"])))),
            g.const(np.array(float(params["b"]))),
        )
        return g.op("Sigmoid", g.op("Neg", z))
    x = np.asarray(params["x"], dtype=np.float64)
    y = np.asarray(params["y"], dtype=np.float64)
    if x.size == 1:  # a constant map
        return g.op("Add", g.op("Mul", f, g.const(np.array(0.0))), g.const(y[:1].reshape(())))
    fc = g.op("Clip", f, g.const(np.array(x[0])), g.const(np.array(x[-1])))
    above = g.op(
        "GreaterOrEqual",
        g.op("Unsqueeze", fc, g.const(np.array([1], np.int64))),
        g.const(x[None, :]),
    )  # [n, m]
    count = g.op(
        "ReduceSum",
        g.op("Cast", above, to=TensorProto.INT64),
        g.const(np.array([1], np.int64)),
        keepdims=0,
    )
    lo = g.op(
        "Clip",
        g.op("Sub", count, g.const(np.array(1, np.int64))),
        g.const(np.array(0, np.int64)),
        g.const(np.array(x.size - 2, np.int64)),
    )
    hi = g.op("Add", lo, g.const(np.array(1, np.int64)))
    x_lo, x_hi = g.op("Gather", g.const(x), lo, axis=0), g.op("Gather", g.const(x), hi, axis=0)
    y_lo, y_hi = g.op("Gather", g.const(y), lo, axis=0), g.op("Gather", g.const(y), hi, axis=0)
    t = g.op("Div", g.op("Sub", fc, x_lo), g.op("Sub", x_hi, x_lo))
    return g.op("Add", y_lo, g.op("Mul", t, g.op("Sub", y_hi, y_lo)))


def _probabilities(g: _Graph, decision: str, calibrator: Any, k: int) -> str:
    """The probabilities [n, k] of the decision values, as Calibrator.predict_proba computes
    them."""
    one = g.const(np.array(1.0))
    axis = g.const(np.array([1], np.int64))
    if k == 2:
        p1 = g.op(
            "Clip",
            _column(g, decision, calibrator.params[0], calibrator.method),
            g.const(np.array(0.0)),
            one,
        )
        columns = [g.op("Sub", one, p1), p1]
        P = g.op("Concat", *[g.op("Unsqueeze", c, axis) for c in columns], axis=1)
    else:
        columns = []
        for j in range(k):
            f = g.op("Gather", decision, g.const(np.array(j, np.int64)), axis=1)
            columns.append(
                g.op("Unsqueeze", _column(g, f, calibrator.params[j], calibrator.method), axis)
            )
        raw = g.op("Concat", *columns, axis=1)
        total = g.op("ReduceSum", raw, axis, keepdims=1)
        positive = g.op("Greater", total, g.const(np.array(0.0)))
        safe = g.op("Where", positive, total, one)
        uniform = g.op("Add", g.op("Mul", raw, g.const(np.array(0.0))), g.const(np.array(1.0 / k)))
        P = g.op("Where", positive, g.op("Div", raw, safe), uniform)
        P = g.op("Clip", P, g.const(np.array(0.0)), one)
    return P


def build_onnx(
    specs: list[dict],
    scaling: MinMaxScaling | None,
    exp: Expansion,
    *,
    name: str,
    metadata: dict[str, str],
    calibrator: Any = None,
    rule: dict[str, Any] | None = None,
) -> bytes:
    """The serialised ModelProto (checked by ``onnx.checker``) of the whole prediction path.

    ``specs``: the stored encoding's feature columns; ``metadata``: stored as metadata_props;
    ``calibrator``: the model's (solver.calibration.Calibrator), adding ``probabilities``;
    ``rule``: the model's decision rule (solver.decision; None: argmax) making the label."""
    size = sum(a.nbytes for a in (exp.weights, exp.centres) if a is not None)
    if size > MAX_GRAPH_BYTES:
        raise UnsupportedModelError(
            f"the model's arrays take {size} bytes; one ONNX file holds at most "
            f"{MAX_GRAPH_BYTES} (protobuf's 2 GB limit): use format=bundle"
        )
    g = _Graph()
    X, inputs = _features(g, specs)
    outputs = _outputs(g, _scores(g, _scaled(g, X, scaling), exp), exp, calibrator,
                       rule if calibrator is not None else None)
    graph = helper.make_graph(g.nodes, name, inputs, outputs, g.initializers)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="msvmav",
        ir_version=IR_VERSION,
    )
    helper.set_model_props(model, metadata)
    onnx.checker.check_model(model)
    return model.SerializeToString()
