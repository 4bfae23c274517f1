"""Where sign-ins live at rest: the system keyring when it has a backend, else a 0600 file.

One record per server name: its tokens, the client identity the authorization server registered
(DCR), and the discovered metadata (so a restarted main refreshes at the right token endpoint
without discovering again). A record made for another URL is ignored: the tokens were issued for
that resource. Nothing here logs a value.

`ELICITRON_TOKEN_STORE` = `keyring` or `file` forces a backend; by default the keyring is used
when one is available (not keyring's "fail" or null backends), else the file
`<user data dir>/elicitron/oauth-tokens.json`.
"""

import asyncio
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Literal, Protocol

import platformdirs
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken, ProtectedResourceMetadata
from pydantic import ValidationError

from main_process.private_files import write_private
from shared.errors import TokenStoreError

logger = logging.getLogger(__name__)

KEYRING_SERVICE = "elicitron"
StoreKind = Literal["keyring", "file"]


class _Backend(Protocol):
    kind: StoreKind

    def load(self, server: str) -> dict[str, Any] | None: ...

    def save(self, server: str, record: dict[str, Any]) -> None: ...

    def delete(self, server: str) -> None: ...


class FileBackend:
    """All records in one JSON file, 0600 in a 0700 directory, replaced whole on every write."""

    kind: StoreKind = "file"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()  # servers save from worker threads; each save re-reads the file

    def _read(self) -> dict[str, Any]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise TokenStoreError(f"cannot read {self.path}: {exc.strerror or exc}") from exc
        try:
            data = json.loads(text)
        except ValueError:
            logger.warning("%s is not valid JSON; starting with no stored sign-ins", self.path)
            return {}
        return data if isinstance(data, dict) else {}

    def load(self, server: str) -> dict[str, Any] | None:
        record = self._read().get(server)
        return record if isinstance(record, dict) else None

    def save(self, server: str, record: dict[str, Any]) -> None:
        with self._lock:
            data = self._read()
            data[server] = record
            self._write(data)

    def delete(self, server: str) -> None:
        with self._lock:
            data = self._read()
            if data.pop(server, None) is not None:
                self._write(data)

    def _write(self, data: dict[str, Any]) -> None:
        # Write a sibling then rename: a crash mid-write never leaves half a file of secrets.
        partial = self.path.with_name(self.path.name + ".partial")
        try:
            write_private(partial, json.dumps(data))
            os.replace(partial, self.path)
        except OSError as exc:
            raise TokenStoreError(f"cannot write {self.path}: {exc.strerror or exc}") from exc


class KeyringBackend:
    """One keyring entry per server (service "elicitron", user "oauth:<server>")."""

    kind: StoreKind = "keyring"

    def __init__(self, keyring_module: Any) -> None:
        self._keyring = keyring_module

    def load(self, server: str) -> dict[str, Any] | None:
        try:
            text = self._keyring.get_password(KEYRING_SERVICE, f"oauth:{server}")
        except self._keyring.errors.KeyringError as exc:
            raise TokenStoreError(f"the keyring refused to read: {exc}") from exc
        if not text:
            return None
        try:
            record = json.loads(text)
        except ValueError:
            return None
        return record if isinstance(record, dict) else None

    def save(self, server: str, record: dict[str, Any]) -> None:
        try:
            self._keyring.set_password(KEYRING_SERVICE, f"oauth:{server}", json.dumps(record))
        except self._keyring.errors.KeyringError as exc:
            raise TokenStoreError(f"the keyring refused to store: {exc}") from exc

    def delete(self, server: str) -> None:
        try:
            self._keyring.delete_password(KEYRING_SERVICE, f"oauth:{server}")
        except self._keyring.errors.PasswordDeleteError:
            pass  # nothing stored
        except self._keyring.errors.KeyringError as exc:
            raise TokenStoreError(f"the keyring refused to delete: {exc}") from exc


def default_token_file() -> Path:
    return Path(platformdirs.user_data_dir("elicitron")) / "oauth-tokens.json"


def choose_backend(token_file: Path | None = None) -> _Backend:
    """The keyring if it has a usable backend (or ELICITRON_TOKEN_STORE=keyring), else the file."""
    wanted = os.environ.get("ELICITRON_TOKEN_STORE", "")
    file_backend = FileBackend(token_file or default_token_file())
    if wanted == "file":
        return file_backend
    try:
        import keyring
        import keyring.errors
    except ImportError:
        if wanted == "keyring":
            raise TokenStoreError("ELICITRON_TOKEN_STORE=keyring, but the keyring package is not installed") from None
        return file_backend
    backend = keyring.get_keyring()
    # keyring's "fail" and "null" backends have priority 0 or below: no real store behind them.
    usable = getattr(backend, "priority", 0) > 0
    if wanted == "keyring" or usable:
        return KeyringBackend(keyring)
    return file_backend


class TokenStore:
    """Sign-in records for every server, on one backend; blocking calls run off the event loop."""

    def __init__(self, backend: _Backend | None = None) -> None:
        self.backend = backend or choose_backend()

    @property
    def kind(self) -> StoreKind:
        return self.backend.kind

    async def load(self, server: str, resource: str) -> dict[str, Any]:
        record = await asyncio.to_thread(self.backend.load, server)
        if record is None or record.get("resource") != resource:
            return {}
        return record

    async def update(self, server: str, resource: str, **fields: Any) -> None:
        """Merge `fields` into the server's record (None removes a field)."""
        record = await self.load(server, resource)
        record["resource"] = resource
        for key, value in fields.items():
            if value is None:
                record.pop(key, None)
            else:
                record[key] = value
        await asyncio.to_thread(self.backend.save, server, record)

    async def forget(self, server: str) -> None:
        await asyncio.to_thread(self.backend.delete, server)


class ServerTokens:
    """The SDK's `TokenStorage` for one server, on a `TokenStore`. A pre-registered client from
    config (`fixed_client`) always wins over a stored registration."""

    def __init__(self, store: TokenStore, server: str, resource: str,
                 fixed_client: OAuthClientInformationFull | None = None) -> None:
        self.store = store
        self.server = server
        self.resource = resource
        self.fixed_client = fixed_client

    async def record(self) -> dict[str, Any]:
        return await self.store.load(self.server, self.resource)

    async def get_tokens(self) -> OAuthToken | None:
        stored = (await self.record()).get("tokens")
        return _parse(OAuthToken, stored)

    async def set_tokens(self, tokens: OAuthToken) -> None:
        await self.store.update(self.server, self.resource, tokens=tokens.model_dump(mode="json", exclude_none=True),
                                obtained_at=time.time())

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        if self.fixed_client is not None:
            return self.fixed_client
        return _parse(OAuthClientInformationFull, (await self.record()).get("client"))

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if self.fixed_client is not None:
            return
        await self.store.update(self.server, self.resource,
                                client=client_info.model_dump(mode="json", exclude_none=True))

    async def get_metadata(self) -> tuple[ProtectedResourceMetadata | None, OAuthMetadata | None]:
        record = await self.record()
        return (_parse(ProtectedResourceMetadata, record.get("protected_resource")),
                _parse(OAuthMetadata, record.get("authorization_server")))

    async def set_metadata(self, prm: ProtectedResourceMetadata | None, asm: OAuthMetadata | None) -> None:
        await self.store.update(
            self.server, self.resource,
            protected_resource=prm.model_dump(mode="json", exclude_none=True) if prm else None,
            authorization_server=asm.model_dump(mode="json", exclude_none=True) if asm else None)

    async def get_allowed_origins(self) -> list[str]:
        """Token or registration origins outside the issuer's that the user allowed on a card."""
        allowed = (await self.record()).get("allowed_origins")
        return [o for o in allowed if isinstance(o, str)] if isinstance(allowed, list) else []

    async def set_allowed_origins(self, origins: list[str]) -> None:
        await self.store.update(self.server, self.resource, allowed_origins=origins or None)

    async def clear_tokens(self) -> None:
        await self.store.update(self.server, self.resource, tokens=None, obtained_at=None)


def _parse[T](model: type[T], value: Any) -> T | None:
    if not isinstance(value, dict):
        return None
    try:
        return model.model_validate(value)  # type: ignore[attr-defined,no-any-return]
    except ValidationError:
        return None


_shared_store: TokenStore | None = None


def shared_store() -> TokenStore:
    """The one store of this main process, made on first use (the backend is chosen once)."""
    global _shared_store
    if _shared_store is None:
        _shared_store = TokenStore()
    return _shared_store
