"""The interface's pages: path segment, title, and the scope whose key sees them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Page:
    slug: str  # /ui/{slug}; "" is the overview
    title: str
    admin_only: bool = False
    detail: bool = True  # also /ui/{slug}/{ident}: one dataset, job, model …


PAGES: tuple[Page, ...] = (
    Page("", "Overview", detail=False),
    Page("datasets", "Datasets"),
    Page("jobs", "Jobs"),
    Page("models", "Models"),
    Page("registry", "Registry"),
    Page("monitoring", "Monitoring"),
    Page("experiments", "Experiments"),
    Page("keys", "Keys", admin_only=True, detail=False),
)
BY_SLUG = {p.slug: p for p in PAGES}
