"""Per-model prediction metrics for /metrics (Prometheus text), counted by the prediction log's
writer thread as it takes rows off its queue (never on the request path); the log writer's own
(rows written, dropped, waiting; each write's latency); and the process's own memory, CPU time
and open file descriptors (psutil)."""

from __future__ import annotations

import threading
from collections import defaultdict

import numpy as np
import psutil

# Upper bounds of the decision value histogram's buckets (and +Inf).
DECISION_BUCKETS: tuple[float, ...] = (-2.0, -1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0, 2.0)


class PredictionMetrics:
    """msvmav_predictions_total, msvmav_prediction_clipped_total and the
    msvmav_prediction_decision histogram, per model id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._predictions: dict[int, int] = defaultdict(int)
        self._clipped: dict[int, int] = defaultdict(int)
        self._buckets: dict[int, np.ndarray] = {}  # counts per bucket, the last one +Inf
        self._sums: dict[int, float] = defaultdict(float)

    def observe(self, model_id: int, decision: np.ndarray, clipped: np.ndarray) -> None:
        counts = np.bincount(
            np.searchsorted(DECISION_BUCKETS, decision, side="left"),
            minlength=len(DECISION_BUCKETS) + 1,
        )
        with self._lock:
            self._predictions[model_id] += int(decision.size)
            self._clipped[model_id] += int(np.count_nonzero(clipped))
            held = self._buckets.get(model_id)
            self._buckets[model_id] = counts if held is None else held + counts
            self._sums[model_id] += float(decision.sum())

    def render(self) -> list[str]:
        with self._lock:
            models = sorted(self._predictions)
            predictions, clipped = dict(self._predictions), dict(self._clipped)
            buckets = {m: self._buckets[m].copy() for m in models}
            sums = dict(self._sums)
        lines = [
            "# HELP msvmav_predictions_total Rows scored, by model id.",
            "# TYPE msvmav_predictions_total counter",
            *(f'msvmav_predictions_total{{model="{m}"}} {predictions[m]}' for m in models),
            "# HELP msvmav_prediction_clipped_total Rows with a feature outside the training "
            "range, by model id.",
            "# TYPE msvmav_prediction_clipped_total counter",
            *(f'msvmav_prediction_clipped_total{{model="{m}"}} {clipped[m]}' for m in models),
            "# HELP msvmav_prediction_decision Decision values scored, by model id.",
            "# TYPE msvmav_prediction_decision histogram",
        ]
        for m in models:
            cumulative = np.cumsum(buckets[m]).tolist()
            for bound, n in zip((*DECISION_BUCKETS, "+Inf"), cumulative, strict=True):
                lines.append(f'msvmav_prediction_decision_bucket{{model="{m}",le="{bound}"}} {n}')
            lines.append(f'msvmav_prediction_decision_sum{{model="{m}"}} {sums[m]!r}')
            lines.append(f'msvmav_prediction_decision_count{{model="{m}"}} {predictions[m]}')
        return lines


# Upper bounds (seconds) of the log writer's write latency histogram's buckets (and +Inf).
FLUSH_BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class WriterMetrics:
    """The prediction log writer's counters: rows written, writes refused, and the latency of
    each chunk's write (a histogram); ``render`` adds the gauges the writer passes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.written = 0
        self.failures = 0
        self._buckets = np.zeros(len(FLUSH_BUCKETS) + 1, dtype=np.int64)
        self._sum = 0.0

    def flushed(self, rows: int, seconds: float) -> None:
        with self._lock:
            self.written += rows
            self._buckets[int(np.searchsorted(FLUSH_BUCKETS, seconds, side="left"))] += 1
            self._sum += seconds

    def failed(self) -> None:
        with self._lock:
            self.failures += 1

    def render(
        self, *, dropped: int, queued: int, spooled: int, spool_bytes: int, pending: int
    ) -> list[str]:
        with self._lock:
            written, failures, sum_ = self.written, self.failures, self._sum
            cumulative = np.cumsum(self._buckets).tolist()
        name = "msvmav_prediction_log"
        lines = [
            f"# HELP {name}_written_total Rows written to the prediction log.",
            f"# TYPE {name}_written_total counter",
            f"{name}_written_total {written}",
            f"# HELP {name}_dropped_total Answered rows never written to the prediction log "
            "(a bound exceeded: docs/monitoring.md).",
            f"# TYPE {name}_dropped_total counter",
            f"{name}_dropped_total {dropped}",
            f"# HELP {name}_write_failures_total Writes the database refused (retried).",
            f"# TYPE {name}_write_failures_total counter",
            f"{name}_write_failures_total {failures}",
            f"# HELP {name}_queue_rows Rows waiting in memory (queue and chunks).",
            f"# TYPE {name}_queue_rows gauge",
            f"{name}_queue_rows {queued}",
            f"# HELP {name}_spool_rows Rows waiting in the spool file.",
            f"# TYPE {name}_spool_rows gauge",
            f"{name}_spool_rows {spooled}",
            f"# HELP {name}_spool_bytes Bytes of rows waiting in the spool file.",
            f"# TYPE {name}_spool_bytes gauge",
            f"{name}_spool_bytes {spool_bytes}",
            f"# HELP {name}_pending_rows Rows answered and not yet written or dropped.",
            f"# TYPE {name}_pending_rows gauge",
            f"{name}_pending_rows {pending}",
            f"# HELP {name}_flush_seconds Seconds each chunk's write took.",
            f"# TYPE {name}_flush_seconds histogram",
        ]
        for bound, n in zip((*FLUSH_BUCKETS, "+Inf"), cumulative, strict=True):
            lines.append(f'{name}_flush_seconds_bucket{{le="{bound}"}} {n}')
        lines.append(f"{name}_flush_seconds_sum {sum_!r}")
        lines.append(f"{name}_flush_seconds_count {cumulative[-1]}")
        return lines


def process_lines() -> list[str]:
    """This process's resident memory, CPU seconds and open file descriptors."""
    proc = psutil.Process()
    cpu = proc.cpu_times()
    lines = [
        "# HELP process_resident_memory_bytes Resident memory size in bytes.",
        "# TYPE process_resident_memory_bytes gauge",
        f"process_resident_memory_bytes {proc.memory_info().rss}",
        "# HELP process_cpu_seconds_total User and system CPU time spent in seconds.",
        "# TYPE process_cpu_seconds_total counter",
        f"process_cpu_seconds_total {cpu.user + cpu.system:.3f}",
    ]
    if hasattr(proc, "num_fds"):  # POSIX
        lines += [
            "# HELP process_open_fds Number of open file descriptors.",
            "# TYPE process_open_fds gauge",
            f"process_open_fds {proc.num_fds()}",
        ]
    return lines
