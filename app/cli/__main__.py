"""``python -m app.cli``: the msvmav command."""

from app.cli.main import main

raise SystemExit(main())
