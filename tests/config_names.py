"""A config as the flat config.json of 0.1.0 and earlier 0.2 commits wrote it: field names, no
sections (``env`` and ``model`` for their section's name)."""


def by_name(cfg) -> dict:
    short = {path: name for name, path in type(cfg).short_names().items()}
    return {short[path]: value for path, value in cfg.flat_dict().items()}
