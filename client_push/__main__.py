"""``python -m client_push watch ...`` and ``python -m client_push send ...``"""

import sys

from client_push.cli.watch import main

sys.exit(main())
