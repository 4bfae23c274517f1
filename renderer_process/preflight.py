"""Before Qt loads: is there a display, and are the system libraries Qt needs on this machine?
Never imports Qt.

Without a display (over SSH, a session without X or Wayland) Qt aborts with a message about a
missing "xcb-cursor0" that sends people installing libraries they have. So first: when Qt is
going to look for a display server (QT_QPA_PLATFORM unset: DISPLAY or WAYLAND_DISPLAY; `xcb`:
DISPLAY), one must be set; platforms that need none (offscreen, minimal, vnc, eglfs, ...) and
wayland (it has a default socket) are not checked. Without one, one line says so and how to go on
without a window here (`elicitron main`, or a window paired from another machine: `elicitron
pair`), named as the command is typed here (`.venv/bin/elicitron` when `elicitron` is not on PATH),
exit code 2.

Without the system libraries Qt aborts (exit 134) with a message about its "xcb" platform plugin
that does not say what to install. This check comes next and, on Linux, names the missing
libraries with the apt and dnf commands that install them, in one line, exit code 2. The
libraries every Qt GUI needs are checked always; the X11 (xcb) ones when Qt is going to use xcb:
QT_QPA_PLATFORM unset or starting with xcb, DISPLAY set, and not a Wayland session (there Qt
picks wayland itself).

For tests, `_ELICITRON_PREFLIGHT_SONAMES="libxcb-cursor.so.0=libnot-there.so.0,..."` makes the
check look for another file name instead, so one library can be made to look missing.
"""

import ctypes
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

EXIT_MISSING = 2


def no_display(command: str = "elicitron") -> str:
    """The one line for a machine without a display; `command` is how `elicitron` is typed here
    (shared/command_name.py: after `scripts/launch` it is `.venv/bin/elicitron`, not on PATH)."""
    return (
        "elicitron: the window cannot start: there is no display (neither DISPLAY nor WAYLAND_DISPLAY is set; "
        f"over SSH?). Run main without a window: `{command} main` (or `{command} launch --no-window`); to answer "
        "from a machine with a display, start main with --listen tcp://0.0.0.0:7777 and pair a window there: "
        f"`{command} pair --output laptop.json`"
    )


@dataclass(frozen=True)
class Library:
    soname: str
    debian: str  # apt package
    fedora: str  # dnf package


CORE = (  # what QtGui / QtWidgets load on any platform, offscreen included
    Library("libGL.so.1", "libgl1", "libglvnd-glx"),
    Library("libEGL.so.1", "libegl1", "libglvnd-egl"),
    Library("libfontconfig.so.1", "libfontconfig1", "fontconfig"),
    Library("libfreetype.so.6", "libfreetype6", "freetype"),
    Library("libxkbcommon.so.0", "libxkbcommon0", "libxkbcommon"),
    Library("libdbus-1.so.3", "libdbus-1-3", "dbus-libs"),
    Library("libglib-2.0.so.0", "libglib2.0-0", "glib2"),
)

XCB = (  # what Qt's xcb platform plugin (libqxcb.so, libQt6XcbQpa) loads
    Library("libxcb.so.1", "libxcb1", "libxcb"),
    Library("libX11-xcb.so.1", "libx11-xcb1", "libX11-xcb"),
    Library("libxcb-cursor.so.0", "libxcb-cursor0", "xcb-util-cursor"),
    Library("libxcb-icccm.so.4", "libxcb-icccm4", "xcb-util-wm"),
    Library("libxcb-image.so.0", "libxcb-image0", "xcb-util-image"),
    Library("libxcb-keysyms.so.1", "libxcb-keysyms1", "xcb-util-keysyms"),
    Library("libxcb-randr.so.0", "libxcb-randr0", "libxcb"),
    Library("libxcb-render-util.so.0", "libxcb-render-util0", "xcb-util-renderutil"),
    Library("libxcb-render.so.0", "libxcb-render0", "libxcb"),
    Library("libxcb-shape.so.0", "libxcb-shape0", "libxcb"),
    Library("libxcb-shm.so.0", "libxcb-shm0", "libxcb"),
    Library("libxcb-sync.so.1", "libxcb-sync1", "libxcb"),
    Library("libxcb-util.so.1", "libxcb-util1", "xcb-util"),
    Library("libxcb-xfixes.so.0", "libxcb-xfixes0", "libxcb"),
    Library("libxcb-xkb.so.1", "libxcb-xkb1", "libxcb"),
    Library("libxkbcommon-x11.so.0", "libxkbcommon-x11-0", "libxkbcommon-x11"),
)


def _platform(env: Mapping[str, str]) -> str:
    """The first platform QT_QPA_PLATFORM names ("" when unset), without its options."""
    return env.get("QT_QPA_PLATFORM", "").split(";")[0].split(":")[0].strip()


def lacks_display(env: Mapping[str, str]) -> bool:
    """Whether Qt will look for a display server here and find none."""
    if sys.platform in ("darwin", "win32"):
        return False
    platform = _platform(env)
    if platform not in ("", "xcb"):  # offscreen, vnc, ... draw on their own; wayland has a default socket
        return False
    if platform == "xcb":
        return not env.get("DISPLAY")
    return not env.get("DISPLAY") and not env.get("WAYLAND_DISPLAY")


def uses_xcb(env: Mapping[str, str]) -> bool:
    """Whether Qt is going to use its xcb (X11) platform plugin."""
    first = _platform(env)
    if first and first != "xcb":
        return False
    if not env.get("DISPLAY"):
        return False
    wayland_session = bool(env.get("WAYLAND_DISPLAY")) or env.get("XDG_SESSION_TYPE") == "wayland"
    return first == "xcb" or not wayland_session


def missing_libraries(env: Mapping[str, str]) -> list[Library]:
    """The libraries Qt will need here that the dynamic loader cannot find."""
    if not sys.platform.startswith("linux"):
        return []
    needed = CORE + (XCB if uses_xcb(env) else ())
    renamed = _renames(env.get("_ELICITRON_PREFLIGHT_SONAMES", ""))
    return [lib for lib in needed if not _loadable(renamed.get(lib.soname, lib.soname))]


def message(missing: list[Library]) -> str:
    """One line: what is missing and the commands that install it."""
    debian = " ".join(dict.fromkeys(lib.debian for lib in missing))
    fedora = " ".join(dict.fromkeys(lib.fedora for lib in missing))
    names = ", ".join(lib.soname for lib in missing)
    return (
        f"elicitron: the window cannot start: Qt needs system libraries that are missing ({names}). "
        f"Install them with: sudo apt install {debian}  (Debian, Ubuntu)  "
        f"or: sudo dnf install {fedora}  (Fedora)"
    )


def check(env: Mapping[str, str] | None = None) -> int:
    """0 if Qt can start here; else print the one line to stderr and return EXIT_MISSING."""
    env = os.environ if env is None else env
    if lacks_display(env):
        from shared.command_name import elicitron_command

        print(no_display(elicitron_command()), file=sys.stderr, flush=True)
        return EXIT_MISSING
    missing = missing_libraries(env)
    if not missing:
        return 0
    print(message(missing), file=sys.stderr, flush=True)
    return EXIT_MISSING


def _loadable(soname: str) -> bool:
    try:
        ctypes.CDLL(soname)
    except OSError:
        return False
    return True


def _renames(spec: str) -> dict[str, str]:
    pairs = (item.split("=", 1) for item in spec.split(",") if "=" in item)
    return {name.strip(): other.strip() for name, other in pairs}
