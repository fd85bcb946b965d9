"""Request and response bodies of /feedback and the monitoring report; prediction ids."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from app.core.ids import DbId

# A prediction's id, given by the client (one per row) or "{request_id}:{row}".
PredictionId = Annotated[str, StringConstraints(min_length=1, max_length=128)] | int
PredictionIds = list[PredictionId]
#: The start of the 422 for a number of labels other than of ids (a rule between two fields)
LABELS_PER_ID = "one label per id"


class FeedbackRequest(BaseModel):
    """True labels of rows predicted earlier, by their ids."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        protected_namespaces=(),
        json_schema_extra={"examples": [{"model_id": 1, "ids": ["order-17"], "labels": [2]}]},
    )

    model_id: DbId | None = Field(None, description="The stored model that predicted (or `model`)")
    model: str | None = Field(
        None,
        max_length=300,
        description="Or the registered model that predicted: `name@alias`, `name/version`, "
        "`name` (resolved now, to the stored model it names now)",
    )
    ids: PredictionIds = Field(min_length=1, description="The predictions' ids")
    labels: list[Any] = Field(
        min_length=1,
        description="The true label of each id, one of the model's classes: as many labels "
        "as ids (else a 422 naming `labels`: " + LABELS_PER_ID + ")",
    )


class LogState(BaseModel):
    """How far the prediction log was written when a read answered."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"as_of": "2026-11-28T01:00:00Z", "pending_rows": 0}]}
    )

    as_of: datetime = Field(description="When the answer read the log")
    pending_rows: int = Field(
        description="Rows this API process had answered and not yet written to the log then "
        "(the answer did not count them; a read waits at most 0.25 s for them). Rows of other "
        "API processes are written within their own 0.1 s interval"
    )


_LOG_FIELD = Field(
    None, description="The prediction log as the answer read it; null with the log off"
)


class FeedbackOut(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"matched": 1, "unknown_ids": ["order-18"]}]}
    )

    matched: int = Field(description="How many of the ids were found in the prediction log")
    unknown_ids: list[str | int] = Field(description="The first 10 ids not found")
    log: LogState | None = _LOG_FIELD


_REPORT_EXAMPLE = {
    "model_id": 1,
    "since": None,
    "until": None,
    "reference": {
        "n": 455,
        "quantiles": {"5": -2.1, "50": 0.9, "95": 2.4},
        "inside_margin_fraction": 0.41,
        "theta": 1.12,
    },
    "live": {
        "n": 1,
        "quantiles": {"5": 0.71, "50": 0.71, "95": 0.71},
        "inside_margin_fraction": 1.0,
        "clipped_fraction": 0.0,
    },
    "performance_estimate": {
        "method": "cbpe",
        "alpha": 0.05,
        "estimate": 0.93,
        "low": 0.43,
        "high": 1.0,
        "n": 1,
        "realised_accuracy": None,
        "n_labelled": 0,
        "gap": None,
        "atc": {"method": "atc", "estimate": 1.0, "low": 0.21, "high": 1.0, "n": 1,
                "threshold": 0.62, "reference": "hold-out"},
        "importance_weighted": None,
        "domain_classifier": None,
        "interval": None,
        "label_shift": {"method": "mlls", "estimate": 1.0, "low": 0.8, "high": 1.0,
                        "expected_low": 1.0, "expected_high": 1.0, "p_value": 0.21,
                        "priors_reference": [0.63, 0.37], "priors_window": [0.0, 1.0], "n": 1},
        "reliability": {"verdict": "reliable", "label_free_verdict": "reliable", "codes": [],
                        "reasons": []},
    },
    "margin_density": {"method": "md3", "reference": 0.31, "live": 1.0, "change": 0.69,
                       "threshold": 0.1, "drifted": True},
    "drift": {
        "method": "ks_2samp",
        "statistic": 0.52,
        "p_value": 0.96,
        "threshold": 0.01,
        "drifted": False,
        "per_feature": {
            "method": "ks_binned",
            "bins": 20,
            "threshold": 0.000333,
            "n_reference": 455,
            "n_live": 1,
            "n_features": 30,
            "drifted_count": 0,
            "features": [{"name": "V19", "statistic": 0.93, "p_value": 0.14, "drifted": False}],
            "skipped": None,
        },
    },
    "labelled": {
        "n": 0,
        "accuracy": None,
        "mean": None,
        "semivariance": None,
        "sv_ratio": None,
        "daily": [],
        "bucket": "day",
        "buckets": [],
    },
    "warnings": [{"code": "margin_density_drift",
                  "message": "the share of rows inside the margin band moved from 0.310 to "
                  "1.000"}],
}


class Reliability(BaseModel):
    verdict: str = Field(description="reliable, unreliable or none (no estimate), with the "
                         "window's feedback")
    label_free_verdict: str = Field(description="The verdict of the window's inputs alone "
                                    "(every reason but feedback)")
    reasons: list[str] = Field(description="Why the estimate cannot be trusted, if it cannot")
    codes: list[str] = Field(description="Each reason's code: out_of_range, domain_shift, "
                             "disagreement, calibration, label_shift, feedback")


class PerformanceEstimate(BaseModel):
    method: str = Field(description="cbpe: the mean probability of the predicted class")
    alpha: float
    estimate: float
    low: float
    high: float
    n: int
    realised_accuracy: float | None = None
    n_labelled: int = 0
    gap: float | None = Field(None, description="realised_accuracy - estimate")
    atc: dict[str, Any] | None = Field(None, description="Average thresholded confidence")
    importance_weighted: dict[str, Any] | None = Field(
        None, description="The reference rows' correctness weighted by the domain classifier's "
        "density ratio: estimate, low, high, n_effective, n_reference")
    domain_classifier: dict[str, Any] | None = Field(
        None, description="Reference against the window's sampled rows: auc, top_features, "
        "folds, n_reference, n_window, n_sampled, seconds")
    label_shift: dict[str, Any] | None = Field(
        None, description="Maximum-likelihood label shift (EM): the window's class priors "
        "(priors_window, from priors_reference) and the accuracy under them: estimate, low, "
        "high, expected_low, expected_high (from the priors' uncertainty alone), p_value "
        "(likelihood-ratio test of unchanged priors), n")
    interval: dict[str, Any] | None = Field(
        None, description="The 95% interval for the realised accuracy (low, high) widened by "
        "the calibration's error where the window's rows are: the reference rows' "
        "calibration_gap (confidence - correct) weighted by the domain classifier's density "
        "ratio, and its standard error calibration_se")
    reliability: Reliability


class ArmRecordOut(BaseModel):
    model_config = ConfigDict(protected_namespaces=())

    version: int
    model_id: int
    arm: Literal["primary", "canary", "other"] = Field(
        description="What the version is to the alias now: its own (`primary`), its canary's, "
        "or one it pointed at earlier in the window (`other`)")
    n: int = Field(description="Rows the alias answered by this version in the window")
    n_labelled: int = Field(description="Of them, rows with feedback")
    accuracy: float | None = Field(description="Realised accuracy on the rows with feedback")
    mean_decision: float | None
    clipped_fraction: float | None
    predicted_counts: list[int] = Field(description="Rows per predicted class (by class index)")
    first_at: datetime | None
    last_at: datetime | None


class AliasArms(BaseModel):
    alias: str
    version: int = Field(description="The alias's own version now")
    canary: dict[str, Any] | None = Field(description="Its canary now (version, percent)")
    records: list[ArmRecordOut] = Field(description="One per version that answered the alias's "
                                        "rows in the window (app.monitoring.arms.arm_records)")


class MonitoringReport(BaseModel):
    model_config = ConfigDict(
        protected_namespaces=(), json_schema_extra={"examples": [_REPORT_EXAMPLE]}
    )

    model_id: int
    arms: AliasArms | None = Field(
        None, description="A registered model's report by alias (or bare name: `production`): "
        "each version that answered the alias's own rows in the window, e.g. a canary's two "
        "arms side by side")
    since: datetime | None = Field(None, description="The window's start (inclusive), if given")
    until: datetime | None = Field(None, description="The window's end (exclusive), if given")
    reference: dict[str, Any] | None = Field(
        description="The training part's decision values: n, quantiles (5..95), the share "
        "inside the training average margin (|f(x)| < theta); null when the model's dataset "
        "is no longer stored"
    )
    live: dict[str, Any] = Field(
        description="The logged decision values in the window: the same, plus clipped_fraction"
    )
    performance_estimate: PerformanceEstimate | None = Field(
        None,
        description="Label-free accuracy of the window: the mean probability of the predicted "
        "class from the model's calibrated probabilities of the logged decision values "
        "(method cbpe, as NannyML's CBPE), with a 95% interval (low, high: where the "
        "realised accuracy falls if the calibration holds on these rows), n rows, and "
        "realised_accuracy over the n_labelled rows with feedback (null without) and its gap "
        "(realised - estimate); atc: average thresholded confidence (Garg et al. 2022), the "
        "share of rows whose predicted-class probability exceeds the threshold fitted on the "
        "model's hold-out (or training part), with a Wilson 95% interval; domain_classifier: "
        "a logistic regression telling the reference rows from the window's sampled rows, "
        "its cross-validated ROC AUC (auc), top_features and seconds; importance_weighted: "
        "the reference rows' correctness weighted by its density ratio, with a 95% interval "
        "and n_effective; label_shift: maximum-likelihood label shift (EM on the calibrated "
        "probabilities), the class priors the window implies and the accuracy under them, "
        "with a 95% interval; "
        "reliability: verdict (reliable, unreliable, none), label_free_verdict (without the "
        "feedback), and the reasons the window gives with their codes (out_of_range, "
        "domain_shift, disagreement, calibration, label_shift, feedback); null when the "
        "model has no "
        "calibration or the window no rows",
    )
    margin_density: dict[str, Any] | None = Field(
        None,
        description="Margin-density drift (MD3): the share of rows inside the training margin "
        "band |f(x)| < theta, reference and live, their change, threshold (0.1) and drifted; "
        "null without a reference or live rows",
    )
    warnings: list[dict[str, str]] = Field(
        default_factory=list,
        description="What the window says to look at, each {code, message}: decision_drift, "
        "feature_drift, margin_density_drift, clipped_inputs, unreliable_estimate, "
        "accuracy_below_estimate, log_gap",
    )
    drift: dict[str, Any] | None = Field(
        description="Kolmogorov-Smirnov two-sample test between reference and live decision "
        "values: statistic, p_value, threshold (p-value below it: drifted); null without both. "
        "per_feature: the same per scaled feature on 20-bin counts (method ks_binned; threshold "
        "0.01 / n_features), the 10 features with the largest statistic first (name, "
        "statistic, p_value, drifted), drifted_count, and skipped (why there is none, or null)"
    )
    labelled: dict[str, Any] = Field(
        description="Rows with feedback: n, accuracy, and margin_statistics' mean (theta), "
        "semivariance and sv_ratio of their margins; buckets: start, n, accuracy and mean per "
        "UTC `bucket` (the query's: minute, hour or day); daily: n, accuracy and mean per UTC day "
        "the rows were predicted"
    )
    log: LogState | None = _LOG_FIELD


class ShadowUpdate(BaseModel):
    """The challenger of a registered model's shadow."""

    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra={"examples": [{"alias": "challenger"}]}
    )

    alias: str = Field(
        max_length=100,
        description="An alias of the registered model naming another version than the served "
        "one (production, else the newest), with the same classes and features",
    )


_SIDE_EXAMPLE = {
    "model_ids": [2],
    "live": {
        "n": 120,
        "quantiles": {"5": -2.0, "50": 0.8, "95": 2.3},
        "inside_margin_fraction": 0.4,
        "clipped_fraction": 0.0,
    },
    "accuracy": 0.95,
}


class ShadowSide(BaseModel):
    model_config = ConfigDict(protected_namespaces=())

    model_ids: list[int] = Field(
        description="The stored models that scored the rows, oldest first (an alias moved "
        "during the shadow: more than one)"
    )
    live: dict[str, Any] = Field(
        description="As the monitoring report's live part: n, quantiles (5..95) of the "
        "decision values, inside_margin_fraction (|f(x)| below the training average margin of "
        "the newest of model_ids), clipped_fraction"
    )
    accuracy: float | None = Field(description="On the rows with feedback; null without any")


class ShadowReport(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "wdbc",
                    "alias": "challenger",
                    "running": True,
                    "started_at": "2026-11-24T23:00:00Z",
                    "stopped_at": None,
                    "n": 120,
                    "agreement": 0.975,
                    "labelled": 40,
                    "production": _SIDE_EXAMPLE,
                    "challenger": _SIDE_EXAMPLE | {"model_ids": [3], "accuracy": 0.975},
                }
            ]
        }
    )

    name: str = Field(description="The registered model")
    alias: str = Field(description="The challenger's alias")
    running: bool = Field(description="False once DELETE stopped it (its rows stay)")
    started_at: datetime
    stopped_at: datetime | None
    n: int = Field(description="Rows scored by both")
    agreement: float | None = Field(
        description="Share of those rows both predicted the same label for; null without rows"
    )
    labelled: int = Field(description="Rows with feedback (POST /feedback on the served model)")
    production: ShadowSide = Field(
        description="The served version (production, else the newest): its answers to the rows"
    )
    challenger: ShadowSide = Field(description="The challenger's answers to the same rows")
    log: LogState | None = _LOG_FIELD
    shadow_pending_rows: int = Field(
        0,
        description="Rows this API process had queued for the challenger and not yet scored "
        "when the answer read them (not counted; a read waits at most 0.5 s for them)",
    )
