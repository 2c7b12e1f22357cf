"""Entry point of ``python -m metrics``."""

import sys

from .cli import main

sys.exit(main())
