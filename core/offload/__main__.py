"""``python -m offload``: the ``offload`` command line."""

import sys

from offload._cli import main

sys.exit(main())
