import sys

from kvviz.bench.cli import main

sys.exit(main())
