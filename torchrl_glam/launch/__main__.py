import sys

from torchrl_glam.launch.launcher import cli

sys.exit(cli())
