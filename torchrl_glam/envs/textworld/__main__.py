"""``python -m torchrl_glam.envs.textworld --family coin_collector``: builds a pool of games."""

from torchrl_glam.envs.textworld.games import main

main()
