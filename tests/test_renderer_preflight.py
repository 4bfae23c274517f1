"""The window's preflight: a missing system library is one clear line and exit code 2, never Qt's abort."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from renderer_process.preflight import XCB, lacks_display, missing_libraries, uses_xcb

ROOT = Path(__file__).resolve().parent.parent


def x11_env(**extra: str) -> dict[str, str]:
    """A desktop session on X11: DISPLAY set, no QT_QPA_PLATFORM, no Wayland."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE")}
    return {**env, "DISPLAY": ":99", "PYTHONPATH": str(ROOT), **extra}


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["--connection", "/nonexistent/c.json", "--name", "w"], ["--preflight"]])
def test_one_missing_library_is_one_line_and_exit_2(tmp_path: Path, argv: list[str]) -> None:
    env = x11_env(_ELICITRON_PREFLIGHT_SONAMES="libxcb-cursor.so.0=libxcb-cursor-not-here.so.0")
    done = subprocess.run([sys.executable, "-m", "renderer_process", *argv], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr  # the one line, and nothing from Qt
    assert "libxcb-cursor.so.0" in lines[0]
    assert "sudo apt install libxcb-cursor0" in lines[0] and "sudo dnf install xcb-util-cursor" in lines[0]


@pytest.mark.slow
def test_the_real_entry_starts_when_nothing_is_missing(tmp_path: Path) -> None:
    env = {**x11_env(), "QT_QPA_PLATFORM": "offscreen"}  # no xcb: only the libraries every Qt GUI needs
    done = subprocess.run([sys.executable, "-m", "renderer_process", "--preflight"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stderr) == (0, "")


@pytest.mark.parametrize(
    ("env", "xcb"),
    [
        ({"DISPLAY": ":0"}, True),
        ({"DISPLAY": ":0", "QT_QPA_PLATFORM": "xcb"}, True),
        ({"DISPLAY": ":0", "QT_QPA_PLATFORM": "xcb:nograb"}, True),
        ({"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"}, False),
        ({"DISPLAY": ":0", "QT_QPA_PLATFORM": "wayland;xcb"}, False),
        ({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"}, False),  # Qt picks wayland there
        ({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0", "QT_QPA_PLATFORM": "xcb"}, True),
        ({}, False),
    ],
)
def test_xcb_libraries_are_checked_only_when_qt_will_use_xcb(env: dict[str, str], xcb: bool) -> None:
    assert uses_xcb(env) is xcb
    everything_missing = ",".join(f"{lib.soname}=libnot-here-{i}.so" for i, lib in enumerate(XCB))
    missing = missing_libraries({**env, "_ELICITRON_PREFLIGHT_SONAMES": everything_missing})
    assert bool(missing) is xcb


@pytest.mark.parametrize(
    ("env", "lacks"),
    [
        ({}, True),  # over SSH: Qt would try xcb and abort about xcb-cursor0
        ({"QT_QPA_PLATFORM": "xcb"}, True),
        ({"QT_QPA_PLATFORM": "xcb", "WAYLAND_DISPLAY": "wayland-0"}, True),
        ({"DISPLAY": ":0"}, False),
        ({"WAYLAND_DISPLAY": "wayland-0"}, False),
        ({"QT_QPA_PLATFORM": "offscreen"}, False),
        ({"QT_QPA_PLATFORM": "minimal"}, False),
        ({"QT_QPA_PLATFORM": "vnc:size=800x600"}, False),
        ({"QT_QPA_PLATFORM": "wayland"}, False),  # wayland has a default socket
    ],
)
def test_no_display_is_found_unless_the_platform_needs_none(env: dict[str, str], lacks: bool) -> None:
    assert lacks_display(env) is lacks


@pytest.mark.slow
def test_no_display_is_one_line_with_what_to_do_and_exit_2(tmp_path: Path) -> None:
    env = {k: v for k, v in x11_env().items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    done = subprocess.run([sys.executable, "-m", "renderer_process", "--preflight"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert "no display" in line and " main`" in line and " pair --output" in line, line


def named_command(line: str, verb: str) -> list[str]:
    """The command a message names in backquotes before `verb` (`.venv/bin/elicitron main` -> that path)."""
    quoted = [shlex.split(text) for text in re.findall(r"`([^`]*)`", line)]
    found = [words[:words.index(verb)] for words in quoted if verb in words[1:]]
    assert found, f"no `... {verb}` in {line!r}"
    return found[0]


@pytest.mark.slow
@pytest.mark.parametrize("on_path", [False, True], ids=["venv-not-on-PATH", "venv-on-PATH"])
def test_no_display_names_the_command_as_it_is_typed_here(tmp_path: Path, on_path: bool) -> None:
    """After `scripts/launch` nothing called `elicitron` is on PATH: the line says `.venv/bin/elicitron
    main` (from the checkout) and that command runs; with the venv on PATH it says `elicitron main`."""
    venv_bin = Path(sys.executable).parent
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p and Path(p).resolve() != venv_bin.resolve() and not (Path(p) / "elicitron").exists())
    if on_path:
        path = f"{venv_bin}{os.pathsep}{path}"
    env = {k: v for k, v in x11_env(PATH=path).items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    done = subprocess.run([sys.executable, "-m", "renderer_process", "--preflight"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    [line] = done.stderr.splitlines()
    command = named_command(line, "main")
    assert named_command(line, "pair") == command
    if on_path:
        assert command == ["elicitron"], line
    else:
        assert command == [".venv/bin/elicitron"] or command[0] == str(venv_bin / "elicitron"), line
    version = subprocess.run([*command, "--version"], env=env, cwd=ROOT, capture_output=True, text=True,
                             timeout=60, check=False)
    assert version.returncode == 0 and version.stdout.startswith("elicitron "), version.stderr
