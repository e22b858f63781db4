import sys

from sandgym.cli import main

sys.exit(main())
