"""What the by-reference dataset tests share (tests/app/test_dataset_references*.py,
test_batch_as_used.py): a frame with a categorical column, its Parquet parts, and settings whose
one data root is a temporary directory — as functions, and as the fixtures ``root`` and
``settings`` (``root_fixture``, ``settings_fixture``), which a test module imports to run its app
with that root."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from app.core.config import Settings


def frame(n: int = 120, seed: int = 0) -> pd.DataFrame:
    """Two numeric columns, a categorical one that matters, an id to drop, a string label."""
    rng = np.random.default_rng(seed)
    colour = rng.choice(["red", "green", "blue"], size=n)
    x1 = rng.normal(size=n) * 3 + 10
    x2 = rng.uniform(-5, 5, size=n)
    score = x1 / 3 - 3.3 + (colour == "red") * 1.5 - (colour == "blue") + 0.3 * x2
    label = np.where(score + rng.normal(scale=0.3, size=n) > 0, "yes", "no")
    return pd.DataFrame({"id": np.arange(n), "x1": x1, "colour": colour, "x2": x2,
                         "label": label})


def write_parts(df: pd.DataFrame, directory: Path, parts: int = 3) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, part in enumerate(np.array_split(np.arange(len(df)), parts)):
        path = directory / f"part-{k}.parquet"
        df.iloc[part].to_parquet(path, index=False, row_group_size=17)
        paths.append(path)
    return paths


def data_root(tmp_path: Path) -> Path:
    """An empty directory to be MSVMAV_DATA_ROOTS' one root."""
    out = tmp_path / "root"
    out.mkdir()
    return out


def root_settings(database_url: str, root: Path) -> Settings:
    """Fast-polling worker settings with ``root`` as the only data root."""
    return Settings(database_url=database_url, data_roots=[str(root)], worker_poll_interval=0.05,
                    heartbeat_interval=0.5, lease_seconds=30.0, cancel_check_interval=0.05,
                    _env_file=None)


@pytest.fixture(name="root")
def root_fixture(tmp_path: Path) -> Path:
    """The data root (``data_root``)."""
    return data_root(tmp_path)


@pytest.fixture(name="settings")
def settings_fixture(database_url: str, root: Path) -> Settings:
    """The app's settings with ``root`` as its one data root (``root_settings``)."""
    return root_settings(database_url, root)
