"""Which event loop main and serve pick (`shared.event_loop`): uvloop by default, ELICITRON_LOOP to choose."""

import asyncio
import sys

import pytest
import uvloop

from shared.errors import ConfigError
from shared.event_loop import describe, loop_factory


@pytest.mark.parametrize("value", [None, "", "uvloop", " UVLOOP "])
def test_uvloop_is_the_default_and_can_be_asked_for(value: str | None) -> None:
    environ = {} if value is None else {"ELICITRON_LOOP": value}
    factory = loop_factory(environ)
    assert factory is uvloop.new_event_loop
    loop = factory()
    try:
        assert describe(loop) == f"uvloop {uvloop.__version__}"
    finally:
        loop.close()


def test_asyncio_picks_the_standard_library_loop() -> None:
    assert loop_factory({"ELICITRON_LOOP": "asyncio"}) is None
    loop = asyncio.new_event_loop()
    try:
        assert describe(loop) == "asyncio"
    finally:
        loop.close()


def test_an_unknown_loop_is_a_config_error_naming_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"ELICITRON_LOOP must be one of uvloop, asyncio, not 'trio'"):
        loop_factory({"ELICITRON_LOOP": "trio"})


def test_without_uvloop_main_falls_back_unless_uvloop_was_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # what `import uvloop` sees on Windows
    assert loop_factory({}) is None
    with pytest.raises(ConfigError, match="ELICITRON_LOOP=uvloop, but uvloop is not installed"):
        loop_factory({"ELICITRON_LOOP": "uvloop"})
