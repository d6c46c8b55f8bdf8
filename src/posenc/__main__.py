"""``python -m posenc`` runs the command line."""

import sys

from posenc.cli import main

sys.exit(main())
