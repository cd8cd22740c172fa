import sys

from ace_gym.cli import main

sys.exit(main())
