"""The `"oauth"` object of a `url` server in the config (no `mcp` import: the CLI reads configs).

    "oauth": {"clientId": "…", "clientSecret": "…", "tokenEndpointAuthMethod": "client_secret_basic",
              "clientMetadataUrl": "https://…/client.json", "scopes": ["repo", "read:org"]}

Every key is optional: without `clientId` main uses a Client ID Metadata Document when
`clientMetadataUrl` is set and the authorization server supports it, else Dynamic Client
Registration. `"oauth": false` turns sign-in off for a server. A server with no `"oauth"` key signs
in when it answers 401, unless its `headers` already carry an `Authorization` (a static token).
"""

from dataclasses import dataclass, field
from typing import Any

from shared.errors import ConfigError

AUTH_METHODS = ("client_secret_basic", "client_secret_post", "none")
_KEYS = {"clientId", "clientSecret", "clientMetadataUrl", "scopes", "tokenEndpointAuthMethod"}


@dataclass(frozen=True, kw_only=True)
class OAuthSettings:
    enabled: bool = True
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)  # never in a log line
    client_metadata_url: str | None = None
    scopes: tuple[str, ...] = ()  # empty: what the server asks for
    token_endpoint_auth_method: str | None = None  # None: basic with a secret, none without

    @property
    def auth_method(self) -> str:
        if self.token_endpoint_auth_method:
            return self.token_endpoint_auth_method
        return "client_secret_basic" if self.client_secret else "none"


def parse_oauth(where: str, entry: dict[str, Any]) -> OAuthSettings:
    """The settings of one `url` entry; raises ConfigError naming the bad key."""
    value = entry.get("oauth")
    if value is None:
        headers = entry.get("headers") or {}
        static = isinstance(headers, dict) and any(k.lower() == "authorization" for k in headers)
        return OAuthSettings(enabled=not static)
    if value is False:
        return OAuthSettings(enabled=False)
    if value is True:
        return OAuthSettings()
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: \"oauth\" must be an object (or false to turn sign-in off)")
    unknown = set(value) - _KEYS
    if unknown:
        raise ConfigError(f"{where}: \"oauth\" has unknown keys {sorted(unknown)}; known: {sorted(_KEYS)}")
    for key in ("clientId", "clientSecret", "clientMetadataUrl", "tokenEndpointAuthMethod"):
        if key in value and (not isinstance(value[key], str) or not value[key]):
            raise ConfigError(f"{where}: \"oauth.{key}\" must be a non-empty string")
    scopes = value.get("scopes", [])
    if isinstance(scopes, str):
        scopes = scopes.split()
    if not isinstance(scopes, list) or not all(isinstance(s, str) and s and " " not in s for s in scopes):
        raise ConfigError(f"{where}: \"oauth.scopes\" must be a list of scope names (or one space-separated string)")
    method = value.get("tokenEndpointAuthMethod")
    if method is not None and method not in AUTH_METHODS:
        raise ConfigError(f"{where}: \"oauth.tokenEndpointAuthMethod\" must be one of {', '.join(AUTH_METHODS)}")
    if "clientSecret" in value and "clientId" not in value:
        raise ConfigError(f"{where}: \"oauth.clientSecret\" needs \"oauth.clientId\"")
    metadata_url = value.get("clientMetadataUrl")
    if metadata_url is not None and not metadata_url.startswith("https://"):
        raise ConfigError(f"{where}: \"oauth.clientMetadataUrl\" must be an https:// URL")
    return OAuthSettings(client_id=value.get("clientId"), client_secret=value.get("clientSecret"),
                         client_metadata_url=metadata_url, scopes=tuple(scopes), token_endpoint_auth_method=method)
