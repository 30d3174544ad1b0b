"""``python -m workers`` starts the host worker (see workers.host)."""

import sys

from workers.host.main import main

sys.exit(main())
