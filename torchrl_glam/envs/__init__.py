"""Text environments as the library reads them: the :class:`TextEnvironment` protocol, its keys,
the registry of environment names, and the transforms every environment shares.

The environments are subpackages: :mod:`torchrl_glam.envs.playground` (Playground-Text) and
:mod:`torchrl_glam.envs.babyai` (BabyAI-Text, needs ``minigrid``) and
:mod:`torchrl_glam.envs.textworld` (TextWorld's games, needs ``textworld``). A config chooses one by name:
``get_environment("babyai")``; a user's own is registered with :func:`register_environment`.
"""

import lazy_loader

from torchrl_glam.envs import keys as _keys
from torchrl_glam.envs import protocol as _protocol
from torchrl_glam.envs import registry as _registry

# the protocol, keys and registry import without torch (a config is checked against an
# environment's metadata before torch loads); the transforms and PlainEnvState load when used
__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "env_state": ["PlainEnvState"],
        "keys": _keys.__all__,
        "options": ["EnvOption"],
        "protocol": _protocol.__all__,
        "registry": _registry.__all__,
        "transforms": ["PartialResetActionMask", "RenderState"],
    },
)
