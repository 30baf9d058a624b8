import sys

from namesrv_sandbox.cli import main

sys.exit(main())
