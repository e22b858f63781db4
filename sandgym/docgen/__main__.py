"""``python -m sandgym.docgen``: rewrite docs/CONFIG.md and docs/CLI.md (``--check``: only compare)."""

import sys

from sandgym.docgen import main

sys.exit(main())
