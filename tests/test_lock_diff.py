"""The canary's report (`scripts/test --latest`) names every package whose version is not the lock's."""

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _lock_diff() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lock_diff", ROOT / "scripts" / "lock_diff.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LOCK = """
version = 1
[[package]]
name = "msgspec"
version = "0.23.0"
[[package]]
name = "PySide6_Essentials"
version = "6.12.0"
[[package]]
name = "numpy"
version = "2.3.0"
[[package]]
name = "numpy"
version = "2.4.0"
[[package]]
name = "elicitron"
source = { editable = "." }
"""


def test_same_versions_say_so() -> None:
    diff = _lock_diff()
    freeze = "msgspec==0.23.0\npyside6-essentials==6.12.0\nnumpy==2.4.0\n"
    assert diff.describe(diff.locked_versions(LOCK), diff.installed_versions(freeze)) == (
        "every package is at its version in uv.lock")


def test_a_bumped_package_is_named_with_both_versions() -> None:
    diff = _lock_diff()
    freeze = "msgspec==0.24.1\npyside6_essentials==6.12.0\nnumpy==2.3.0\nnewcomer==1.0\n"
    assert diff.describe(diff.locked_versions(LOCK), diff.installed_versions(freeze)) == (
        "1 package differs from uv.lock: msgspec 0.24.1 (lock 0.23.0); not in uv.lock: newcomer 1.0")


def test_the_repository_lock_holds_every_dependency_of_the_test_extra() -> None:
    diff = _lock_diff()
    locked = diff.locked_versions((ROOT / "uv.lock").read_text())
    for name in ("mcp", "pyzmq", "msgspec", "pyside6-essentials", "uuid6", "platformdirs", "keyring",
                 "uvloop", "pytest", "pytest-qt", "mypy", "ruff"):
        assert locked.get(name), f"{name} is not in uv.lock: run scripts/lock"


def test_main_prints_usage_without_two_files(capsys: pytest.CaptureFixture[str]) -> None:
    assert _lock_diff().main([]) == 2
    assert "FREEZE_FILE" in capsys.readouterr().err
