"""The web interface at /ui: server-rendered page shells (jinja2) whose scripts read the JSON
API with the key the person entered once per browser session (docs/ui.md)."""
