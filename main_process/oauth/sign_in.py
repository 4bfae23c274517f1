"""One server's sign-in: the consent card, the loopback listener, and what the server's status says.

    401 (or 403 insufficient_scope) ─► SDK: discovery, client identity ─► authorization URL
        ─► card (URL-mode invoke, kind "sign-in") ── decline ──► hold: calls fail at once
                 │ accept (the window opens the browser)  └─ cancel / expiry ──► needs sign-in again
                 ▼
        loopback listener (or a pasted address) ── state checked ──► code ─► SDK: tokens ─► stored

The code is used only after the card's accept, whichever reaches main first: the accept carries the
hosts the person allowed (a token endpoint elsewhere), and an authorization server that redirects
at once can send the browser back before a window's accept arrives. Such a redirect is held by the
listener until the card is answered (at most until it expires); the browser then gets its page.

The card is a request like any other (`PendingRequests.open`): every window gets it, the first
answer wins, it expires after the server's `elicitationTimeoutSeconds`; rules never answer it.
The listener lives from the authorization request until its redirect, a decline, or the card's
deadline. Tokens never leave main: the card carries the authorization URL only.
"""

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Literal
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull
from pydantic import AnyUrl

from main_process.config import HttpServerConfig
from main_process.consent.pending import Elicitation, PendingRequest, PendingRequests, RequestOptions
from main_process.log_limiter import RateLimitedLog
from main_process.oauth.hosts import allowed_origins, needs_allowing, origin, registration_form
from main_process.oauth.loopback import ListenerCounts, RedirectListener
from main_process.oauth.provider import PORTLESS_REDIRECT, ElicitronOAuthProvider
from main_process.oauth.token_store import ServerTokens, TokenStore
from shared import channels
from shared.errors import (
    SignInDeclinedError,
    SignInError,
    SignInRefusedError,
    TokenStoreError,
    UndeliverableRequestError,
)
from shared.messages import (
    AuthReport,
    ElicitationResult,
    ServerStatus,
    SignInHost,
    SignInInfo,
)

logger = logging.getLogger(__name__)

REVOKE_TIMEOUT_S = 10.0
EXPIRY_GRACE_S = 1.0
SIGNED_OUT = "you signed out"
FAILURE_LOG_INTERVAL_S = 300.0  # the same failure of one server is logged once in this long
LEGACY_NOTE = ("This server publishes no OAuth metadata (it predates the metadata spec): you sign in at "
               "its own address.")
_failures = RateLimitedLog(logger, FAILURE_LOG_INTERVAL_S)


class SignIn:
    """Everything about signing in to one `url` server; one per ManagedServer, kept across
    its connections (the provider holds what was discovered)."""

    def __init__(
        self,
        config: HttpServerConfig,
        store: TokenStore,
        *,
        requests: Callable[[], PendingRequests],
        on_needed: Callable[[bool], None],
        publish_complete: Callable[[str], None],
    ) -> None:
        self.name = config.name
        self.config = config
        self.store = store
        self._requests = requests
        self._on_needed = on_needed  # True: a card is out (status needs-sign-in); False: it is over
        self._publish_complete = publish_complete
        settings = config.oauth
        fixed = None
        if settings.client_id:
            fixed = OAuthClientInformationFull(
                client_id=settings.client_id, client_secret=settings.client_secret,
                token_endpoint_auth_method=settings.auth_method,
                redirect_uris=[AnyUrl(PORTLESS_REDIRECT)], grant_types=["authorization_code", "refresh_token"],
                response_types=["code"])
        self.tokens = ServerTokens(store, config.name, config.url, fixed)
        self.provider = ElicitronOAuthProvider(
            config.url, self.tokens, bind_listener=self._bind_listener, redirect_handler=self._ask,
            callback_handler=self._wait_for_redirect, on_failure=self._failed, on_tokens=self._signed_in,
            allow_registration=self._allow_registration, scopes=settings.scopes,
            client_metadata_url=settings.client_metadata_url)
        self.hold: str | None = None  # why main will not ask again on its own (declined, signed out)
        self.failure: str | None = None  # why the last sign-in did not complete
        self.held = asyncio.Event()  # set while `hold` is: waiting calls fail at once
        self.login_requested = asyncio.Event()
        self._listener: RedirectListener | None = None
        self.listener_counts = ListenerCounts()  # what every sign-in's listener turned away
        self._pending: PendingRequest | None = None
        self._elicitation_id: str | None = None
        self._needs_allowing: list[str] = []  # the card's endpoints elsewhere (hosts.py)
        self._deadline = 0.0

    @property
    def in_progress(self) -> bool:
        """A card is out, or an accepted one waits for the browser's redirect."""
        return self._listener is not None and self._listener.listening

    # ---- what the SDK's flow calls -------------------------------------------------------------

    async def _bind_listener(self) -> str:
        if self.hold is not None:
            raise SignInDeclinedError(f"{self.hold}; sign in again with `elicitron auth login {self.name}`")
        if self._listener is not None:
            self._listener.close()
        self._listener = RedirectListener(self.listener_counts)
        return await self._listener.start()

    async def _ask(self, authorization_url: str) -> None:
        listener = self._listener
        assert listener is not None  # bound by the provider just before
        parts = urlsplit(authorization_url)
        query = parse_qs(parts.query)
        listener.expect(query.get("state", [""])[0])
        host = parts.hostname or ""
        scopes = query.get("scope", [""])[0].split()
        self._elicitation_id = f"sign-in-{channels.new_uuid7()}"
        asked = f" for {', '.join(scopes)}" if scopes else ""
        legacy = self.provider.legacy_metadata
        note = f" {LEGACY_NOTE}" if legacy else ""
        hosts = self.provider.hosts(authorization_url)
        self._needs_allowing = needs_allowing(hosts)
        self.provider.allowed_origins = set()  # each card asks again
        if self._needs_allowing:
            note += (f" Its tokens would be issued at {', '.join(self._needs_allowing)}, not at the authorization "
                     f"server {self.provider.issuer_origin()}: that host gets the sign-in code and any client secret, so the "
                     f"sign-in is refused unless you allow it on the card.")
        params = {"mode": "url", "elicitationId": self._elicitation_id, "url": authorization_url,
                  "message": f"Sign in to {self.name} at {host}{asked}, so Elicitron can use it.{note}"}
        timeout_s = self.config.elicitation_timeout_s
        self._deadline = time.monotonic() + timeout_s
        try:
            self._pending = self._requests().open(
                Elicitation.read(self.name, params),
                RequestOptions(timeout_s=timeout_s, max_bytes=self.config.max_request_bytes, kind="sign-in",
                               sign_in=SignInInfo(authorization_server=host, scopes=scopes,
                                                  redirect_uri=listener.redirect_uri, resource=self.config.url,
                                                  legacy_metadata=legacy, hosts=hosts)),
                self._answered)
        except UndeliverableRequestError as exc:
            listener.close()
            raise SignInError(f"the sign-in card could not be shown: {exc}") from None
        self._on_needed(True)
        logger.info("server %s needs sign-in at %s: card %s", self.name, host, self._pending.channel)

    async def _allow_registration(self, elsewhere: str, issuer: str) -> bool:
        """A card before Dynamic Client Registration at another origin than the issuer's: whether
        the user ticked that origin and accepted."""
        if self.hold is not None:
            raise SignInDeclinedError(f"{self.hold}; sign in again with `elicitron auth login {self.name}`")
        answer: asyncio.Future[ElicitationResult] = asyncio.get_running_loop().create_future()

        def resolve(result: ElicitationResult) -> None:
            if not answer.done():
                answer.set_result(result)

        params = {"mode": "form", "requestedSchema": registration_form(elsewhere, issuer),
                  "message": f"To sign in to {self.name}, Elicitron must first register as a client at {elsewhere}, "
                             f"another host than the authorization server {issuer}. It sends that host its name and "
                             f"its redirect address; the sign-in card comes next. Tick the host to allow it."}
        try:
            pending = self._requests().open(
                Elicitation.read(self.name, params),
                RequestOptions(timeout_s=self.config.elicitation_timeout_s, max_bytes=self.config.max_request_bytes,
                               kind="sign-in",
                               sign_in=SignInInfo(authorization_server=urlsplit(issuer).hostname or issuer,
                                                  resource=self.config.url,
                                                  hosts=[SignInHost(role="registration", origin=elsewhere,
                                                                    elsewhere=True)])),
                resolve)
        except UndeliverableRequestError as exc:
            raise SignInError(f"the registration card could not be shown: {exc}") from None
        self._on_needed(True)
        try:
            result = await answer
        except asyncio.CancelledError:
            self._requests().withdraw(pending, "cancelled")
            raise
        allowed = result.action == "accept" and elsewhere in allowed_origins(result.content)
        if allowed:
            logger.info("registering Elicitron at %s for %s: allowed on the card", elsewhere, self.name)
        return allowed

    def _answered(self, result: ElicitationResult) -> None:
        self._pending = None
        if result.action == "accept":
            allowed = allowed_origins(result.content) & set(self._needs_allowing)
            missing = [o for o in self._needs_allowing if o not in allowed]
            if missing:
                # Held like a decline: asking again at once would only show the same card.
                refused = SignInRefusedError(
                    f"sign-in to {self.name} refused: its token endpoint is at {', '.join(missing)}, another origin "
                    f"than the authorization server {self.provider.issuer_origin()}, and the card did not allow it")
                if self._listener is not None:
                    self._listener.fail(refused)
                return
            self.provider.allowed_origins = allowed
            if allowed:
                logger.info("sign-in to %s accepted, allowing %s as well", self.name, ", ".join(sorted(allowed)))
            if self._listener is not None:
                if self._listener.holding:
                    logger.info("sign-in to %s accepted; the browser's redirect was already here", self.name)
                else:
                    logger.info("sign-in to %s accepted; waiting for the browser's redirect", self.name)
                self._listener.accepted()
            return
        if result.action == "decline":
            error: SignInError = SignInDeclinedError(f"sign-in to {self.name} was declined")
        else:
            error = SignInError(f"sign-in to {self.name} was not completed (the card was cancelled or expired)")
        if self._listener is not None:
            self._listener.fail(error)

    async def _wait_for_redirect(self) -> AuthorizationCodeResult:
        listener = self._listener
        assert listener is not None
        try:
            # A moment past the card's deadline: its own expiry ends the wait (windows read "expired").
            result = await listener.result(max(self._deadline - time.monotonic(), 0.0) + EXPIRY_GRACE_S)
        finally:
            listener.close()
            if self._pending is not None:  # the redirect came while the card was still out
                self._requests().withdraw(self._pending, "cancelled")
        if self._elicitation_id is not None:
            self._publish_complete(self._elicitation_id)  # windows stop waiting for the browser
        return result

    def _failed(self, error: Exception) -> None:
        self.failure = str(error)
        if isinstance(error, SignInDeclinedError):
            self.hold = self.hold or str(error)
            self.held.set()
        _failures.warning((self.name, self.failure), "sign-in to %s did not complete: %s", self.name, error)
        self._on_needed(False)

    def _signed_in(self) -> None:
        self.failure = None
        self.hold = None
        self.held.clear()
        logger.info("signed in to %s", self.name)
        self._on_needed(False)

    # ---- what users and windows ask -------------------------------------------------------------

    def login(self) -> None:
        """Ask again: lift a decline or a logout, and wake a connection waiting for sign-in."""
        self.hold = None
        self.held.clear()
        self.failure = None
        self.login_requested.set()

    async def logout(self) -> None:
        """Revoke the tokens at the authorization server when it offers that (RFC 7009), forget
        them here, and ask no more until `login`."""
        await self._revoke()
        await self.tokens.clear_tokens()
        self.provider.forget()
        self.hold = SIGNED_OUT
        self.held.set()

    async def deliver_pasted(self, elicitation_id: str, url: str) -> tuple[int, str]:
        """An address a window on another machine pasted: checked like a redirect to the listener
        (and, pasted before the card's accept, answered once the card is)."""
        if self._listener is None or not self._listener.listening or elicitation_id != self._elicitation_id:
            return 404, f"no sign-in to {self.name} is waiting for that address"
        answer: asyncio.Future[tuple[int, str]] = asyncio.get_running_loop().create_future()

        def reply(status: int, text: str) -> None:
            if not answer.done():
                answer.set_result((status, text))

        self._listener.deliver(url, reply)
        return await answer

    async def report(self, status: ServerStatus, message: str | None = None) -> AuthReport:
        refused, forged = self.listener_counts.refused_connections, self.listener_counts.forged_redirects
        try:
            record = await self.tokens.record()
        except TokenStoreError as exc:
            return AuthReport(server=self.name, status=status, signed_in=False, store=self.store.kind,
                              message=str(exc), listener_refused=refused, forged_redirects=forged)
        tokens = record.get("tokens") or {}
        issuer = (record.get("authorization_server") or {}).get("issuer")
        expires_at = None
        if isinstance(tokens.get("expires_in"), int) and isinstance(record.get("obtained_at"), int | float):
            expires_at = int((record["obtained_at"] + tokens["expires_in"]) * 1000)
        return AuthReport(server=self.name, status=status, signed_in=bool(tokens.get("access_token")),
                          store=self.store.kind, authorization_server=issuer,
                          scopes=str(tokens.get("scope") or "").split(), expires_at=expires_at,
                          message=message or self.hold or self.failure,
                          listener_refused=refused, forged_redirects=forged)

    async def _revoke(self) -> None:
        context = self.provider.context
        record = await self.tokens.record()
        tokens = record.get("tokens") or {}
        endpoint = (record.get("authorization_server") or {}).get("revocation_endpoint")
        client = await self.tokens.get_client_info()
        if not endpoint or client is None:
            return
        issuer = (record.get("authorization_server") or {}).get("issuer")
        allowed = await self.tokens.get_allowed_origins()
        if origin(endpoint) != origin(str(issuer or "")) and origin(endpoint) not in allowed:
            logger.warning("not revoking the tokens of %s at %s: another origin than its authorization server",
                           self.name, origin(endpoint))
            return
        context.client_info = client
        async with httpx2.AsyncClient(timeout=REVOKE_TIMEOUT_S) as http:
            kinds: list[Literal["refresh_token", "access_token"]] = ["refresh_token", "access_token"]
            for kind in kinds:
                if not tokens.get(kind):
                    continue
                data, headers = context.prepare_token_auth(
                    {"token": tokens[kind], "token_type_hint": kind, "client_id": client.client_id},
                    {"Content-Type": "application/x-www-form-urlencoded"})
                try:
                    response = await http.post(endpoint, data=data, headers=headers)
                except httpx2.HTTPError as exc:
                    logger.warning("could not revoke the %s of %s: %s", kind.replace("_", " "), self.name, exc)
                    return
                if response.status_code != 200:
                    logger.warning("the authorization server refused to revoke the %s of %s (HTTP %d)",
                                   kind.replace("_", " "), self.name, response.status_code)
