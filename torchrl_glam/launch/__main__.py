import sys

from torchrl_glam.launch.launcher import main

sys.exit(main())
