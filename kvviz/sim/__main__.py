"""`python -m kvviz.sim`: see kvviz.sim.cli."""

from __future__ import annotations

import sys

from kvviz.sim.cli import main

sys.exit(main())
