"""`python -m gatecfg`."""

from __future__ import annotations

import sys

from gatecfg.cli import main

sys.exit(main())
