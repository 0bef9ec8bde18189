import sys

from cronlab.cli import main

sys.exit(main())
