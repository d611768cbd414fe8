"""``python -m torchrl_glam.offline NAME [--env ENV]``: build an offline model into the cache."""

import argparse
import sys

from torchrl_glam.envs import DEFAULT_ENVIRONMENT
from torchrl_glam.offline.models import OFFLINE_MODELS, OFFLINE_PREFIX, BuildStopped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="build an offline model into the cache (once) and print where")
    parser.add_argument("name", choices=OFFLINE_MODELS, help="the offline model (offline:<name> in a config)")
    parser.add_argument(
        "--env", default=DEFAULT_ENVIRONMENT, help="the environment whose vocabulary (a registered name)"
    )
    args = parser.parse_args(argv)
    from torchrl_glam.envs import get_environment
    from torchrl_glam.offline.resolve import resolve

    try:
        path = resolve(OFFLINE_PREFIX + args.name, get_environment(args.env)).build()
    except BuildStopped as stop:  # Ctrl-C, SIGTERM: one line, the training scripts' exit code
        print(f"stopped: {stop}", file=sys.stderr)
        return BuildStopped.exit_code
    print(f"offline:{args.name} is in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
