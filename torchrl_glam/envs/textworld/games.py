"""Pools of TextWorld games, generated offline by TextWorld's own challenge generators.

A pool is a family (a TextWorld challenge), its settings, and the seeds of its training and
held-out games: disjoint by seed, and for the cooking family also by TextWorld's own food split
(training games from ``split="train"``, held-out games from ``split="test"``). Each game is built
once into the cache, ``$TORCHRL_GLAM_CACHE/textworld/<family>-<digest of the settings and the
TextWorld version>/game-<seed>.{z8,json}``, with a manifest of the files' SHA-256, and is never
compiled during a reset: :meth:`GamePool.build` (``python -m torchrl_glam.envs.textworld``) builds
the missing ones, showing progress, then checks every game against the manifest.

The pool writes only inside its folder and never through a symbolic link (its lock, its manifest,
its games: :mod:`torchrl_glam.storage`); what goes wrong there (a damaged game or manifest, an
unusable cache, a full disk) is a one-line error that names the file and the fix.
"""

from __future__ import annotations

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

from torchrl_glam import storage
from torchrl_glam.envs.protocol import EnvironmentFilesError
from torchrl_glam.storage.files import CACHE_FIX

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
#: the lock a pool's builders take (processes, array jobs and ranks building the same pool)
LOCK = ".lock"
#: the staging folders of game builds (a build killed mid-game leaves its own behind)
STAGING = ".game-*"
#: the manifest's temporary files (a kill while it is replaced leaves one behind)
MANIFEST_TEMPORARY = ".manifest*"
#: the longest part of TextWorld's own error kept in a message (Inform7's output runs for pages)
ERROR_TEXT = 300


class GameBuildError(EnvironmentFilesError, RuntimeError):
    """A game TextWorld could not generate or compile; the message names the family, the seed and
    what to try."""


class GameFileError(EnvironmentFilesError, ValueError):
    """A game file (or the manifest) that is missing or damaged; the message names it and the fix."""


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
        return Path(self.cache or storage.cache_root() / "textworld") / f"{self.family}-{digest}"

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
        """Builds the missing games into the cache, one line of progress per ten games, then
        checks both splits against their manifests: a pool it leaves built is one training can use
        (a damaged game or manifest raises a :class:`GameFileError`)."""
        todo = self.missing()
        for folder in sorted({self.folder(split) for split, _ in todo}):
            _read_manifest(folder, self)  # refused before a game is built beside a damaged manifest
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
        for split in ("train", "held_out"):
            self.games(split)

    def identity(self) -> dict[str, dict[str, str]]:
        """What a checkpoint records of the pool, per split: its folder's name (the family, the
        settings, the TextWorld version) and a digest of its games' uuids in seed order, which its
        episodes' game indices stand for. The uuids, not the files' digests: a game deleted and
        rebuilt is the same game, though TextWorld may write its files otherwise in another process."""
        identity = {}
        for split in ("train", "held_out"):
            folder = self.folder(split)
            entries = _read_manifest(folder, self)
            games = [entries.get(self.path(split, seed).name, {}) for seed in self.seeds(split)]
            uuids = json.dumps([game.get("uuid") or game.get("z8") for game in games])
            identity[split] = {"folder": folder.name, "games": hashlib.sha256(uuids.encode()).hexdigest()}
        return identity

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
    final = folder / f"game-{seed}.z8"
    waiting = f"its build of the TextWorld games in {folder}"
    with storage.file_lock(folder / LOCK, waiting=waiting, fix=CACHE_FIX):
        # what builds killed mid-game left; no other builder is inside one while this lock is held
        storage.remove_stale(folder, STAGING)
        storage.remove_stale(folder, MANIFEST_TEMPORARY)
        if final.is_file() and final.with_suffix(".json").is_file():
            return final
        _read_manifest(folder)  # a damaged manifest: refused before a game is built beside it
        _refuse_links(final)  # before the build's seconds, and again before the renames
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


def _build_game(challenge: str, settings: Mapping[str, Any], seed: int, folder: Path, final: Path) -> Path:
    import textworld
    import textworld.challenges
    from textworld.generator import compile_game

    try:
        staging = Path(tempfile.mkdtemp(prefix=f".game-{seed}-", dir=folder))
    except OSError as error:
        raise storage.storage_error(error, final, CACHE_FIX) from None
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
            raise _build_error(
                error,
                final,
                f"TextWorld could not generate a {challenge} game with seed {seed} and settings {dict(settings)}",
                "try other settings (an easier level) or other seeds",
            ) from None
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*is not fully supported", category=UserWarning)
                compiled = Path(compile_game(game, options))
        except Exception as error:  # noqa: BLE001 - Inform7's compiler fails as a subprocess
            raise _build_error(
                error,
                final,
                f"TextWorld could not compile the {challenge} game of seed {seed}",
                "try other settings or other seeds",
            ) from None
        files = {suffix: compiled.with_suffix(suffix) for suffix in (".z8", ".json")}
        try:
            _canonical_json(files[".json"])
            digests = {suffix: _digest(path) for suffix, path in files.items()}
            _refuse_links(final)
            os.replace(files[".z8"], final)
            entry = {"z8": digests[".z8"], "json": digests[".json"], "uuid": game.metadata["uuid"]}
            _record(folder, final.name, entry)
            # last: a game is complete with its .json, so a kill before leaves it missing (rebuilt)
            os.replace(files[".json"], final.with_suffix(".json"))
        except storage.StorageError:
            raise
        except OSError as error:
            raise storage.storage_error(error, final, CACHE_FIX) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final


def _refuse_links(final: Path) -> None:
    """A link where a game's files go is refused, as at every file the pool writes (a rename would
    replace it silently)."""
    for written in (final, final.with_suffix(".json")):
        if written.is_symlink():
            raise storage.link_error(written)


def _build_error(error: Exception, final: Path, what: str, remedy: str) -> Exception:
    """TextWorld's failure to build ``final``: a full disk said as such (Inform7 reports it deep in
    its output, which the message cuts), anything else a :class:`GameBuildError` on one line."""
    if storage.is_disk_full(error):
        return storage.storage_error(error, final, CACHE_FIX)
    text = " ".join(str(error).split())
    text = text if len(text) <= ERROR_TEXT else text[:ERROR_TEXT] + " ..."
    return GameBuildError(f"{what} ({type(error).__name__}: {text}); {remedy}")


def _canonical_json(path: Path) -> None:
    """Sorts the one set TextWorld writes as a list in the order of the process's hash seed (the
    grammar's ``names_to_exclude``, read back as a set), so that a game rebuilt in another process
    is byte-identical; the rest is written back as TextWorld wrote it (``json.dump``'s defaults)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    grammar = data.get("grammar") if isinstance(data, dict) else None
    if isinstance(grammar, dict) and isinstance(grammar.get("names_to_exclude"), list):
        grammar["names_to_exclude"] = sorted(grammar["names_to_exclude"], key=json.dumps)
        path.write_text(json.dumps(data), encoding="utf-8")


def _record(folder: Path, name: str, entry: dict[str, str]) -> None:
    """Adds a game's digests to the folder's manifest (read, updated, replaced atomically; a link
    there is refused)."""
    entries = _read_manifest(folder)
    entries[name] = entry
    storage.write_atomic_file(folder / MANIFEST, json.dumps(entries, indent=1, sort_keys=True), fix=CACHE_FIX)


def _read_manifest(folder: Path, pool: GamePool | None = None) -> dict[str, dict[str, str]]:
    """The games recorded in ``folder`` (none before its first game); a damaged manifest raises a
    :class:`GameFileError` naming it and the fix, a link there a ``StorageError``."""
    manifest = folder / MANIFEST
    if manifest.is_symlink():
        raise storage.link_error(manifest)
    if not manifest.exists():
        return {}
    try:
        entries = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        entries = error
    if not isinstance(entries, dict) or not all(isinstance(entry, dict) for entry in entries.values()):
        cause = f"{type(entries).__name__}: {entries}" if isinstance(entries, Exception) else "not a dict of games"
        raise GameFileError(
            f"TextWorld's manifest {manifest} is damaged ({cause}), so no game beside it can be checked: "
            f"delete {folder} and {_rebuild(pool)}"
        )
    return entries


def _rebuild(pool: GamePool | None) -> str:
    return f"run {pool.build_command()}" if pool else "rebuild the games"


def verified_game(path: Path, pool: GamePool | None = None) -> Path:
    """``path`` if it and its ``.json`` are files of the pool's folder (not links) that match the
    manifest's digests; otherwise a :class:`GameFileError` naming the file and the command that
    rebuilds it."""
    rebuild = _rebuild(pool)
    logic = path.with_suffix(".json")
    for needed in (path, logic):
        if needed.is_symlink():  # a game read elsewhere could change under the pool's manifest
            raise GameFileError(
                f"TextWorld game file {needed} is a symbolic link (to {os.readlink(needed)}): a pool's games are "
                f"files of its own folder; delete the link and {rebuild}"
            )
        if not needed.is_file():
            raise GameFileError(
                f"TextWorld game file {needed} not found (a game is a .z8 and its .json, the game's logic): {rebuild}"
            )
    entry = _read_manifest(path.parent, pool).get(path.name)
    if entry is None:
        raise GameFileError(
            f"TextWorld game {path} is not in its folder's {MANIFEST} (a game built elsewhere, or by an "
            f"older torchrl_glam killed before it recorded the game): delete {path.parent} and {rebuild}"
        )
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
    except (ValueError, EnvironmentFilesError, storage.StorageError) as error:  # each says its fix in one line
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
