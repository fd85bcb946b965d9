"""Headers of every page and asset of the interface: a Content-Security-Policy that lets a page
load scripts, styles, images and data only from the service itself (no inline script or
style, no other origin), and no framing."""

from __future__ import annotations

# blob: for images and downloads the scripts fetched with the key (an <img> cannot send the
# Authorization header); blob: URLs are created by the page itself, of the service's origin.
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' blob:",
        "connect-src 'self'",
        "font-src 'self'",
        "form-action 'self'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
        "object-src 'none'",
    )
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    # The shells hold no data, but a page must not be served stale after an upgrade.
    "Cache-Control": "no-cache",
}
