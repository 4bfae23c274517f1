"""Which installed packages differ from uv.lock: one line for the canary (`scripts/test --latest`).

    python scripts/lock_diff.py uv.lock FREEZE_FILE

FREEZE_FILE holds `name==version` lines (`uv pip freeze`). Prints e.g. "2 packages differ from
uv.lock: msgspec 0.24.0 (lock 0.23.0), pyzmq 27.4.0 (lock 27.3.0)".
"""

import re
import sys
import tomllib
from pathlib import Path


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_versions(lock_text: str) -> dict[str, set[str]]:
    """Every version the lock holds per package (a package may be locked apart per Python)."""
    versions: dict[str, set[str]] = {}
    for package in tomllib.loads(lock_text).get("package", []):
        if "version" in package:
            versions.setdefault(_normal(package["name"]), set()).add(package["version"])
    return versions


def installed_versions(freeze_text: str) -> dict[str, str]:
    installed = {}
    for line in freeze_text.splitlines():
        name, sep, version = line.strip().partition("==")
        if sep:
            installed[_normal(name)] = version
    return installed


def describe(locked: dict[str, set[str]], installed: dict[str, str]) -> str:
    differ = [f"{name} {version} (lock {', '.join(sorted(locked[name]))})"
              for name, version in sorted(installed.items()) if name in locked and version not in locked[name]]
    extra = [f"{name} {version}" for name, version in sorted(installed.items()) if name not in locked]
    parts = []
    if differ:
        parts.append(f"{len(differ)} package{'s differ' if len(differ) != 1 else ' differs'} from uv.lock: "
                     + ", ".join(differ))
    if extra:
        parts.append("not in uv.lock: " + ", ".join(extra))
    return "; ".join(parts) if parts else "every package is at its version in uv.lock"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    lock, freeze = (Path(arg) for arg in argv)
    print(describe(locked_versions(lock.read_text()), installed_versions(freeze.read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
