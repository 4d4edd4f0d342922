"""`python -m kvviz.serving`: see kvviz.serving.cli."""

from __future__ import annotations

import sys

from kvviz.serving.cli import main

sys.exit(main())
