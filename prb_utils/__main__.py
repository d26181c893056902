"""``python -m prb_utils`` runs the ``prb`` command line."""

import sys

from prb_utils.cli import main

sys.exit(main())
