"""What a model name means, in one place: :func:`resolve` reads a config's ``model.name`` (or an
``LLMConfig``'s) for an environment and gives a :class:`ResolvedModel`, which finds the model
(:meth:`ResolvedModel.path`, never building) or builds it (:meth:`ResolvedModel.build`, an explicit
step with progress that a training run takes before it makes anything). This module imports no
torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from torchrl_glam.offline.models import (
    OFFLINE_MODELS,
    OFFLINE_PREFIX,
    ModelKind,
    OfflineModelNotBuilt,
    is_complete,
    offline_name,
    pretraining_recipe,
    tiny_model_recipe,
)
from torchrl_glam.offline.recipes import recipe_of, vocabulary_environment
from torchrl_glam.offline.shipped import SHIPPED_ENV, recipe_version, shipped_enabled, shipped_model_path
from torchrl_glam.storage import cache_root

if TYPE_CHECKING:
    from torchrl_glam.envs import TextEnvironment

#: The model of a config or an ``LLMConfig`` that names none
DEFAULT_MODEL = f"{OFFLINE_PREFIX}tiny-t5"


@dataclass(frozen=True)
class ResolvedModel:
    """A model name read for an environment.

    Args:
        name (str): the name as given (``"offline:tiny-t5"`` for none).
        kind (str | None): ``"t5"`` or ``"llama"`` for an offline model; ``None`` for any other name
            (a hub name, a folder, a ``.gguf`` file), which the loader reads as it is.
        data (str | None): an offline model's pretraining transcripts (``"random"``,
            ``"hindsight"``), ``None`` for a random-init one.
        environment (TextEnvironment | None): the environment whose words an offline model holds.
    """

    name: str
    kind: ModelKind | None = None
    data: str | None = None
    environment: TextEnvironment | None = None

    @property
    def is_offline(self) -> bool:
        return self.kind is not None

    @property
    def directory(self) -> str:
        """An offline model's folder name (``tiny-t5-pretrained-babyai``)."""
        return offline_name(self.kind, self.data, self.environment)

    @property
    def version(self) -> str:
        """An offline model's recipe version (the hash of what its weights depend on)."""
        if self.data is None:
            return recipe_version(tiny_model_recipe(self.kind, environment=self.environment))
        return recipe_version(pretraining_recipe(self.kind, data=self.data, environment=self.environment))

    @property
    def build_command(self) -> str:
        """The command that builds an offline model into the cache."""
        name = self.directory.removesuffix(f"-{self.environment.name}")
        unsuffixed = recipe_of(self.environment).unsuffixed
        return f"python -m torchrl_glam.offline {name}" + ("" if unsuffixed else f" --env {self.environment.name}")

    def path(self) -> str:
        """What ``load_llm`` loads: an offline model's folder (its shipped copy, checked against the
        manifest, else its build in the cache), or any other name as given. Builds nothing: an
        offline model not built on this machine raises :class:`OfflineModelNotBuilt` naming the
        command that builds it."""
        if not self.is_offline:
            return self.name
        directory, version = self.directory, self.version
        # the shipped random-init model holds the unsuffixed environment's words; a pretrained one's
        # name says its own
        if self.data is not None or recipe_of(self.environment).unsuffixed:
            shipped = shipped_model_path(directory, version)
            if shipped is not None:
                return str(shipped)
        cached = cache_root() / f"{directory}-{version}"
        if is_complete(cached):
            return str(cached)
        raise OfflineModelNotBuilt(
            f"the offline model {self.name} for env={self.environment.name!r} (recipe {version}) is not built on "
            f"this machine (looked in {cached}). Build it once with `{self.build_command}` (a training run "
            "builds it before it starts)",
            cached,
        )

    def build(self) -> str:
        """:meth:`path`, after building an offline model that is neither shipped nor built yet into
        the cache (with progress; once: concurrent callers wait for one build, and a stopped build
        continues where it stopped)."""
        try:
            return self.path()
        except OfflineModelNotBuilt as missing:
            final = missing.path
        if self.data is None:
            from torchrl_glam.offline.tiny import build_tiny_into_cache

            return str(build_tiny_into_cache(final, self.kind, self.environment))
        from torchrl_glam.offline.pretraining import build_pretrained_into_cache

        why = "the package ships no weights for this recipe" if shipped_enabled() else f"{SHIPPED_ENV}=0"
        return str(build_pretrained_into_cache(final, self.kind, self.data, self.environment, why))


def resolve(name: str | None, environment: TextEnvironment | None = None) -> ResolvedModel:
    """What ``name`` means for ``environment``: the one reading of a model name.

    * ``None`` is ``offline:tiny-t5``;
    * ``offline:tiny-<kind>``, ``offline:tiny-<kind>-pretrained`` and
      ``offline:tiny-<kind>-hindsight`` are the offline models of ``environment``'s own vocabulary
      (``None``: Playground-Text's, the names' meaning before there were other environments); the
      ``-hindsight`` ones exist where its :class:`~torchrl_glam.offline.recipes.TranscriptRecipe`
      offers them;
    * ``offline:tiny-<kind>-pretrained-<env>`` names its environment, which must be
      ``environment`` when one is given;
    * any other name (a hub name, a folder, a ``.gguf`` file) is the loader's.

    Raises:
        ValueError: an unknown offline model, or one ``environment`` has not; the message names
            the ones to choose from.

    Examples:
        >>> from torchrl_glam.envs import get_environment
        >>> from torchrl_glam.offline.resolve import resolve
        >>> model = resolve("offline:tiny-t5-pretrained", get_environment("babyai"))
        >>> model.directory, model.build_command
        ('tiny-t5-pretrained-babyai', 'python -m torchrl_glam.offline tiny-t5-pretrained --env babyai')
        >>> resolve("offline:tiny-t5-pretrained").directory  # no environment: Playground-Text's
        'tiny-t5-pretrained'
        >>> resolve("HuggingFaceTB/SmolLM2-135M-Instruct").is_offline
        False
    """
    name = DEFAULT_MODEL if name is None else str(name)
    if not name.startswith(OFFLINE_PREFIX):
        return ResolvedModel(name)
    key = name.removeprefix(OFFLINE_PREFIX)
    parts = key.split("-")  # "tiny", "t5", then e.g. "pretrained", "babyai"
    known = [OFFLINE_PREFIX + m for m in OFFLINE_MODELS]
    if len(parts) < 2 or parts[0] != "tiny" or parts[1] not in ("t5", "llama") or len(parts) > 4:
        raise ValueError(f"unknown offline model {name!r}; choose one of {known}")
    kind, trained = parts[1], parts[2:]
    if trained and trained[0] not in ("pretrained", "hindsight") or len(trained) == 2 and trained[0] != "pretrained":
        raise ValueError(f"unknown offline model {name!r}; choose one of {known}")
    data = None if not trained else "hindsight" if trained[0] == "hindsight" else "random"
    if len(trained) == 2:  # a suffix: the environment the name says
        from torchrl_glam.envs import get_environment

        suffix = trained[1]
        if environment is not None and environment.name != suffix:
            raise ValueError(
                f"{name} holds the words of env={suffix!r}, not of env={environment.name!r}: name "
                f"{OFFLINE_PREFIX}tiny-{kind}-pretrained, the one of this environment's own words"
            )
        try:
            environment = environment or get_environment(suffix)
        except ValueError as error:
            raise ValueError(f"unknown offline model {name!r}: {error}") from None
        if recipe_of(environment).unsuffixed:
            raise ValueError(
                f"unknown offline model {name!r}: env={suffix!r}'s is {OFFLINE_PREFIX}tiny-{kind}-pretrained"
            )
    environment = vocabulary_environment(environment)
    if data == "hindsight" and not recipe_of(environment).hindsight:
        raise ValueError(
            f"the tiny models pretrained with hindsight goals ({name}) exist only where the environment's "
            "offline recipe offers them (Playground-Text's); "
            f"{OFFLINE_PREFIX}tiny-{kind}-pretrained is pretrained on this environment's own random-play "
            "transcripts, and model=none is a random-init tiny model of its words"
        )
    return ResolvedModel(name, kind, data, environment)


__all__ = ["DEFAULT_MODEL", "ResolvedModel", "resolve"]
