"""Entry point of ``python -m metrics``."""

import sys

try:
    from .cli import main
except KeyboardInterrupt:  # Ctrl-C while importing: nothing was written yet, no traceback wall
    print("error: stopped by SIGINT while starting; nothing was written", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
