import sys

from slurmlab.cli import main

sys.exit(main())
