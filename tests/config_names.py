"""A config by field name, as torchrl_glam 0.1 and 0.2 wrote config.json: no
sections (``env`` and ``model`` for their section's name)."""


def by_name(cfg) -> dict:
    short = {path: name for name, path in type(cfg).short_names().items()}
    return {short[path]: value for path, value in cfg.flat_dict().items()}
