"""``python -m largefedbench.cli``: the ``lfb`` command."""

import sys

from largefedbench.cli import main

sys.exit(main())
