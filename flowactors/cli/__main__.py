"""``python -m flowactors.cli``: the flowactors command without its script."""

import sys

from flowactors.cli import main

sys.exit(main())
