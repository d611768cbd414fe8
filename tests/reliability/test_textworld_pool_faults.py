"""TextWorld's game pool under a hostile probe: a pool changed in place is refused on resume, nothing
is written through a link, a damaged pool, an unusable cache or a full disk is one line with its
fix (in training and in the builder), killed builds are cleaned, and rebuilt games are byte-identical.

One small pool (3 training games, 1 held-out) is built once; each test that tampers with it works on
a copy."""

import builtins
import errno
import json
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("textworld", reason="the TextWorld environments need the textworld extra")

from reliability_helpers import PYTHON, subprocess_env  # noqa: E402

from torchrl_glam.envs import register_environment, unregister_environment  # noqa: E402
from torchrl_glam.envs.textworld import GamePool, TextWorldText  # noqa: E402
from torchrl_glam.envs.textworld import games as games_module  # noqa: E402

SIZES = {"train_games": 3, "held_out_games": 1}
#: the registered variant the training runs of these tests play (the tiny pool)
NAME = "textworld_pool_faults"
BUILDER = ["--family", "coin_collector", "--train-games", "3", "--held-out-games", "1"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A cache root holding the small pool (built once)."""
    root = tmp_path_factory.mktemp("textworld_cache")
    GamePool.of("coin_collector", cache=str(root / "textworld"), **SIZES).build(progress=False)
    return root


@pytest.fixture
def cache(built, tmp_path, monkeypatch):
    """A copy of the built cache root, chosen by TORCHRL_GLAM_CACHE."""
    root = tmp_path / "cache"
    shutil.copytree(built, root, symlinks=True)
    monkeypatch.setenv("TORCHRL_GLAM_CACHE", str(root))
    return root


def pool_of(root: Path) -> GamePool:
    return GamePool.of("coin_collector", cache=str(root / "textworld"), **SIZES)


def environment(root: Path | None) -> TextWorldText:
    return TextWorldText("coin_collector", cache=str(root / "textworld") if root else None, **SIZES)


def swap_games(pool: GamePool, a: int, b: int) -> None:
    """Rotates two training games in place, files and manifest entries together: the pool still
    verifies, but its indices name other games."""
    folder = pool.folder("train")
    for suffix in (".z8", ".json"):
        first, second, aside = (
            pool.path("train", a).with_suffix(suffix),
            pool.path("train", b).with_suffix(suffix),
            folder / "aside",
        )
        os.replace(first, aside)
        os.replace(second, first)
        os.replace(aside, second)
    manifest = folder / "manifest.json"
    entries = json.loads(manifest.read_text())
    entries[f"game-{a}.z8"], entries[f"game-{b}.z8"] = entries[f"game-{b}.z8"], entries[f"game-{a}.z8"]
    manifest.write_text(json.dumps(entries))


def remove_game(pool: GamePool, seed: int) -> None:
    for suffix in (".z8", ".json"):
        pool.path("train", seed).with_suffix(suffix).unlink()


def train(sac_example, capsys, *args: str) -> tuple[int, str]:
    """A smoke_textworld run on the small pool of $TORCHRL_GLAM_CACHE through the command line: its
    exit code and stderr."""
    register_environment(NAME, lambda: environment(None))
    try:
        code = sac_example.cli(
            ["--preset", "smoke_textworld", "--no-progress", f"env={NAME}", "eval_episodes=2", "log_every=80", *args]
        )
    finally:
        unregister_environment(NAME)
    return code, capsys.readouterr().err


def build_pool(capsys) -> tuple[int, str]:
    """``python -m torchrl_glam.envs.textworld`` on the small pool: its exit code and stderr."""
    try:
        games_module.main(BUILDER)
        code = 0
    except SystemExit as done:
        code = done.code
    return code, capsys.readouterr().err


def one_line(stderr: str) -> str:
    """The last line of ``stderr`` (which holds no traceback)."""
    assert "Traceback" not in stderr, stderr
    return (stderr.strip().splitlines() or [""])[-1]


def refuse_writes_in(monkeypatch, folder: Path, code: int = errno.EROFS) -> None:
    """Simulates a read-only ``folder`` (root writes through chmod): every open for writing, and
    every temporary file or folder, under it fails as the system would."""
    real_open, real_os_open = builtins.open, os.open
    real_mkstemp, real_mkdtemp = tempfile.mkstemp, tempfile.mkdtemp

    def inside(path) -> bool:
        return os.path.abspath(path).startswith(str(folder))

    def refuse(path):
        raise OSError(code, os.strerror(code), str(path))

    def os_open(path, flags, *args, **kwargs):
        if inside(path) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            refuse(path)
        return real_os_open(path, flags, *args, **kwargs)

    def py_open(file, mode="r", *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and inside(file) and set(mode) & set("wax+"):
            refuse(file)
        return real_open(file, mode, *args, **kwargs)

    def temporary(real):
        def make(suffix=None, prefix=None, dir=None, *args, **kwargs):
            if dir is not None and inside(dir):
                refuse(dir)
            return real(suffix, prefix, dir, *args, **kwargs)

        return make

    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(builtins, "open", py_open)
    monkeypatch.setattr(tempfile, "mkstemp", temporary(real_mkstemp))
    monkeypatch.setattr(tempfile, "mkdtemp", temporary(real_mkdtemp))


def fail_the_compiler(monkeypatch, last_words: str) -> None:
    """TextWorld's compiler failing with Inform7's long output on many lines, ``last_words`` after
    the first 300 characters."""
    import textworld.generator

    def compile_game(game, options):
        raise RuntimeError("Inform 7 build failed:\n" + "I7 compiling the story ...\n" * 20 + last_words)

    monkeypatch.setattr(textworld.generator, "compile_game", compile_game)


# ---------------------------------------------------------------- 1. a pool changed in place


def test_a_resume_on_a_pool_changed_in_place_is_refused_in_one_line(cache, sac_example, capsys):
    """Defect 1: a checkpoint names its games by index; rotating two training games (files and
    manifest entries) used to resume silently on other games."""
    run = ["--run-dir", str(cache.parent / "run"), "eval_every=80", "checkpoint_every=80"]
    code, stderr = train(sac_example, capsys, *run, "total_steps=80")
    assert code == 0, stderr
    pool = pool_of(cache)
    swap_games(pool, 0, 1)
    code, stderr = train(sac_example, capsys, *run, "total_steps=160", "--resume")
    line = one_line(stderr)
    assert code == 2, stderr
    assert line.startswith("error: ") and "checkpoint.pt" in line
    assert f"{pool.folder('train')} changed since the checkpoint" in line
    assert "put back the pool the run trained on, or start a new run" in line
    swap_games(pool, 0, 1)  # the pool the run trained on: it resumes
    code, stderr = train(sac_example, capsys, *run, "total_steps=160", "--resume")
    assert code == 0, stderr


def played(root: Path, steps: int = 5):
    """A training env of the pool at ``root`` after ``steps`` steps (mid-episode: max_steps 10)."""
    env = environment(root).make_env(2, seed=3, max_steps=10)
    td = env.reset()
    for _ in range(steps):
        td["action"] = td["action_mask"].float().argmax(-1)
        _, td = env.step_and_maybe_reset(td)
    return env


def test_a_mid_episode_state_on_a_changed_pool_is_refused_for_that_cause(cache):
    from torchrl_glam.envs.protocol import EnvironmentStateError

    state = played(cache).state_dict()
    swap_games(pool_of(cache), 0, 2)
    with pytest.raises(EnvironmentStateError, match=r"changed since the checkpoint") as refused:
        environment(cache).make_env(2, seed=3, max_steps=10).load_state_dict(state)
    assert isinstance(refused.value, ValueError)  # what TrainingRun.restore catches from a piece


def test_a_held_out_game_changed_is_refused_too(cache):
    from torchrl_glam.envs.protocol import EnvironmentStateError

    state = played(cache).state_dict()
    pool = pool_of(cache)
    manifest = pool.folder("held_out") / "manifest.json"
    entries = json.loads(manifest.read_text())
    entries["game-1000000.z8"]["uuid"] += "-another"  # another game in the held-out seed's place
    manifest.write_text(json.dumps(entries))
    with pytest.raises(EnvironmentStateError, match=r"held_out games of the TextWorld pool .* changed"):
        environment(cache).make_env(2, seed=3, max_steps=10).load_state_dict(state)


def test_a_replayed_command_that_is_not_admissible_names_the_game_and_the_command(cache):
    from torchrl_glam.envs.protocol import EnvironmentStateError

    env = played(cache)
    state = env.state_dict()
    state["actions"][1] = ["fly to the moon"]
    game = env.games[env._episodes[1][0]]
    with pytest.raises(
        EnvironmentStateError, match=rf"'fly to the moon' .*not admissible in the TextWorld game {game}"
    ):
        environment(cache).make_env(2, seed=3, max_steps=10).load_state_dict(state)


def test_a_rebuilt_game_and_an_old_checkpoint_still_load(cache):
    env = played(cache)
    state = env.state_dict()
    pool = pool_of(cache)
    remove_game(pool, 1)  # deleted (damaged) and rebuilt: the same game
    pool.build(progress=False)
    again = environment(cache).make_env(2, seed=3, max_steps=10)
    again.load_state_dict(state)
    assert (again.observation() == env.observation()).all()
    del state["pool"]  # a checkpoint written before the pool was recorded
    older = environment(cache).make_env(2, seed=3, max_steps=10)
    with pytest.warns(UserWarning, match="records no TextWorld pool"):
        older.load_state_dict(state)
    assert (older.observation() == env.observation()).all()


# ---------------------------------------------------------------- 2. nothing written through a link


def test_a_planted_lock_link_is_refused_and_nothing_is_created_outside(cache, tmp_path):
    pool = pool_of(cache)
    outside = tmp_path / "outside" / "planted"
    outside.parent.mkdir()
    lock = pool.folder("train") / ".lock"
    lock.unlink(missing_ok=True)
    lock.symlink_to(outside)
    remove_game(pool, 2)
    with pytest.raises(Exception, match=r"\.lock is a symbolic link") as refused:
        pool.build(progress=False)
    assert type(refused.value).__name__ == "StorageError"
    assert not outside.exists()


@pytest.mark.parametrize("planted", ["manifest.json", "game-2.z8"])
def test_a_file_the_pool_writes_refuses_a_link(cache, tmp_path, planted):
    pool = pool_of(cache)
    folder = pool.folder("train")
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / planted
    if planted == "manifest.json":
        shutil.copy(folder / planted, target)
    before = target.read_bytes() if target.exists() else None
    remove_game(pool, 2)
    (folder / planted).unlink(missing_ok=True)
    (folder / planted).symlink_to(target)
    with pytest.raises(Exception, match=rf"{planted} is a symbolic link") as refused:
        pool.build(progress=False)
    assert type(refused.value).__name__ == "StorageError"
    assert (target.read_bytes() if target.exists() else None) == before
    assert (folder / planted).is_symlink()  # neither followed nor replaced


# ---------------------------------------------------------------- 3. one line, with the fix


def damage(case: str, root: Path, monkeypatch) -> str:
    """Damages the cache at ``root`` as ``case`` says; what the refusal must say."""
    pool = pool_of(root)
    folder = pool.folder("train")
    if case == "damaged game":
        data = bytearray(pool.path("train", 1).read_bytes())
        data[1000] ^= 0xFF
        pool.path("train", 1).write_bytes(bytes(data))
        return f"{pool.path('train', 1)} is damaged"
    if case == "truncated manifest":
        manifest = folder / "manifest.json"
        manifest.write_text(manifest.read_text()[:100])
        return f"{manifest} is damaged"
    if case == "game replaced by a link":
        aside = root.parent / "elsewhere.z8"
        shutil.copy(pool.path("train", 0), aside)
        pool.path("train", 1).unlink()
        pool.path("train", 1).symlink_to(aside)
        return f"{pool.path('train', 1)} is a symbolic link"
    if case == "cache is a file":
        shutil.rmtree(root)
        root.write_text("not a folder")
        return f"the cache {root} is a file"
    if case == "read-only cache missing a game":
        remove_game(pool, 2)
        refuse_writes_in(monkeypatch, folder)
        return f"cannot write in {folder} (Read-only file system)"
    if case == "full disk":
        remove_game(pool, 2)
        fail_the_compiler(monkeypatch, "No space left on device")
        return f"disk full at {folder}"
    if case == "compiler fails":
        remove_game(pool, 2)
        fail_the_compiler(monkeypatch, "Problem: the story is too large")
        return "game with seed 2"
    raise AssertionError(case)


CASES = [
    "damaged game",
    "truncated manifest",
    "game replaced by a link",
    "cache is a file",
    "read-only cache missing a game",
    "full disk",
    "compiler fails",
]
#: the fix each refusal ends with
FIXES = {
    "damaged game": "python -m torchrl_glam.envs.textworld",
    "truncated manifest": "python -m torchrl_glam.envs.textworld",
    "game replaced by a link": "python -m torchrl_glam.envs.textworld",
    "cache is a file": "TORCHRL_GLAM_CACHE",
    "read-only cache missing a game": "TORCHRL_GLAM_CACHE",
    "full disk": "TORCHRL_GLAM_CACHE",
    "compiler fails": "try other settings",
}


@pytest.mark.parametrize("case", CASES)
def test_training_refuses_a_broken_pool_or_cache_in_one_line(case, cache, tmp_path, sac_example, capsys, monkeypatch):
    said = damage(case, cache, monkeypatch)
    code, stderr = train(sac_example, capsys, "--run-dir", str(tmp_path / "run"), "total_steps=16")
    line = one_line(stderr)
    assert code == 2 and line.startswith("error: ") and said in line and FIXES[case] in line, stderr


@pytest.mark.parametrize("case", CASES)
def test_the_builder_refuses_a_broken_pool_or_cache_in_one_line(case, cache, capsys, monkeypatch):
    said = damage(case, cache, monkeypatch)
    code, stderr = build_pool(capsys)
    line = one_line(stderr)
    assert code == 2 and line.startswith("error: ") and said in line and FIXES[case] in line, stderr


def test_the_builder_reads_the_manifest_before_building_anything(cache, capsys):
    pool = pool_of(cache)
    folder = pool.folder("train")
    manifest = folder / "manifest.json"
    manifest.write_text(manifest.read_text()[:100])
    remove_game(pool, 2)
    code, stderr = build_pool(capsys)
    line = one_line(stderr)
    assert code == 2 and f"{manifest} is damaged" in line and f"delete {folder}" in line, stderr
    assert not pool.path("train", 2).exists() and not list(folder.glob(".game-*"))  # nothing built


def test_a_read_only_cache_with_every_game_still_plays(cache, monkeypatch):
    """Only a build writes: a complete pool on a read-only cache needs no lock."""
    refuse_writes_in(monkeypatch, pool_of(cache).folder("train"))
    env = environment(None).make_env(1, seed=0)
    assert env.reset()["action_mask"].any()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in a read-only folder (the simulated case runs)")
def test_a_really_read_only_cache_missing_a_game_is_one_line(cache, capsys):
    pool = pool_of(cache)
    remove_game(pool, 2)
    folder = pool.folder("train")
    folder.chmod(0o555)
    try:
        code, stderr = build_pool(capsys)
    finally:
        folder.chmod(0o755)
    assert code == 2 and f"cannot write in {folder}" in one_line(stderr)


# ---------------------------------------------------------------- 4. killed builds, rebuilt games


def test_a_build_killed_mid_game_leaves_no_staging_after_the_next_build(cache):
    pool = pool_of(cache)
    remove_game(pool, 2)
    code = (
        "import os, signal, sys\n"
        "import textworld.generator\n"
        "from torchrl_glam.envs.textworld.games import GamePool\n"
        "textworld.generator.compile_game = lambda game, options: os.kill(os.getpid(), signal.SIGKILL)\n"
        "GamePool.of('coin_collector', cache=sys.argv[1], train_games=3, held_out_games=1).build(progress=False)\n"
    )
    killed = subprocess.run([PYTHON, "-c", code, str(cache / "textworld")], env=subprocess_env(), capture_output=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    folder = pool.folder("train")
    assert list(folder.glob(".game-2-*"))  # the probe's shape: a kill -9 inside a build
    pool.build(progress=False)
    assert not list(folder.glob(".game-*")) and pool.games("train")


def test_a_game_rebuilt_in_another_process_is_byte_identical(tmp_path):
    """TextWorld writes a set (the grammar's names_to_exclude) in the order of the process's hash
    seed: the .json differed between builds, the .z8 did not."""
    code = (
        "import sys\nfrom pathlib import Path\n"
        "from torchrl_glam.envs.textworld.games import build_game\n"
        "build_game('tw-coin_collector', {'level': 6}, 0, Path(sys.argv[1]))\n"
    )
    for hash_seed in ("1", "2"):
        done = subprocess.run(
            [PYTHON, "-c", code, str(tmp_path / hash_seed)],
            env=subprocess_env(PYTHONHASHSEED=hash_seed),
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
    for suffix in (".z8", ".json"):
        assert (tmp_path / "1" / f"game-0{suffix}").read_bytes() == (tmp_path / "2" / f"game-0{suffix}").read_bytes()
