"""Pools of TextWorld games, generated offline by TextWorld's own challenge generators.

A pool is a family (a TextWorld challenge), its settings, and the seeds of its training and
held-out games: disjoint by seed, and for the cooking family also by TextWorld's own food split
(training games from ``split="train"``, held-out games from ``split="test"``). Each game is built
once into the cache, ``$TORCHRL_GLAM_CACHE/textworld/<family>-<digest of the settings and the
TextWorld version>/game-<seed>.{z8,json}``, with a manifest of the files' SHA-256, and is never
compiled during a reset: :meth:`GamePool.build` (``python -m torchrl_glam.envs.textworld``) builds
the missing ones, showing progress.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: family -> (TextWorld challenge, default settings, the settings the user may change)
FAMILIES: dict[str, tuple[str, dict[str, Any]]] = {
    # a chain of rooms, the coin in the last one: quest length = level (1-100)
    "coin_collector": ("tw-coin_collector", {"level": 6}),
    # easy levels (1-10): five rooms, a target object among distractors
    "treasure_hunter": ("tw-treasure_hunter", {"level": 4}),
    # one ingredient to find in a kitchen, then the meal: "First TextWorld Problems"-style recipes
    "cooking": (
        "tw-cooking",
        {"recipe": 1, "take": 1, "go": 1, "open": False, "cook": False, "cut": False, "drop": False},
    ),
}
#: where held-out seeds start: no training pool reaches it
HELD_OUT_SEED_OFFSET = 1_000_000
MANIFEST = "manifest.json"


class GameBuildError(RuntimeError):
    """A game TextWorld could not generate or compile; the message names the family, the seed and
    what to try."""


class GameFileError(ValueError):
    """A game file that is missing or damaged; the message names it and the fix."""


def _cache_root() -> Path:
    # the cache of the offline models (modules/offline_models.cache_dir), read here without
    # importing that layer: environments sit below it
    return Path(os.environ.get("TORCHRL_GLAM_CACHE", Path.home() / ".cache" / "torchrl_glam"))


def _textworld_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("textworld")
    except PackageNotFoundError:
        return "not installed"


def check_settings(family: str, settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """The family's settings with ``settings`` over its defaults; an unknown family or setting
    raises a ValueError naming the choices."""
    if family not in FAMILIES:
        raise ValueError(f"unknown TextWorld family {family!r}; choose one of {sorted(FAMILIES)}")
    defaults = FAMILIES[family][1]
    unknown = sorted(set(settings or {}) - set(defaults))
    if unknown:
        raise ValueError(
            f"unknown setting(s) {unknown} of the TextWorld family {family!r}; its settings: {sorted(defaults)}"
        )
    merged = {**defaults, **(settings or {})}
    for name, value in merged.items():
        if type(value) is not type(defaults[name]):
            raise ValueError(
                f"setting {name}={value!r} of the TextWorld family {family!r}: expected "
                f"{type(defaults[name]).__name__} (default {defaults[name]!r})"
            )
    return merged


@dataclasses.dataclass(frozen=True)
class GamePool:
    """The games of one family: ``train_games`` training seeds from 0, ``held_out_games`` held-out
    seeds from :data:`HELD_OUT_SEED_OFFSET`; ``cache``: the folder of the pools (default
    ``$TORCHRL_GLAM_CACHE/textworld``)."""

    family: str = "coin_collector"
    settings: tuple[tuple[str, Any], ...] = ()
    train_games: int = 64
    held_out_games: int = 32
    cache: str | None = None

    @classmethod
    def of(cls, family: str, settings: Mapping[str, Any] | None = None, **fields: Any) -> GamePool:
        merged = check_settings(family, settings)
        pool = cls(family, tuple(sorted(merged.items())), **fields)
        if pool.train_games < 1 or pool.held_out_games < 1:
            raise ValueError(
                f"a TextWorld pool needs at least one training and one held-out game "
                f"(train_games={pool.train_games}, held_out_games={pool.held_out_games})"
            )
        return pool

    @property
    def challenge(self) -> str:
        return FAMILIES[self.family][0]

    def seeds(self, split: str) -> list[int]:
        """The seeds of ``split`` ("train" or "held_out")."""
        if split == "train":
            return list(range(self.train_games))
        if split == "held_out":
            return list(range(HELD_OUT_SEED_OFFSET, HELD_OUT_SEED_OFFSET + self.held_out_games))
        raise ValueError(f"split={split!r}: choose 'train' or 'held_out'")

    def _settings(self, split: str) -> dict[str, Any]:
        settings = dict(self.settings)
        if self.family == "cooking":  # TextWorld's own food split keeps held-out ingredients unseen
            settings["split"] = "train" if split == "train" else "test"
        return settings

    def folder(self, split: str) -> Path:
        """The cache folder of a split's games: one per (family, settings, TextWorld version)."""
        key = json.dumps(
            {"family": self.family, "settings": self._settings(split), "textworld": _textworld_version()},
            sort_keys=True,
        )
        digest = hashlib.sha256(key.encode()).hexdigest()[:12]
        return Path(self.cache or _cache_root() / "textworld") / f"{self.family}-{digest}"

    def path(self, split: str, seed: int) -> Path:
        """The compiled game (``.z8``; its logic is the ``.json`` beside it)."""
        return self.folder(split) / f"game-{seed}.z8"

    def missing(self) -> list[tuple[str, int]]:
        """(split, seed) of the games not built yet."""
        return [
            (split, seed)
            for split in ("train", "held_out")
            for seed in self.seeds(split)
            if not (self.path(split, seed).is_file() and self.path(split, seed).with_suffix(".json").is_file())
        ]

    def build(self, progress: bool = True) -> None:
        """Builds the missing games into the cache, one line of progress per ten games."""
        todo = self.missing()
        start = time.monotonic()
        for done, (split, seed) in enumerate(todo, 1):
            build_game(self.challenge, self._settings(split), seed, self.folder(split))
            if progress and (done % 10 == 0 or done == len(todo)):
                print(
                    f"TextWorld {self.family}: built {done}/{len(todo)} games ({time.monotonic() - start:.0f} s)"
                    f" into {self.folder(split).parent}",
                    file=sys.stderr,
                    flush=True,
                )

    def games(self, split: str) -> list[Path]:
        """The paths of a split's games, checked against the manifest written when each was
        built; a missing or damaged game raises a :class:`GameFileError`."""
        return [verified_game(self.path(split, seed), self) for seed in self.seeds(split)]

    def build_command(self) -> str:
        settings = " ".join(f"--set {k}={json.dumps(v)}" for k, v in self.settings if FAMILIES[self.family][1][k] != v)
        return (
            f"python -m torchrl_glam.envs.textworld --family {self.family} --train-games {self.train_games} "
            f"--held-out-games {self.held_out_games} {settings}"
        ).strip()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_game(challenge: str, settings: Mapping[str, Any], seed: int, folder: Path) -> Path:
    """Generates and compiles one game with TextWorld's generator into ``folder`` (atomically:
    built in a temporary folder, then renamed in, the ``.json`` last), and records its digests."""
    check_platform()
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"game-{seed}.z8"
    with _locked(folder):  # array jobs and ranks building the same pool wait for each other
        if final.is_file() and final.with_suffix(".json").is_file():
            return final
        return _build_game(challenge, settings, seed, folder, final)


#: where TextWorld's wheel has Inform7's compilers, which generating and compiling games run
COMPILER_PLATFORMS = {("Linux", "x86_64"), ("Darwin", "x86_64")}


def check_platform() -> None:
    """Raises a :class:`GameBuildError` where TextWorld cannot compile games."""
    import platform

    here = (platform.system(), platform.machine())
    if here not in COMPILER_PLATFORMS:
        raise GameBuildError(
            f"TextWorld's wheel bundles Inform7's compilers for Linux and macOS x86_64 only, and this is {here[0]} "
            f"{here[1]}: build the games on such a machine (python -m torchrl_glam.envs.textworld ...) and copy the "
            "cache folder here, setting TORCHRL_GLAM_CACHE to the folder that holds its textworld/"
        )


@contextlib.contextmanager
def _locked(folder: Path):
    """An exclusive ``flock`` on the folder's lock file (released by the kernel however its holder
    exits); without ``fcntl`` (Windows) none, the atomic renames still keep games whole."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    with open(folder / ".lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build_game(challenge: str, settings: Mapping[str, Any], seed: int, folder: Path, final: Path) -> Path:
    import textworld
    import textworld.challenges
    from textworld.generator import compile_game

    staging = Path(tempfile.mkdtemp(prefix=f".game-{seed}-", dir=folder))
    try:
        options = textworld.GameOptions()
        options.seeds = seed
        options.path = str(staging / final.name)
        options.force_recompile = True
        make = textworld.challenges.CHALLENGES[challenge][1]
        settings = dict(settings)
        if challenge == "tw-cooking":  # each game its own recipe, as the First TextWorld Problems' games
            settings["recipe_seed"] = seed
        try:
            with warnings.catch_warnings():  # Jericho's, when TextWorld checks the walkthrough
                warnings.filterwarnings("ignore", message=".*is not fully supported", category=UserWarning)
                game = make(settings, options)
        except Exception as error:  # noqa: BLE001 - TextWorld's generator raises many kinds
            raise GameBuildError(
                f"TextWorld could not generate a {challenge} game with seed {seed} and settings {dict(settings)} "
                f"({type(error).__name__}: {error}); try other settings (an easier level) or other seeds"
            ) from None
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*is not fully supported", category=UserWarning)
                compiled = Path(compile_game(game, options))
        except Exception as error:  # noqa: BLE001 - Inform7's compiler fails as a subprocess
            raise GameBuildError(
                f"TextWorld could not compile the {challenge} game of seed {seed} ({type(error).__name__}: "
                f"{str(error)[:300]}); try other settings or other seeds"
            ) from None
        files = {suffix: compiled.with_suffix(suffix) for suffix in (".z8", ".json")}
        digests = {suffix: _digest(path) for suffix, path in files.items()}
        os.replace(files[".z8"], final)
        os.replace(files[".json"], final.with_suffix(".json"))  # last: a game is complete with its .json
        _record(folder, final.name, {"z8": digests[".z8"], "json": digests[".json"], "uuid": game.metadata["uuid"]})
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final


def _record(folder: Path, name: str, entry: dict[str, str]) -> None:
    """Adds a game's digests to the folder's manifest (read, updated, replaced atomically)."""
    manifest = folder / MANIFEST
    entries = json.loads(manifest.read_text()) if manifest.is_file() else {}
    entries[name] = entry
    handle, temporary = tempfile.mkstemp(prefix=".manifest-", dir=folder)
    with os.fdopen(handle, "w") as out:
        json.dump(entries, out, indent=1, sort_keys=True)
    os.replace(temporary, manifest)


def verified_game(path: Path, pool: GamePool | None = None) -> Path:
    """``path`` if it and its ``.json`` exist and match the manifest's digests; otherwise a
    :class:`GameFileError` naming the file and the command that rebuilds it."""
    rebuild = f"run {pool.build_command()}" if pool else "rebuild the game"
    logic = path.with_suffix(".json")
    for needed in (path, logic):
        if not needed.is_file():
            raise GameFileError(
                f"TextWorld game file {needed} not found (a game is a .z8 and its .json, the game's logic): {rebuild}"
            )
    manifest = path.parent / MANIFEST
    try:
        entry = json.loads(manifest.read_text())[path.name]
    except (OSError, ValueError, KeyError):
        raise GameFileError(
            f"TextWorld game {path} is not in its folder's {MANIFEST} (a game built elsewhere or a damaged "
            f"manifest): delete {path.parent} and {rebuild}"
        ) from None
    for suffix, file in (("z8", path), ("json", logic)):
        if _digest(file) != entry.get(suffix):
            raise GameFileError(
                f"TextWorld game file {file} is damaged (its SHA-256 differs from the one recorded when it was "
                f"built): delete it and {rebuild}"
            )
    return path


def main(argv: list[str] | None = None) -> None:
    """``python -m torchrl_glam.envs.textworld``: builds a family's pool of games into the cache."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m torchrl_glam.envs.textworld",
        description="Build a pool of TextWorld games (training and held-out) into the cache.",
    )
    parser.add_argument("--family", choices=sorted(FAMILIES), default="coin_collector")
    parser.add_argument("--train-games", type=int, default=GamePool.train_games)
    parser.add_argument("--held-out-games", type=int, default=GamePool.held_out_games)
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="a setting of the family (JSON value)"
    )
    args = parser.parse_args(argv)
    settings = {}
    for pair in args.set:
        name, _, text = pair.partition("=")
        try:
            settings[name] = json.loads(text)
        except ValueError:
            parser.error(f"--set {pair}: the value must be JSON (e.g. level=6, open=true)")
    try:
        pool = GamePool.of(args.family, settings, train_games=args.train_games, held_out_games=args.held_out_games)
        pool.build()
    except (ValueError, GameBuildError) as error:
        parser.exit(2, f"error: {error}\n")
    print(f"{pool.train_games} training and {pool.held_out_games} held-out games in {pool.folder('train').parent}")


__all__ = [
    "FAMILIES",
    "GameBuildError",
    "GameFileError",
    "GamePool",
    "HELD_OUT_SEED_OFFSET",
    "build_game",
    "check_platform",
    "check_settings",
    "verified_game",
]
