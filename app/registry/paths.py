"""The path parameters of the /registered-models routes (the registry's, the monitoring's, the
loop's and the web interface's): one definition each."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path

NamePath = Annotated[str, Path(description="Registered model", examples=["wdbc"])]
AliasPath = Annotated[
    str, Path(description="Alias (letters, digits, `.`, `_`, `-`)", examples=["production"])
]
VersionPath = Annotated[int, Path(description="Version number", examples=[1])]
