import sys

from mm2py.cli import main

sys.exit(main())
