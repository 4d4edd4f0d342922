"""`python -m kvviz`: see kvviz.cli."""

from __future__ import annotations

import sys

from kvviz.cli import main

sys.exit(main())
