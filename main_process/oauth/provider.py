"""The SDK's `OAuthClientProvider` with what Elicitron needs on top of it, and nothing else.

The SDK does discovery (RFC 9728 from `WWW-Authenticate`, then the path-based and root well-known
URLs; RFC 8414 with the OpenID fallbacks), client identity (CIMD, a stored or pre-registered
client, DCR), PKCE S256, the `resource` parameter, scope selection, step-up on 403
`insufficient_scope`, refresh, and the token endpoint auth methods. Added here:

- refuse an authorization server whose metadata does not list PKCE S256 (the MCP spec's MUST; the
  SDK sends S256 without checking); a server with no metadata at all (neither RFC 9728 nor RFC 8414:
  it predates them, the 2025-03-26 spec's fallback) is signed in to at its origin's /authorize,
  /token and /register with S256, and the card says so (`legacy_metadata`);
- `oauth.scopes` from config replaces the discovered scopes (a step-up adds the challenged ones);
- a 401 while a refresh token is held is first answered by refreshing (a server may end an access
  token before its `expires_in`), so the user sees a card only when the refresh fails too;
- the discovered metadata is stored with the tokens, so a restarted main refreshes at the right
  token endpoint, and a stored token's expiry is known after a restart;
- the redirect URI is main's loopback listener, bound when the authorization request is built;
- nothing goes to a token or registration endpoint on another origin than the issuer's (the code,
  the PKCE verifier, a refresh token, the client secret) unless the user allowed that origin on the
  card (`hosts.py`; `allowed_origins`, kept with the tokens). The registration comes before the
  sign-in card can exist (the authorization URL needs its client id), so a registration endpoint
  elsewhere is asked about on a card of its own first (`allow_registration`), and nothing is sent
  there unless that card allows it;
- a sign-in that fails (declined, expired, refused) does not tear the MCP connection down: the
  request goes out once more without a token, and its 401 fails that one request (the caller then
  reads `SignIn.hold`/`failure` to say why); such a failure is logged once, in one line, by
  `SignIn`, not as the SDK's traceback per attempt.
"""

import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable

import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.client.auth.utils import extract_field_from_www_auth, union_scopes
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientMetadata,
    OAuthMetadata,
    ProtectedResourceMetadata,
)
from pydantic import AnyUrl

from main_process.oauth.hosts import origin, sign_in_hosts
from main_process.oauth.token_store import ServerTokens
from shared.errors import SignInError, SignInRefusedError
from shared.messages import SignInHost

logger = logging.getLogger(__name__)

PORTLESS_REDIRECT = "http://127.0.0.1/callback"  # registered; the port is chosen per sign-in (RFC 8252 §7.3)
SDK_FLOW_LOGGER = "mcp.client.auth.oauth2"
UNEXPECTED_REPEAT_S = 60.0  # an unexpected sign-in fault's traceback: at most once a minute


class QuietFlowErrors(logging.Filter):
    """The SDK logs a traceback ("OAuth flow error") for every failed sign-in attempt. A refusal
    or flow error is the provider's `on_failure`, which `SignIn` reports in one line: drop its
    traceback; anything else keeps it, once per UNEXPECTED_REPEAT_S for the same fault."""

    def __init__(self) -> None:
        super().__init__()
        self._last: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if error is None or record.msg != "OAuth flow error":
            return True
        if isinstance(error, SignInError | OAuthFlowError):
            return False
        key, now = f"{type(error).__name__}: {error}", time.monotonic()
        if now - self._last.get(key, float("-inf")) < UNEXPECTED_REPEAT_S:
            return False
        if len(self._last) > 1000:
            self._last.clear()
        self._last[key] = now
        return True


def quiet_sdk_flow_errors() -> None:
    """Install `QuietFlowErrors` on the SDK's OAuth logger (once)."""
    sdk = logging.getLogger(SDK_FLOW_LOGGER)
    if not any(isinstance(f, QuietFlowErrors) for f in sdk.filters):
        sdk.addFilter(QuietFlowErrors())


def check_pkce(metadata: OAuthMetadata | None, resource_metadata: ProtectedResourceMetadata | None,
               authorization_server: str | None) -> bool:
    """Whether to sign in at all: raises SignInError for metadata without PKCE S256 (listing other
    methods, or none), or for an authorization server named by RFC 9728 metadata that publishes no
    RFC 8414 metadata. True: no metadata exists at all (a server from before the metadata spec, the
    2025-03-26 fallback endpoints); False: metadata lists S256."""
    if metadata is None:
        if resource_metadata is not None:
            raise SignInError(f"the authorization server {authorization_server or '(unnamed)'} publishes no metadata "
                              "(RFC 8414), so PKCE S256 support is unknown; Elicitron will not sign in there")
        return True
    methods = metadata.code_challenge_methods_supported
    if not methods:
        raise SignInError(f"the authorization server {metadata.issuer} lists no PKCE methods "
                          "(code_challenge_methods_supported), so it may not support PKCE; Elicitron will not "
                          "sign in there")
    if "S256" not in methods:
        raise SignInError(f"the authorization server {metadata.issuer} offers PKCE only with "
                          f"{', '.join(methods)}, not S256; Elicitron will not sign in there")
    return False


class ElicitronOAuthProvider(OAuthClientProvider):
    def __init__(
        self,
        server_url: str,
        storage: ServerTokens,
        *,
        bind_listener: Callable[[], Awaitable[str]],
        redirect_handler: Callable[[str], Awaitable[None]],
        callback_handler: Callable[[], Awaitable[AuthorizationCodeResult]],
        on_failure: Callable[[Exception], None],
        on_tokens: Callable[[], None],
        allow_registration: Callable[[str, str], Awaitable[bool]],
        scopes: tuple[str, ...] = (),
        client_metadata_url: str | None = None,
    ) -> None:
        metadata = OAuthClientMetadata(client_name="Elicitron", redirect_uris=[AnyUrl(PORTLESS_REDIRECT)],
                                       grant_types=["authorization_code", "refresh_token"], response_types=["code"])
        super().__init__(server_url, metadata, storage, redirect_handler=redirect_handler,
                         callback_handler=callback_handler, client_metadata_url=client_metadata_url)
        self.tokens = storage
        self._bind_listener = bind_listener
        self._on_failure = on_failure
        self._on_tokens = on_tokens
        self._allow_registration = allow_registration  # (origin, issuer origin): the user allowed it
        self._registered_at: str | None = None  # this flow's registration endpoint, once it went out
        self._scope_override = " ".join(scopes) or None
        self._step_up = False
        self.legacy_metadata = False  # this authorization request: no metadata exists (see check_pkce)
        self.allowed_origins: set[str] = set()  # endpoints elsewhere the user allowed (hosts.py)
        quiet_sdk_flow_errors()

    def forget(self) -> None:
        """Drop the tokens held in memory (after a logout), so the next request asks again."""
        self.context.clear_tokens()
        self._initialized = False

    # ---- loading: tokens, client and metadata ---------------------------------------------

    async def _initialize(self) -> None:
        await super()._initialize()
        prm, asm = await self.tokens.get_metadata()
        if self.context.oauth_metadata is None and asm is not None:
            self.context.oauth_metadata = asm
            self.context.protected_resource_metadata = prm
            if prm is not None and prm.authorization_servers:
                self.context.auth_server_url = str(prm.authorization_servers[0])
        record = await self.tokens.record()
        self.allowed_origins |= set(await self.tokens.get_allowed_origins())
        tokens = self.context.current_tokens
        obtained = record.get("obtained_at")
        if tokens is not None and tokens.expires_in is not None and isinstance(obtained, int | float):
            self.context.token_expiry_time = obtained + tokens.expires_in

    # ---- where things are sent ------------------------------------------------------------

    def issuer_origin(self) -> str:
        metadata = self.context.oauth_metadata
        if metadata is not None:
            return origin(str(metadata.issuer))
        return origin(self.context.get_authorization_base_url(self.context.server_url))  # no metadata: legacy

    def hosts(self, authorization_url: str) -> list[SignInHost]:
        """Every origin this sign-in talks to (for the card)."""
        metadata = self.context.oauth_metadata
        issuer = str(metadata.issuer) if metadata is not None else self.issuer_origin()
        return sign_in_hosts(issuer=issuer, authorization=authorization_url, token=self._get_token_endpoint(),
                             registration=self._registered_at, resource=self.context.server_url)

    def may_send_to(self, url: str) -> bool:
        """Whether the code, a token or the client secret may go to `url`."""
        target = origin(url)
        return target == self.issuer_origin() or target in self.allowed_origins

    def _check_sent_to(self, url: str, what: str) -> None:
        if not self.may_send_to(url):
            raise SignInRefusedError(f"the authorization server {self.issuer_origin()} puts its {what} at "
                                     f"{origin(url)}, another origin, and that was not allowed on the sign-in card: "
                                     "nothing was sent there")

    # ---- the authorization request -------------------------------------------------------

    async def _perform_authorization(self) -> httpx2.Request:
        context = self.context
        self.legacy_metadata = check_pkce(context.oauth_metadata, context.protected_resource_metadata,
                                          context.auth_server_url)
        if self.legacy_metadata:
            logger.info("%s publishes no OAuth metadata (it predates the metadata spec): signing in at %s with "
                        "PKCE S256", context.server_url, context.get_authorization_base_url(context.server_url))
        if self._scope_override:
            chosen = self.context.client_metadata.scope
            self.context.client_metadata.scope = (union_scopes(self._scope_override, chosen) if self._step_up
                                                  else self._scope_override)
        self._step_up = False
        redirect_uri = await self._bind_listener()
        self.context.client_metadata.redirect_uris = [AnyUrl(redirect_uri)]
        token_request = await super()._perform_authorization()  # the card, the redirect; built, not sent
        self._check_sent_to(str(token_request.url), "token endpoint")
        return token_request

    async def _refresh_token(self) -> httpx2.Request:
        refresh_request = await super()._refresh_token()
        self._check_sent_to(str(refresh_request.url), "token endpoint")
        return refresh_request

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        await super()._handle_token_response(response)
        await self.tokens.set_metadata(self.context.protected_resource_metadata, self.context.oauth_metadata)
        await self.tokens.set_allowed_origins(sorted(self.allowed_origins))
        self._on_tokens()

    # ---- the flow around one request -------------------------------------------------------

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        inner = super()._auth_flow(request)
        try:
            self._registered_at = None
            outgoing = await inner.__anext__()
            while True:
                await self._check_registration(outgoing)
                response = yield outgoing
                if outgoing is request:
                    if response.status_code == 401 and self.context.can_refresh_token():
                        # Under the SDK's lock: the inner flow is suspended inside it.
                        refresh_response = yield await self._refresh_token()
                        if await self._handle_refresh_response(refresh_response):
                            logger.info("refreshed the access token after a 401")
                            self._add_auth_header(request)
                            response = yield request
                    self._step_up = response.status_code == 403 and \
                        extract_field_from_www_auth(response, "error") == "insufficient_scope"
                outgoing = await inner.asend(response)
        except StopAsyncIteration:
            return
        except (SignInError, OAuthFlowError) as exc:
            self._on_failure(exc)
            # The request fails on its own (401/403), the connection stays.
            request.headers.pop("Authorization", None)
            yield request
        finally:
            await inner.aclose()

    async def _check_registration(self, outgoing: httpx2.Request) -> None:
        """Before Dynamic Client Registration goes out: at another origin, only once a card allowed it."""
        metadata = self.context.oauth_metadata
        endpoint = str(metadata.registration_endpoint) if metadata and metadata.registration_endpoint else None
        if endpoint is None or outgoing.method != "POST" or str(outgoing.url) != endpoint:
            return
        if not self.may_send_to(endpoint):
            if not await self._allow_registration(origin(endpoint), self.issuer_origin()):
                raise SignInRefusedError(
                    f"the authorization server {self.issuer_origin()} puts its registration endpoint at "
                    f"{origin(endpoint)}, another origin, and that was not allowed on the card: nothing was sent "
                    "there (or configure \"oauth\": {\"clientId\": ..} for this server)")
            self.allowed_origins.add(origin(endpoint))
        self._registered_at = endpoint

    async def _handle_refresh_response(self, response: httpx2.Response) -> bool:
        refreshed = await super()._handle_refresh_response(response)  # stores the new tokens
        if refreshed:
            self._on_tokens()
        else:
            await self.tokens.clear_tokens()  # a refused refresh token is of no further use
        return refreshed
