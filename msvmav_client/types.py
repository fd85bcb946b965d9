"""The shapes of the service's answers, as TypedDicts (the JSON as the service sends it).

Each mirrors a response schema of the service's OpenAPI document (named beside it); the test
``tests/test_client_contract.py`` fails when a field is on one side only. Timestamps are ISO
8601 strings."""

from __future__ import annotations

from typing import Any, TypedDict


class ReferenceFile(TypedDict, total=False):  # ReferenceFile
    path: str  # local path or URL of one Parquet file (partition)
    n_rows: int
    size_bytes: int


class Reference(TypedDict, total=False):  # ReferenceOut
    uri: str  # the location as registered: a directory, file or glob
    files: list[ReferenceFile]


class Dataset(TypedDict, total=False):  # DatasetDetail
    id: int
    name: str
    filename: str
    format: str
    n_rows: int
    n_rows_dropped: int  # rows dropped for missing values (missing=drop)
    n_features: int
    feature_names: list[str]
    classes: list[Any]
    class_counts: list[int]
    sparse: bool  # stored as a CSR matrix
    sha256: str  # of the uploaded bytes
    size_bytes: int
    created_at: str
    encoding: dict[str, Any]  # how raw values become features (applied again at prediction)
    options: dict[str, Any]  # the parsing options used at upload
    reference: Reference | None  # a dataset by reference: where its rows lie (None: uploaded)


class JobInfo(TypedDict, total=False):  # JobDetail (/train and cancel answer its JobOut part)
    id: int
    kind: str
    status: str  # queued, running, succeeded, failed, cancelled
    progress: float  # 0-1
    message: str
    params: dict[str, Any]  # as submitted (train: the resolved estimator_params too)
    dataset_id: int | None
    model_id: int | None
    result: dict[str, Any] | None
    error: str | None
    cancel_requested: bool
    attempts: int  # how many times a worker claimed it
    worker_id: str | None
    created_at: str
    started_at: str | None
    finished_at: str | None
    heartbeat_at: str | None
    attempt_history: list[dict[str, Any]]  # each claim by a worker, oldest first


class ModelInfo(TypedDict, total=False):  # ModelDetail
    id: int
    job_id: int
    dataset_id: int | None
    algorithm: str
    params: dict[str, Any]
    classes: list[Any]
    n_features: int
    feature_names: list[str]
    scaling: str  # minmax or none
    n_train: int
    n_test: int
    fit_seconds: float
    n_iter: int
    created_at: str
    holdout_accuracy: float | None  # of the labels served by the model's id (holdout_rule)
    holdout_rule: str  # the rule those labels follow: argmax, sign, or the model's own
    train_accuracy: float | None
    weights: dict[str, Any] | None
    kernel_summary: dict[str, Any] | None  # rbf/poly: expansion terms, gamma, rank, error
    scaling_ranges: dict[str, Any]
    train_margins: dict[str, Any]
    holdout: dict[str, Any] | None
    history: dict[str, Any]  # iteration count, stop reason, sampled trace
    search: dict[str, Any] | None  # the cross-validated grid search, when asked for
    fit_path: dict[str, Any] | None  # MSVMAv: linear_solver, kernel_approximation, fit_info
    columns: list[dict[str, Any]]  # categorical and imputed feature columns
    calibration: str  # sigmoid, isotonic or none (no probabilities)
    converged: bool | None  # MSVMAv: the stopping rule met before max_iter
    last_relative_change: float | None
    tol: float | None
    evaluation: dict[str, Any] | None  # the hold-out part's metrics (labels by holdout_rule)
    evaluation_argmax: dict[str, Any] | None  # once a rule is set: the training's, by argmax
    sample_weight: dict[str, Any] | None  # weight_column's training weights (n, sum, ...)
    warnings: list[str]


class RowExplanation(TypedDict):  # RowExplanation
    baseline_decision: float
    contributions: dict[str, float]  # per raw input column; they add up to decision_value


class Prediction(TypedDict, total=False):  # Prediction
    id: str | int  # the one given in ids, else "{X-Request-ID}:{row}"
    clipped: bool  # some feature fell outside the training range (clipped by the scaling)
    label: Any
    decision_value: float  # binary: f(x); multi-class: the predicted class's score
    decision_values: list[float] | None  # multi-class: one per class
    margin: float  # the predicted label's margin: y·f(x); multi-class f_label - max other
    probability: float | None  # calibrated models: the label's probability
    probabilities: dict[str, float] | None  # calibrated models: per class (as text)
    explanation: RowExplanation | None  # with explain=True


class PredictResult(TypedDict, total=False):  # PredictResponse
    model_id: int
    model: str | None  # the registered model, for a reference
    version: int | None
    alias: str | None
    arm: str | None  # an alias with a canary: "primary" or "canary" (version: the answering one)
    classes: list[Any]
    n: int
    n_clipped: int  # rows with a feature outside the training range (each one's clipped)
    predictions: list[Prediction]
    accuracy: float | None  # with true labels
    margins: dict[str, Any] | None  # with true labels
    explanation: dict[str, Any] | None  # with explain=True: method, baseline
    skipped: dict[str, Any] | None  # predict_file with on_error="skip": n and the errors
    decision_rule: dict[str, Any] | None  # the rule that made the labels: name, source, rule


class ThresholdResult(TypedDict, total=False):  # ThresholdAnswer (set_threshold)
    model_id: int
    model: str | None
    version: int | None
    alias: str | None
    stored_on: str | None  # alias, model, or None (store=False)
    objective: dict[str, Any]
    rule: dict[str, Any]  # the fitted rule (solver.decision), as stored
    decision_rule: str  # its name
    threshold: float | None  # None: a cost matrix's Bayes rule
    oof: dict[str, Any]  # measure, n, value, interval: out of fold (fitted on)
    holdout: dict[str, Any] | None  # the same on the model's hold-out part
    holdout_argmax: dict[str, Any] | None  # the argmax rule's on the hold-out
    curve: dict[str, Any] | None  # threshold grid, oof and holdout values


class Evaluation(TypedDict, total=False):  # EvaluationOut
    model_id: int
    model: str | None  # the registered model, for a name reference
    version: int | None
    alias: str | None
    source: str  # dataset or file
    dataset_id: int | None
    n: int
    rows: str  # holdout (the model's own dataset: the rows it did not train on) or all
    row_indices: list[int] | None  # with rows holdout: the dataset rows scored
    metrics: dict[str, Any]  # as the model detail's evaluation
    curves: dict[str, Any]  # roc, pr, reliability
    importance: dict[str, Any] | None  # permutation importance per raw column, when asked


class LeaderboardCost(TypedDict, total=False):  # CostRule
    labels: list[Any]  # the classes, in the order of the matrix
    matrix: list[list[float]]  # cost of (true class row, served label column)
    positive_class: Any | None  # cost_fp/cost_fn rules: classes[1]


class LeaderboardEntry(TypedDict, total=False):  # LeaderboardEntry
    model_id: int
    reference: str | None  # as given (None by dataset)
    model: str | None
    version: int | None
    alias: str | None
    algorithm: str
    calibration: str
    created_at: str
    n_holdout: int  # rows of the model's own hold-out
    decision_rule: dict[str, Any] | None  # the rule that made the labels measured
    rank: int  # 1 = best by the metric (ties share a rank)
    best: bool
    accuracy: float | None
    balanced_accuracy: float | None
    roc_auc: float | None  # multi-class: macro one-vs-rest
    pr_auc: float | None
    log_loss: float | None  # calibrated models only
    ece: float | None  # calibrated models only
    expected_cost: float | None  # mean cost per row of the served labels (with a cost rule)
    expected_cost_interval: list[float] | None  # its 95 % bootstrap interval [low, high]
    notes: dict[str, str]  # why a metric is null, by metric


class LeaderboardExcluded(TypedDict, total=False):  # Excluded
    model_id: int
    reason: str


class Leaderboard(TypedDict, total=False):  # LeaderboardOut
    dataset_id: int | None
    metric: str
    higher_is_better: bool
    comparable: bool  # False: the models share no hold-out row, or not one dataset (reason)
    reason: str | None
    n_rows: int  # rows compared on: in every model's hold-out
    cost: LeaderboardCost | None
    best: list[int]  # ids of the best models by the metric
    models: list[LeaderboardEntry]  # best first
    excluded: list[LeaderboardExcluded]  # left out, with the reason (no hold-out kept)
    n_models: int
    truncated: bool  # by dataset: more models than limit


class Margins(TypedDict, total=False):  # MarginsOut
    model_id: int
    source: str
    dataset_id: int | None
    n: int
    statistics: dict[str, Any]


class ModelVersion(TypedDict, total=False):  # VersionOut
    version: int
    model_id: int
    algorithm: str
    holdout_accuracy: float | None
    created_at: str
    # a retrained version's: parent_version, dataset_rows, feedback_rows, window, warm_start
    lineage: dict[str, Any] | None


class RegisteredModel(TypedDict, total=False):  # RegisteredModelDetail
    name: str
    description: str
    tags: dict[str, str]
    latest_version: int  # the highest version number given so far (0: none)
    versions: list[ModelVersion]  # newest first
    aliases: dict[str, int]
    canaries: dict[str, dict[str, Any]]  # alias -> its canary (version, percent, model_id)
    created_at: str
    updated_at: str


class VersionCreated(TypedDict, total=False):  # VersionCreated
    name: str
    version: int
    model_id: int


class Canary(TypedDict, total=False):  # CanaryOut
    version: int
    percent: float  # of the alias's requests (0 < percent < 100)
    model_id: int | None


class Alias(TypedDict, total=False):  # AliasOut
    name: str
    alias: str
    version: int
    model_id: int
    previous_version: int | None
    canary: Canary | None


class DatasetProfile(TypedDict, total=False):  # DatasetProfile
    dataset_id: int
    rows_profiled: int  # at most the first 100,000
    n_rows: int
    n_columns: int
    columns: list[dict[str, Any]]  # one per feature column (at most 200): type, statistics
    label: dict[str, Any]  # name, classes, counts
    preview: dict[str, Any]  # the first 10 rows as stored


class LogState(TypedDict, total=False):  # LogState
    as_of: str  # when the answer read the prediction log
    pending_rows: int  # rows answered by that API process and not yet written to the log


class FeedbackResult(TypedDict, total=False):  # FeedbackOut
    matched: int  # ids found in the prediction log
    unknown_ids: list[str]  # the first 10 not found
    log: LogState | None


class Reliability(TypedDict, total=False):
    verdict: str  # reliable, unreliable or none: with the window's feedback
    label_free_verdict: str  # the same from the window's inputs alone
    reasons: list[str]
    codes: list[str]  # out_of_range, domain_shift, disagreement, calibration, label_shift, feedback


class PerformanceEstimate(TypedDict, total=False):
    method: str  # cbpe: the mean probability of the predicted class
    alpha: float
    estimate: float
    low: float
    high: float
    n: int
    realised_accuracy: float | None  # over the rows with feedback
    n_labelled: int
    gap: float | None  # realised_accuracy - estimate
    atc: dict[str, Any] | None  # average thresholded confidence
    importance_weighted: dict[str, Any] | None  # from the domain classifier's density ratio
    domain_classifier: dict[str, Any] | None  # auc, top_features, seconds
    label_shift: dict[str, Any] | None  # MLLS: the class priors and accuracy under label shift
    interval: dict[str, Any] | None  # low, high widened by the calibration's error there
    reliability: Reliability


class MonitoringReport(TypedDict, total=False):  # MonitoringReport
    model_id: int
    since: str | None
    until: str | None
    reference: dict[str, Any] | None  # the training part's decision values
    live: dict[str, Any]  # the logged decision values of the window
    performance_estimate: PerformanceEstimate | None  # label-free accuracy (calibrated models)
    margin_density: dict[str, Any] | None  # drift of the share of rows inside the margin
    warnings: list[dict[str, str]]  # why the window's estimates may not hold
    drift: dict[str, Any] | None  # Kolmogorov-Smirnov test, per feature too
    labelled: dict[str, Any]  # rows with feedback: accuracy, margin statistics, per day
    log: LogState | None
    arms: dict[str, Any] | None  # by alias: each version that answered its rows (a canary's arms)


class ShadowSide(TypedDict, total=False):  # ShadowSide
    model_ids: list[int]
    live: dict[str, Any]
    accuracy: float | None


class ShadowReport(TypedDict, total=False):  # ShadowReport
    name: str
    alias: str  # the challenger's alias
    running: bool
    started_at: str
    stopped_at: str | None
    n: int  # rows scored by both
    agreement: float | None
    labelled: int
    production: ShadowSide
    challenger: ShadowSide
    log: LogState | None
    shadow_pending_rows: int


class Experiment(TypedDict, total=False):  # ExperimentOut
    id: int  # the job id
    status: str
    progress: float
    message: str
    error: str | None
    cancel_requested: bool
    params: dict[str, Any]  # the request
    summary: dict[str, Any] | None  # once succeeded: mean test accuracy per data set, algorithm
    created_at: str
    started_at: str | None
    finished_at: str | None
    links: dict[str, Any]  # the job, the tables and the margin plots
    results: list[dict[str, Any]] | None


class KeyInfo(TypedDict, total=False):  # KeyOut
    id: int
    name: str
    scope: str  # read, write or admin
    prefix: str  # the key's first characters
    created_at: str
    last_used_at: str | None
    revoked_at: str | None
    expires_at: str | None


class KeyCreated(KeyInfo, total=False):  # KeyCreated
    key: str  # the secret, shown only in this answer


class Policy(TypedDict, total=False):  # PolicyOut
    name: str
    enabled: bool
    config: dict[str, Any]  # trigger, retrain, judge, action, rollback
    state: dict[str, Any]  # phase, job_id, challenger_version, last_decision (with evidence)
    record: dict[str, Any] | None  # the challenger beside production (canary arm or shadow)
    updated_at: str


class AlertRule(TypedDict, total=False):  # AlertRuleOut
    id: int
    name: str
    model_id: int | None  # the stored model watched, or
    model: str | None  # the registry reference, resolved at each window
    metric: str  # estimated_accuracy, clipped_share, drift_statistic, unreliable, ...
    comparison: str  # lt, le, gt, ge
    level: float
    window_seconds: int
    cooldown_seconds: int
    min_rows: int
    enabled: bool
    created_at: str
    evaluated_until: str | None  # the end of the last window evaluated
    last_fired_at: str | None
    last_window: dict[str, Any] | None  # since, until, model_id, values (every metric)


class Webhook(TypedDict, total=False):  # WebhookOut
    id: int
    url: str
    events: list[str]  # alert, alias_moved, version_registered
    description: str
    created_at: str


class WebhookCreated(Webhook, total=False):  # WebhookCreated
    secret: str  # the signing secret, shown only in this answer


class Delivery(TypedDict, total=False):  # DeliveryOut
    id: int
    webhook_id: int
    event: str
    rule_id: int | None
    status: str  # pending, sending, delivered, failed
    attempts: int
    response_code: int | None  # the last attempt's HTTP status
    history: list[dict[str, Any]]  # every attempt: at, status_code, error
    body: str  # the JSON text sent and signed
    next_attempt_at: str
    created_at: str
    delivered_at: str | None


class Page(TypedDict):  # DatasetPage, JobPage, ModelPage, ...
    items: list[dict[str, Any]]
    next_cursor: str | None
