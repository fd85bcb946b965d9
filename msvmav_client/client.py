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
    Alias,
    Dataset,
    Evaluation,
    JobInfo,
    Margins,
    ModelInfo,
    Page,
    PredictResult,
    RegisteredModel,
    VersionCreated,
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

    # --- training and jobs ---------------------------------------------------------------------

    def train(self, dataset_id: int, algorithm: str = "msvmav", **fields: Any) -> Job:
        """Queue a training job (``POST /train``): ``fields`` are its body's other members
        (``kernel``, ``alpha``, ``params``, ``search``, ``test_fraction``, ``register_as``, ...).
        Returns the Job; ``job.wait()`` follows it."""
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

    def export(
        self, model_id: int, format: str = "bundle", path: str | Path | None = None
    ) -> bytes:
        """The model as a bundle (zip) or ONNX graph; also written to ``path`` if given."""
        content = self._request(
            "GET", f"/models/{model_id}/export", params={"format": format}
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

    def _exists(self, path: str) -> bool:
        return self.http.get(path).status_code != 404

    def registered_models(self, limit: int = 50, cursor: str | None = None) -> Page:
        return cast(Page, self._json("GET", "/registered-models", params=_page(limit, cursor)))

    def registered_model(self, name: str) -> RegisteredModel:
        return cast(
            RegisteredModel, self._json("GET", f"/registered-models/{quote(name, safe='')}")
        )

    def set_alias(self, name: str, alias: str, version: int) -> Alias:
        path = f"/registered-models/{quote(name, safe='')}/aliases/{quote(alias, safe='')}"
        return cast(Alias, self._json("PUT", path, json={"version": version}))

    def delete_alias(self, name: str, alias: str) -> None:
        path = f"/registered-models/{quote(name, safe='')}/aliases/{quote(alias, safe='')}"
        self._request("DELETE", path)

    def rollback(self, name: str, alias: str) -> Alias:
        """Move the alias back to the version it pointed at before its last move."""
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
    ) -> PredictResult:
        """Labels, decision values and (calibrated models) probabilities of raw rows: lists in
        training column order, records (dicts by column name) or a pandas DataFrame (its
        columns by name). With true ``labels``, accuracy and the batch's margin statistics
        too; with ``explain``, each row's contributions per raw column."""
        if _is_frame(rows):
            instances = json.loads(rows.to_json(orient="records"))
        else:
            instances = [list(r) if isinstance(r, tuple) else r for r in rows]
        body: dict[str, Any] = {**_model_field(model), "instances": instances}
        if labels is not None:
            body["labels"] = list(labels)
        if explain:
            body["explain"] = True
        return cast(PredictResult, self._json("POST", "/predict", json=body))

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
    ) -> Evaluation | bytes:
        """``POST /models/{model}/evaluate`` on a stored dataset or a file with labels: the
        metrics and curves; ``figure="png"`` or ``"svg"``: the curves drawn (bytes)."""
        form = {k: str(v) for k, v in {"dataset_id": dataset_id, "label": label}.items()
                if v is not None}
        files = None
        if data is not None:
            filename, content = _file(data, None)
            files = {"file": (filename, content)}
        path = f"/models/{model}/evaluate" + (f".{figure}" if figure else "")
        if figure:
            return self._request("POST", path, data=form, files=files).content
        return cast(Evaluation, self._json("POST", path, data=form, files=files))

    def predict_file(
        self, model: ModelRef, data: FileLike, label: str | None = None
    ) -> PredictResult:
        """Predict every row of a file (any upload format; a label column adds accuracy)."""
        filename, content = _file(data, None)
        form = {k: str(v) for k, v in {**_model_field(model), "label": label}.items() if v}
        return cast(
            PredictResult,
            self._json("POST", "/predict/file", files={"file": (filename, content)}, data=form),
        )


def _page(limit: int, cursor: str | None) -> dict[str, Any]:
    return {"limit": limit, **({"cursor": cursor} if cursor else {})}


__all__ = ["Client", "FileLike", "Job", "ModelRef"]
