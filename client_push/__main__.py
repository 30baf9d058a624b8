"""``python -m client_push watch ...``"""

import sys

from client_push.watch import main

sys.exit(main())
