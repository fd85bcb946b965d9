"""``Client``: the service's HTTP API from Python, on httpx."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, cast
from urllib.parse import quote

import httpx

from msvmav_client.errors import JobFailed, NotFound, raise_for_problem
from msvmav_client.types import (
    AlertRule,
    Alias,
    Dataset,
    DatasetProfile,
    Delivery,
    Evaluation,
    Experiment,
    FeedbackResult,
    JobInfo,
    KeyCreated,
    KeyInfo,
    Leaderboard,
    Margins,
    ModelInfo,
    MonitoringReport,
    Page,
    Policy,
    PredictResult,
    RegisteredModel,
    ShadowReport,
    ThresholdResult,
    VersionCreated,
    Webhook,
    WebhookCreated,
)

#: A model: a stored model's id, or a registry reference (``credit@production``,
#: ``credit/3``, ``credit``).
ModelRef = int | str
#: A file: a path, its bytes, or an open binary file.
FileLike = str | Path | bytes | IO[bytes]
FINISHED = ("succeeded", "failed", "cancelled")


def _file(data: FileLike, name: str | None) -> tuple[str, bytes]:
    """(filename, content) of a path, bytes or an open file."""
    if isinstance(data, str | Path):
        path = Path(data)
        return name or path.name, path.read_bytes()
    if isinstance(data, bytes):
        return name or "data.csv", data
    return name or Path(getattr(data, "name", "data.csv")).name, data.read()


def _is_frame(value: Any) -> bool:
    return type(value).__name__ == "DataFrame" and hasattr(value, "to_dict")


def _model_field(model: ModelRef) -> dict[str, Any]:
    if isinstance(model, bool) or not isinstance(model, int | str):
        raise TypeError("model must be a stored model's id (int) or a reference (str)")
    return {"model_id": model} if isinstance(model, int) else {"model": model}


class Job:
    """A background job of the service (``POST /train`` answered 202 with it)."""

    def __init__(self, client: Client, info: JobInfo) -> None:
        self.client = client
        self.id: int = info["id"]
        self.info = info

    def __repr__(self) -> str:
        return f"Job(id={self.id}, status={self.info.get('status')!r})"

    def refresh(self) -> JobInfo:
        self.info = self.client.job(self.id)
        return self.info

    @property
    def model_id(self) -> int | None:
        return self.info.get("model_id")

    def cancel(self) -> JobInfo:
        self.info = cast(JobInfo, self.client._json("POST", f"/jobs/{self.id}/cancel"))
        return self.info

    def wait(
        self,
        progress: Callable[[JobInfo], None] | None = None,
        timeout: float | None = None,
        poll: float = 0.5,
    ) -> JobInfo:
        """Poll until the job ends; ``progress`` sees each answer (``status``, ``progress``
        0-1, ``message``). Raises JobFailed if it failed or was cancelled, TimeoutError after
        ``timeout`` seconds."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            info = self.refresh()
            if progress is not None:
                progress(info)
            if info.get("status") in FINISHED:
                if info["status"] != "succeeded":
                    raise JobFailed(dict(info))
                return info
            if end is not None and time.monotonic() >= end:
                raise TimeoutError(f"job {self.id} still {info.get('status')} after {timeout} s")
            time.sleep(poll)


class Client:
    """The msvmav service at ``base_url`` (``http://127.0.0.1:8000``); ``api_key`` is sent as
    ``Authorization: Bearer <key>``. Error answers raise ``msvmav_client.ProblemError``
    subclasses (``NotFound``, ``ValidationFailed``, ...)."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        api_key: str | None = None,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=transport
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing ------------------------------------------------------------------------------

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = self.http.request(method, path, **kwargs)
        raise_for_problem(response)
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._request(method, path, **kwargs)
        return response.json() if response.content else None

    # --- datasets ------------------------------------------------------------------------------

    def upload(self, data: FileLike | Any, name: str | None = None, **options: Any) -> Dataset:
        """Upload a dataset: a path, bytes, an open file or a pandas DataFrame (sent as CSV);
        ``options`` are the upload's form fields (``label``, ``drop``, ``missing``, ...)."""
        if _is_frame(data):
            filename, content = name or "frame.csv", data.to_csv(index=False).encode()
        else:
            filename, content = _file(data, name)
        form = {k: v for k, v in options.items() if v is not None}
        files = {"file": (filename, content)}
        return cast(Dataset, self._json("POST", "/datasets", files=files, data=form))

    def datasets(self, limit: int = 50, cursor: str | None = None) -> Page:
        return cast(Page, self._json("GET", "/datasets", params=_page(limit, cursor)))

    def dataset(self, dataset_id: int) -> Dataset:
        return cast(Dataset, self._json("GET", f"/datasets/{dataset_id}"))

    def delete_dataset(self, dataset_id: int) -> None:
        self._request("DELETE", f"/datasets/{dataset_id}")

    def register_reference(
        self,
        uri: str,
        name: str | None = None,
        label: str | None = None,
        drop: Sequence[str] = (),
    ) -> Dataset:
        """A dataset by reference (``POST /datasets/references``): Parquet files under one of
        the service's ``MSVMAV_DATA_ROOTS``, read where they lie (a directory, file or glob)."""
        body = {"uri": uri, "name": name, "label": label, "drop": list(drop)}
        body = {k: v for k, v in body.items() if v is not None}
        return cast(Dataset, self._json("POST", "/datasets/references", json=body))

    def profile(self, dataset_id: int) -> DatasetProfile:
        """Per-column statistics, the label's classes and a preview of the first rows."""
        return cast(DatasetProfile, self._json("GET", f"/datasets/{dataset_id}/profile"))

    # --- training and jobs ---------------------------------------------------------------------

    def train(self, dataset_id: int, algorithm: str = "msvmav", *,
              search: str | dict[str, Any] | None = None, budget_seconds: float | None = None,
              **fields: Any) -> Job:
        """Queue a training job (``POST /train``): ``fields`` are its body's other members
        (``kernel``, ``alpha``, ``params``, ``test_fraction``, ``class_weight`` — "balanced"
        or {class: weight} —, ``weight_column`` — a numeric column of the dataset whose values
        weigh the rows, not a feature of the model —, ``register_as``, ...).
        ``search``: ``"auto"``, ``"quick"``, ``"paper"``, ``"none"`` or a search object (not
        given: the server's default, ``"auto"`` when no hyper-parameter is set);
        ``budget_seconds``: the auto search's time budget (implies ``search="auto"`` when
        ``search`` is not given). Returns the Job; ``job.wait()`` follows it."""
        if budget_seconds is not None:
            spec = {"grid": search} if isinstance(search, str) else dict(search or {})
            spec.setdefault("grid", "auto")
            search = {**spec, "budget_seconds": budget_seconds}
        if search is not None:
            fields["search"] = search
        body = {"dataset_id": dataset_id, "algorithm": algorithm, **fields}
        return Job(self, cast(JobInfo, self._json("POST", "/train", json=body)))

    def job(self, job_id: int) -> JobInfo:
        return cast(JobInfo, self._json("GET", f"/jobs/{job_id}"))

    def jobs(self, limit: int = 50, cursor: str | None = None, **filters: Any) -> Page:
        params = {**_page(limit, cursor), **filters}
        return cast(Page, self._json("GET", "/jobs", params=params))

    # --- models --------------------------------------------------------------------------------

    def models(self, limit: int = 50, cursor: str | None = None) -> Page:
        return cast(Page, self._json("GET", "/models", params=_page(limit, cursor)))

    def model(self, model_id: int) -> ModelInfo:
        return cast(ModelInfo, self._json("GET", f"/models/{model_id}"))

    def delete_model(self, model_id: int) -> None:
        self._request("DELETE", f"/models/{model_id}")

    def margins(
        self, model_id: int, split: str = "train", dataset_id: int | None = None
    ) -> Margins:
        """Margin statistics: of the training or hold-out part, or of a stored dataset."""
        params: dict[str, Any] = {"split": split}
        if dataset_id is not None:
            params["dataset_id"] = dataset_id
        return cast(Margins, self._json("GET", f"/models/{model_id}/margins", params=params))

    def margins_figure(
        self,
        model_id: int,
        format: str = "png",
        split: str = "train",
        dataset_id: int | None = None,
    ) -> bytes:
        """The margins' cumulative distribution drawn (``format`` png or svg)."""
        params: dict[str, Any] = {"split": split}
        if dataset_id is not None:
            params["dataset_id"] = dataset_id
        path = f"/models/{model_id}/margins.{_figure(format)}"
        return self._request("GET", path, params=params).content

    def export(
        self, model: int | str, format: str = "bundle", path: str | Path | None = None
    ) -> bytes:
        """The model as a bundle (zip) or ONNX graph; also written to ``path`` if given.
        ``model``: its id or a registry reference (``"credit@production"``): the file labels
        by that reference's decision rule (the alias's, else the model's)."""
        content = self._request(
            "GET", f"/models/{model}/export", params={"format": format}
        ).content
        if path is not None:
            Path(path).write_bytes(content)
        return content

    def import_bundle(self, bundle: FileLike) -> ModelInfo:
        """Store a model from a bundle (``export(format="bundle")``); the new model's detail."""
        filename, content = _file(bundle, None)
        files = {"file": (filename if filename.endswith(".zip") else "model.zip", content)}
        return cast(ModelInfo, self._json("POST", "/models/import", files=files))

    # --- registry ------------------------------------------------------------------------------

    def register(self, name: str, model_id: int) -> VersionCreated:
        """Register the stored model as the next version of ``name`` (created if new)."""
        path = f"/registered-models/{quote(name, safe='')}"
        try:
            return cast(VersionCreated, self._json("POST", path + "/versions",
                                                   json={"model_id": model_id}))
        except NotFound:
            if self._exists(path):
                raise
        self._json("POST", "/registered-models", json={"name": name})
        return cast(VersionCreated, self._json("POST", path + "/versions",
                                               json={"model_id": model_id}))

    def create_registered_model(
        self, name: str, description: str | None = None, tags: dict[str, str] | None = None
    ) -> RegisteredModel:
        body = {"name": name, "description": description, "tags": tags}
        body = {k: v for k, v in body.items() if v is not None}
        return cast(RegisteredModel, self._json("POST", "/registered-models", json=body))

    def update_registered_model(
        self, name: str, description: str | None = None, tags: dict[str, str] | None = None
    ) -> RegisteredModel:
        """Replace the description and/or all the tags (``None``: left as they are)."""
        body = {k: v for k, v in {"description": description, "tags": tags}.items()
                if v is not None}
        path = f"/registered-models/{quote(name, safe='')}"
        return cast(RegisteredModel, self._json("PATCH", path, json=body))

    def delete_registered_model(self, name: str) -> None:
        self._request("DELETE", f"/registered-models/{quote(name, safe='')}")

    def delete_version(self, name: str, version: int) -> None:
        self._request("DELETE", f"/registered-models/{quote(name, safe='')}/versions/{version}")

    def _exists(self, path: str) -> bool:
        return self.http.get(path).status_code != 404

    def registered_models(self, limit: int = 50, cursor: str | None = None) -> Page:
        return cast(Page, self._json("GET", "/registered-models", params=_page(limit, cursor)))

    def registered_model(self, name: str) -> RegisteredModel:
        return cast(
            RegisteredModel, self._json("GET", f"/registered-models/{quote(name, safe='')}")
        )

    def set_alias(
        self, name: str, alias: str, version: int, *, canary: tuple[int, float] | None = None
    ) -> Alias:
        """Point ``alias`` at ``version``; ``canary=(version, percent)``: another version
        answers ``percent`` of its requests (PUT replaces the alias: without ``canary``, a
        canary it had ends)."""
        path = f"/registered-models/{quote(name, safe='')}/aliases/{quote(alias, safe='')}"
        body: dict[str, Any] = {"version": version}
        if canary is not None:
            body["canary"] = {"version": canary[0], "percent": canary[1]}
        return cast(Alias, self._json("PUT", path, json=body))

    def set_canary(
        self, name: str, alias: str, version: int | None, percent: float | None = None
    ) -> Alias:
        """Start or change the alias's canary (``version`` answers ``percent`` of its requests,
        sticky by ``route_key``), keeping the alias's version; ``version=None`` ends it."""
        path = f"/registered-models/{quote(name, safe='')}/aliases/{quote(alias, safe='')}"
        canary = None if version is None else {"version": version, "percent": percent}
        return cast(Alias, self._json("PATCH", path, json={"canary": canary}))

    def delete_alias(self, name: str, alias: str) -> None:
        path = f"/registered-models/{quote(name, safe='')}/aliases/{quote(alias, safe='')}"
        self._request("DELETE", path)

    def rollback(self, name: str, alias: str) -> Alias:
        """Undo the alias's newest move not undone yet: successive calls walk back its history."""
        path = f"/registered-models/{quote(name, safe='')}/aliases/{quote(alias, safe='')}"
        return cast(Alias, self._json("POST", path + "/rollback"))

    def history(self, name: str, limit: int = 50, cursor: str | None = None) -> Page:
        path = f"/registered-models/{quote(name, safe='')}/history"
        return cast(Page, self._json("GET", path, params=_page(limit, cursor)))

    # --- predictions ---------------------------------------------------------------------------

    def predict(
        self,
        model: ModelRef,
        rows: Sequence[Any] | Any,
        labels: Sequence[Any] | None = None,
        *,
        explain: bool = False,
        ids: Sequence[Any] | None = None,
        rule: str | None = None,
        threshold: float | None = None,
        route_key: str | None = None,
    ) -> PredictResult:
        """Labels, decision values and (calibrated models) probabilities of raw rows: lists in
        training column order, records (dicts by column name) or a pandas DataFrame (its
        columns by name). With true ``labels``, accuracy and the batch's margin statistics
        too; with ``explain``, each row's contributions per raw column; ``ids``: each row's id
        in the prediction log (for ``feedback``; default ``"{request id}:{row}"``).
        ``rule="argmax"`` or ``threshold`` (on P(classes[1])): this request's decision rule
        instead of the reference's (``decision_rule`` in the answer says which labelled).
        ``route_key``: an alias with a canary answers every request with the same key by the
        same version (the ``X-Msvmav-Route-Key`` header; the answer's ``version`` and ``arm``
        say which answered)."""
        body: dict[str, Any] = {**_model_field(model), "instances": _instances(rows)}
        if rule is not None:
            body["rule"] = rule
        if threshold is not None:
            body["threshold"] = threshold
        if labels is not None:
            body["labels"] = list(labels)
        if ids is not None:
            body["ids"] = list(ids)
        if explain:
            body["explain"] = True
        headers = {} if route_key is None else {"X-Msvmav-Route-Key": route_key}
        return cast(PredictResult, self._json("POST", "/predict", json=body, headers=headers))

    def predict_proba(self, model: ModelRef, rows: Sequence[Any] | Any) -> list[list[float]]:
        """Each row's class probabilities in the order of the answer's ``classes`` (as
        scikit-learn's ``predict_proba``); ValueError for a model without calibration."""
        answer = self.predict(model, rows)
        keys = [str(c) for c in answer["classes"]]
        out = []
        for p in answer["predictions"]:
            probabilities = p.get("probabilities")
            if probabilities is None:
                raise ValueError(f"model {answer['model_id']} has no probabilities "
                                 "(trained with calibration none)")
            out.append([probabilities[k] for k in keys])
        return out

    def evaluate(
        self,
        model: ModelRef,
        *,
        dataset_id: int | None = None,
        data: FileLike | None = None,
        label: str | None = None,
        figure: str | None = None,
        rows: str | None = None,
    ) -> Evaluation | bytes:
        """``POST /models/{model}/evaluate`` on a stored dataset or a file with labels: the
        metrics and curves; ``figure="png"`` or ``"svg"``: the curves drawn (bytes). On the
        model's own dataset only its hold-out rows are scored unless ``rows="all"``."""
        form = {k: str(v) for k, v in {"dataset_id": dataset_id, "label": label,
                                       "rows": rows}.items() if v is not None}
        files = None
        if data is not None:
            filename, content = _file(data, None)
            files = {"file": (filename, content)}
        path = f"/models/{model}/evaluate" + (f".{figure}" if figure else "")
        if figure:
            return self._request("POST", path, data=form, files=files).content
        return cast(Evaluation, self._json("POST", path, data=form, files=files))

    def leaderboard(
        self,
        models: Sequence[ModelRef] | None = None,
        *,
        dataset_id: int | None = None,
        metric: str = "roc_auc",
        cost_fp: float | None = None,
        cost_fn: float | None = None,
        cost_matrix: Sequence[Sequence[float]] | None = None,
        limit: int | None = None,
    ) -> Leaderboard:
        """Models side by side on the hold-out rows they share, the best by ``metric`` marked:
        ``models`` (ids or references; ``POST /models/leaderboard``) or a dataset's newest
        ``limit`` models (``GET /datasets/{dataset_id}/leaderboard``; with ``cost_matrix``
        the POST). ``cost_fp``/``cost_fn`` (binary) or ``cost_matrix`` (row: true class,
        column: served label) give ``expected_cost``."""
        params = {"metric": metric, "cost_fp": cost_fp, "cost_fn": cost_fn, "limit": limit}
        params = {k: v for k, v in params.items() if v is not None}
        if models is None and dataset_id is not None and cost_matrix is None:
            return cast(Leaderboard, self._json("GET", f"/datasets/{dataset_id}/leaderboard",
                                                params=params))
        body: dict[str, Any] = {**params, "dataset_id": dataset_id}
        if models is not None:
            body["models"] = [str(m) for m in models]
        if cost_matrix is not None:
            body["cost_matrix"] = [list(row) for row in cost_matrix]
        body = {k: v for k, v in body.items() if v is not None}
        return cast(Leaderboard, self._json("POST", "/models/leaderboard", json=body))

    def predict_file(
        self, model: ModelRef, data: FileLike, label: str | None = None, *,
        rule: str | None = None, threshold: float | None = None,
    ) -> PredictResult:
        """Predict every row of a file (any upload format; a label column adds accuracy);
        ``rule``/``threshold`` as ``predict``'s."""
        filename, content = _file(data, None)
        fields = {**_model_field(model), "label": label, "rule": rule, "threshold": threshold}
        form = {k: str(v) for k, v in fields.items() if v is not None and v != ""}
        return cast(
            PredictResult,
            self._json("POST", "/predict/file", files={"file": (filename, content)}, data=form),
        )

    def explain(
        self, model: ModelRef, rows: Sequence[Any] | Any, ids: Sequence[Any] | None = None
    ) -> PredictResult:
        """``POST /models/{model}/explain``: each row's prediction with its contributions per
        raw column (they add up to the decision value minus the baseline's)."""
        body: dict[str, Any] = {"instances": _instances(rows)}
        if ids is not None:
            body["ids"] = list(ids)
        path = f"/models/{model}/explain"
        return cast(PredictResult, self._json("POST", path, json=body))

    def set_threshold(
        self,
        model: ModelRef,
        *,
        cost_fp: float | None = None,
        cost_fn: float | None = None,
        cost_matrix: Sequence[Sequence[float]] | None = None,
        target: str | None = None,
        value: float | None = None,
        positive: Any = None,
        store: bool = True,
        figure: str | None = None,
    ) -> ThresholdResult | bytes:
        """``POST /models/{model}/threshold``: fit a decision rule on the model's out-of-fold
        probabilities to binary costs (``cost_fp``, ``cost_fn``), a ``cost_matrix``, or a
        ``target`` precision / recall / fpr ``value`` for the ``positive`` class, and (with
        ``store``) set it on the alias the reference names, else on the model: the answers
        for that reference are then labelled by it. ``figure="svg"`` or ``"png"``: the cost
        curve drawn (bytes; nothing stored)."""
        objective = {k: v for k, v in {
            "cost_fp": cost_fp, "cost_fn": cost_fn,
            "cost_matrix": None if cost_matrix is None else [list(r) for r in cost_matrix],
            "target": target, "value": value, "positive": positive}.items() if v is not None}
        path = f"/models/{model}/threshold" + (f".{figure}" if figure else "")
        body = {"objective": objective, "store": store}
        if figure:
            return self._request("POST", path, json=body).content
        return cast(ThresholdResult, self._json("POST", path, json=body))

    # --- batch predictions ---------------------------------------------------------------------

    def batch_predict(
        self,
        model: ModelRef,
        data: FileLike | None = None,
        *,
        dataset_id: int | None = None,
        passthrough: Sequence[str] = (),
        **options: Any,
    ) -> Job:
        """Queue a batch scoring job (``POST /batch-predictions``) of a file or a stored
        dataset; ``options`` are its other form fields (``format``, ``id_column``, ``output``,
        ``on_error``, ``chunk_rows``, ...). ``job.wait()`` follows it; ``batch_result`` and
        ``batch_errors`` download what it wrote."""
        fields = {**_model_field(model), "dataset_id": dataset_id, **options}
        form: dict[str, Any] = {k: _form_value(v) for k, v in fields.items() if v is not None}
        if passthrough:
            form["passthrough"] = list(passthrough)  # the field repeated
        files = None
        if data is not None:
            filename, content = _file(data, None)
            files = {"file": (filename, content)}
        info = self._json("POST", "/batch-predictions", data=form, files=files)
        return Job(self, cast(JobInfo, info))

    def batch_result(
        self, batch_id: int, format: str | None = None, path: str | Path | None = None
    ) -> bytes | None:
        """The scored rows (CSV, Parquet or JSON Lines: ``format``, default the job's
        ``output``). With ``path`` the download is streamed to that file (and None returned):
        a result that did not arrive whole raises, leaving no file."""
        params = {"format": format} if format else {}
        url = f"/batch-predictions/{batch_id}/result"
        if path is None:
            return self._request("GET", url, params=params).content
        target = Path(path)
        partial = target.with_name(target.name + ".partial")
        try:
            with self.http.stream("GET", url, params=params) as response:
                if response.is_error:
                    response.read()
                    raise_for_problem(response)
                with partial.open("wb") as out:
                    for piece in response.iter_bytes():
                        out.write(piece)
            partial.replace(target)
        finally:
            partial.unlink(missing_ok=True)
        return None

    def batch_errors(self, batch_id: int) -> str:
        """Every row the job left out (``on_error="skip"``), as CSV: row, line, column, reason."""
        return self._request("GET", f"/batch-predictions/{batch_id}/errors").text

    # --- monitoring ----------------------------------------------------------------------------

    def feedback(
        self, model: ModelRef, ids: Sequence[Any], labels: Sequence[Any]
    ) -> FeedbackResult:
        """The true labels of earlier predictions, by their ids (``POST /feedback``)."""
        body = {**_model_field(model), "ids": list(ids), "labels": list(labels)}
        return cast(FeedbackResult, self._json("POST", "/feedback", json=body))

    def monitoring(
        self,
        model: ModelRef,
        since: str | None = None,
        until: str | None = None,
        *,
        figure: str | None = None,
    ) -> MonitoringReport | bytes:
        """The monitoring report of a stored model (int) or a registered model (``name``,
        ``name@alias``, ``name/version``): logged decision values against training, drift,
        the rows with feedback; ``figure="png"``: the same drawn (bytes)."""
        params: dict[str, Any] = {k: v for k, v in {"since": since, "until": until}.items()
                                  if v is not None}
        path = _monitoring_path(model, params) + (f".{figure}" if figure else "")
        if figure:
            return self._request("GET", path, params=params).content
        return cast(MonitoringReport, self._json("GET", path, params=params))

    def start_shadow(self, name: str, alias: str) -> ShadowReport:
        """Score the traffic of ``name``'s served version with its ``alias`` version too."""
        path = f"/registered-models/{quote(name, safe='')}/shadow"
        return cast(ShadowReport, self._json("PUT", path, json={"alias": alias}))

    def shadow(self, name: str) -> ShadowReport:
        """The shadow's comparison so far: agreement, both sides' decision values, accuracy."""
        path = f"/registered-models/{quote(name, safe='')}/shadow"
        return cast(ShadowReport, self._json("GET", path))

    def stop_shadow(self, name: str) -> None:
        self._request("DELETE", f"/registered-models/{quote(name, safe='')}/shadow")

    # --- closing the loop: retraining and its policies -----------------------------------------

    def retrain(self, name: str, **options: Any) -> Job:
        """Queue a ``retrain`` job of ``name`` (``POST /registered-models/{name}/retrain``):
        the parent's dataset plus the fed-back rows, warm-started; ``options``: alias or
        version (the parent), window_seconds, include_dataset, search, warm_start,
        compare_cold, split ("fresh" or "parent"). The new version's ``lineage`` says what
        was added and saved."""
        path = f"/registered-models/{quote(name, safe='')}/retrain"
        return Job(self, cast(JobInfo, self._json("POST", path, json=options)))

    def set_policy(self, name: str, **config: Any) -> Policy:
        """Set ``name``'s retraining policy: ``trigger`` (alert_rule_ids, schedule_seconds,
        min_new_labels), ``retrain``, ``judge`` (min_rows, margin, canary_percent: the
        challenger canaries in production and is judged on its arm's rows), ``action``
        (``register`` or ``promote``), ``rollback``, ``enabled`` (docs/loop.md)."""
        path = f"/registered-models/{quote(name, safe='')}/policy"
        return cast(Policy, self._json("PUT", path, json=config))

    def policy(self, name: str) -> Policy:
        """The policy, where its cycle stands and the challenger's record beside production
        (``record``: its ``source``, canary arm or shadow; each side's realised and estimated
        accuracy and cost under production's decision rule)."""
        return cast(Policy, self._json("GET", f"/registered-models/{quote(name, safe='')}/policy"))

    def delete_policy(self, name: str) -> None:
        self._request("DELETE", f"/registered-models/{quote(name, safe='')}/policy")

    # --- alerts and webhooks -------------------------------------------------------------------

    def create_alert_rule(self, model: ModelRef, metric: str, comparison: str, level: float,
                          **fields: Any) -> AlertRule:
        """A rule on ``model`` (a stored model's id, or a reference resolved at each window):
        it fires when ``metric`` ``comparison`` (lt, le, gt, ge) ``level`` on a window;
        ``fields``: window_seconds, cooldown_seconds, min_rows, name, enabled."""
        body = {**_model_field(model), "metric": metric, "comparison": comparison,
                "level": level, **fields}
        return cast(AlertRule, self._json("POST", "/alert-rules", json=body))

    def alert_rules(self) -> list[AlertRule]:
        return cast(list[AlertRule], self._json("GET", "/alert-rules"))

    def alert_rule(self, rule_id: int) -> AlertRule:
        return cast(AlertRule, self._json("GET", f"/alert-rules/{rule_id}"))

    def update_alert_rule(self, rule_id: int, **changes: Any) -> AlertRule:
        """Change the fields given (level, comparison, window_seconds, enabled, ...)."""
        return cast(AlertRule, self._json("PATCH", f"/alert-rules/{rule_id}", json=changes))

    def delete_alert_rule(self, rule_id: int) -> None:
        self._request("DELETE", f"/alert-rules/{rule_id}")

    def create_webhook(self, url: str, events: Sequence[str],
                       description: str = "") -> WebhookCreated:
        """A receiver of ``events`` (alert, alias_moved, version_registered); the answer's
        ``secret`` signs every delivery and is shown only here."""
        body = {"url": url, "events": list(events), "description": description}
        return cast(WebhookCreated, self._json("POST", "/webhooks", json=body))

    def webhooks(self) -> list[Webhook]:
        return cast(list[Webhook], self._json("GET", "/webhooks"))

    def webhook(self, webhook_id: int) -> Webhook:
        return cast(Webhook, self._json("GET", f"/webhooks/{webhook_id}"))

    def delete_webhook(self, webhook_id: int) -> None:
        self._request("DELETE", f"/webhooks/{webhook_id}")

    def webhook_deliveries(self, webhook_id: int | None = None, rule_id: int | None = None,
                           limit: int = 100) -> list[Delivery]:
        """The newest deliveries (of a hook, of a rule), each attempt's HTTP status."""
        params = {k: v for k, v in {"webhook_id": webhook_id, "rule_id": rule_id,
                                    "limit": limit}.items() if v is not None}
        return cast(list[Delivery], self._json("GET", "/webhook-deliveries", params=params))

    # --- experiments ---------------------------------------------------------------------------

    def start_experiment(self, dataset_ids: Sequence[int], **fields: Any) -> Job:
        """Queue the paper's protocol (``POST /experiments``): ``fields`` are ``algorithms``,
        ``kernel``, ``splits``, ``test_size``, ``grid``, ``cv``, ``seed``, ``scaling``,
        ``params``. Returns the Job (its id is the experiment's)."""
        body = {"dataset_ids": list(dataset_ids), **fields}
        info = cast(dict, self._json("POST", "/experiments", json=body))
        return Job(self, cast(JobInfo, info))

    def experiments(self, limit: int = 50, cursor: str | None = None) -> Page:
        return cast(Page, self._json("GET", "/experiments", params=_page(limit, cursor)))

    def experiment(self, experiment_id: int) -> Experiment:
        return cast(Experiment, self._json("GET", f"/experiments/{experiment_id}"))

    def experiment_table(self, experiment_id: int, format: str = "md") -> str:
        """Table 1 of a finished experiment, as Markdown (``md``) or CSV (``csv``)."""
        if format not in ("md", "csv"):
            raise ValueError("format must be 'md' or 'csv'")
        return self._request("GET", f"/experiments/{experiment_id}/table.{format}").text

    def experiment_margins(
        self, experiment_id: int, format: str = "png", dataset_id: int | None = None
    ) -> bytes:
        """Figure 1 of a finished experiment (``format`` png or svg)."""
        params = {"dataset_id": dataset_id} if dataset_id is not None else {}
        path = f"/experiments/{experiment_id}/margins.{_figure(format)}"
        return self._request("GET", path, params=params).content

    # --- keys (an admin key) -------------------------------------------------------------------

    def create_key(self, name: str, scope: str, expires_at: str | None = None) -> KeyCreated:
        """A new API key of ``scope`` (read, write, admin); its secret (``key``) is shown only
        in this answer."""
        body = {"name": name, "scope": scope, "expires_at": expires_at}
        body = {k: v for k, v in body.items() if v is not None}
        return cast(KeyCreated, self._json("POST", "/keys", json=body))

    def keys(self, limit: int = 50, cursor: str | None = None) -> Page:
        return cast(Page, self._json("GET", "/keys", params=_page(limit, cursor)))

    def key(self, key_id: int) -> KeyInfo:
        return cast(KeyInfo, self._json("GET", f"/keys/{key_id}"))

    def revoke_key(self, key_id: int) -> None:
        self._request("DELETE", f"/keys/{key_id}")

    # --- operations ----------------------------------------------------------------------------

    def live(self) -> dict[str, Any]:
        """``GET /livez``: the process is up."""
        return cast(dict, self._json("GET", "/livez"))

    def ready(self) -> dict[str, Any]:
        """``GET /readyz``: the database answers and its schema is current (else
        ``ServiceUnavailable``)."""
        return cast(dict, self._json("GET", "/readyz"))

    def metrics(self) -> str:
        """``GET /metrics``: the Prometheus text."""
        return self._request("GET", "/metrics").text


def _instances(rows: Sequence[Any] | Any) -> list[Any]:
    """Rows as the API takes them: lists, records, or a DataFrame's records."""
    if _is_frame(rows):
        return json.loads(rows.to_json(orient="records"))
    return [list(r) if isinstance(r, tuple) else r for r in rows]


def _form_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _figure(format: str) -> str:
    if format not in ("png", "svg"):
        raise ValueError("format must be 'png' or 'svg'")
    return format


def _monitoring_path(model: ModelRef, params: dict[str, Any]) -> str:
    """The report's route for a stored model or a reference; a reference's alias or version
    goes into ``params``."""
    if isinstance(model, bool) or not isinstance(model, int | str):
        raise TypeError("model must be a stored model's id (int) or a reference (str)")
    if isinstance(model, int):
        return f"/models/{model}/monitoring"
    name, alias = model.split("@", 1) if "@" in model else (model, None)
    name, version = name.split("/", 1) if "/" in name else (name, None)
    if alias is not None:
        params["alias"] = alias
    if version is not None:
        params["version"] = version
    return f"/registered-models/{quote(name, safe='')}/monitoring"


def _page(limit: int, cursor: str | None) -> dict[str, Any]:
    return {"limit": limit, **({"cursor": cursor} if cursor else {})}


__all__ = ["Client", "FileLike", "Job", "ModelRef"]
