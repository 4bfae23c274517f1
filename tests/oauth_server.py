"""A test OAuth authorization server and an MCP server it protects, built from `mcp.server.auth`.

    python tests/oauth_server.py [--client-id ID --client-secret SECRET --auth-method METHOD]
                                 [--token-elsewhere] [--registration-elsewhere]

Two origins in one process, both on 127.0.0.1 with ports the OS picks: the authorization server
(RFC 8414 metadata, /authorize that approves at once, /token with refresh tokens, /register for
Dynamic Client Registration, /revoke) and the MCP server (RFC 9728 protected resource metadata,
and /mcp behind a bearer gate). The first stdout line is `READY {"mcp": …, "issuer": …}`.

- Scopes: `mcp:read` lets a client in (the 401 challenge names it); the tool `write_note` needs
  `mcp:write` too and answers 403 `insufficient_scope` without it (step-up).
- Redirect URIs on 127.0.0.1 match any port (RFC 8252 §7.3), as a native-app AS must.
- `--token-elsewhere`: a third origin serves the token endpoint (the same one, so a sign-in that
  uses it works), and the authorization server's metadata names it there; its requests are counted
  (`elsewhereTokenRequests`, and `elsewhereCodes` for those that carried an authorization code).
  The first line then also has `"elsewhere"`. `--registration-elsewhere`: the same for the
  registration endpoint (`elsewhereRegistrations`).
- Test-only endpoints on the authorization server: POST /test/expire-access (every access token
  stops working, as if it had expired), POST /test/revoke-refresh (every refresh token is
  revoked), GET /test/stats (what was asked of the server, counts only).
"""

import argparse
import asyncio
import json
import secrets
import socket
import sys
import time
from typing import Any
from urllib.parse import urlsplit

import uvicorn
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    OAuthAuthorizationServerProvider,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.routes import build_metadata, create_auth_routes, create_protected_resource_routes
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.auth import InvalidRedirectUriError, InvalidScopeError, OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl, AnyUrl
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

READ, WRITE = "mcp:read", "mcp:write"
ACCESS_TTL_S = 3600
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")


class LoopbackClient(OAuthClientInformationFull):
    """A registered client whose loopback redirect URIs match on any port (RFC 8252 §7.3), and
    which may ask for any scope this server offers (so a client registered for `mcp:read` can
    step up to `mcp:write`)."""

    def validate_scope(self, requested_scope: str | None) -> list[str] | None:
        if requested_scope is None:
            return None
        scopes = requested_scope.split()
        unknown = [s for s in scopes if s not in (READ, WRITE)]
        if unknown:
            raise InvalidScopeError(f"unknown scopes {unknown}")
        return scopes

    def validate_redirect_uri(self, redirect_uri: AnyUrl | None) -> AnyUrl:
        if redirect_uri is not None and redirect_uri.host in LOOPBACK_HOSTS:
            for registered in self.redirect_uris or []:
                if (registered.scheme, registered.host, registered.path) == (
                        redirect_uri.scheme, redirect_uri.host, redirect_uri.path):
                    return redirect_uri
            raise InvalidRedirectUriError(f"Redirect URI '{redirect_uri}' not registered for client")
        return super().validate_redirect_uri(redirect_uri)


class Provider(OAuthAuthorizationServerProvider[AuthorizationCode, RefreshToken, AccessToken]):
    """An in-memory authorization server that approves every authorization at once (the SDK's
    defaults for the rest, e.g. no identity-assertion grant)."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.stats: dict[str, Any] = {"registrations": 0, "authorizations": 0, "codeExchanges": 0,
                                      "refreshes": 0, "revocations": 0, "authorizeParams": [],
                                      "tokenClientAuth": [], "elsewhereTokenRequests": 0, "elsewhereCodes": 0,
                                      "elsewhereRegistrations": 0}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        client = self.clients.get(client_id)
        return None if client is None else LoopbackClient.model_validate(client.model_dump())

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.stats["registrations"] += 1
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        assert client.client_id is not None
        self.stats["authorizations"] += 1
        self.stats["authorizeParams"].append({"scopes": params.scopes, "resource": params.resource,
                                              "clientId": client.client_id})
        code = AuthorizationCode(
            code=secrets.token_urlsafe(24), client_id=client.client_id, scopes=params.scopes or [READ],
            expires_at=time.time() + 300, code_challenge=params.code_challenge, redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly, resource=params.resource)
        self.codes[code.code] = code
        return construct_redirect_uri(str(params.redirect_uri), code=code.code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull, code: str) -> AuthorizationCode | None:
        return self.codes.get(code)

    async def exchange_authorization_code(self, client: OAuthClientInformationFull,
                                          code: AuthorizationCode) -> OAuthToken:
        del self.codes[code.code]
        self.stats["codeExchanges"] += 1
        return self._issue(code.client_id, code.scopes, code.resource)

    async def load_refresh_token(self, client: OAuthClientInformationFull, token: str) -> RefreshToken | None:
        found = self.refresh.get(token)
        return found if found is not None and found.client_id == client.client_id else None

    async def exchange_refresh_token(self, client: OAuthClientInformationFull, token: RefreshToken,
                                     scopes: list[str]) -> OAuthToken:
        if token.token not in self.refresh:
            raise TokenError("invalid_grant", "refresh token was revoked")
        del self.refresh[token.token]  # rotated: each refresh token works once
        self.stats["refreshes"] += 1
        return self._issue(token.client_id, scopes or token.scopes, token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.stats["revocations"] += 1
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        self.access[access] = AccessToken(token=access, client_id=client_id, scopes=scopes,
                                          expires_at=int(time.time()) + ACCESS_TTL_S, resource=resource)
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, resource=resource)
        return OAuthToken(access_token=access, expires_in=ACCESS_TTL_S, scope=" ".join(scopes),
                          refresh_token=refresh)


class BearerGate:
    """/mcp needs a live access token with `mcp:read` (else 401 with the RFC 9728 challenge), and
    `tools/call write_note` needs `mcp:write` too (else 403 insufficient_scope: step-up)."""

    def __init__(self, app: ASGIApp, provider: Provider, metadata_url: str) -> None:
        self.app = app
        self.provider = provider
        self.metadata_url = metadata_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/mcp"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        bearer = headers.get(b"authorization", b"").decode()
        token = await self.provider.load_access_token(bearer.removeprefix("Bearer ").strip()) \
            if bearer.startswith("Bearer ") else None
        if token is None or READ not in token.scopes:
            await self._challenge(401, "invalid_token", READ)(scope, receive, send)
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        if WRITE not in token.scopes and _calls_tool(body, "write_note"):
            await self._challenge(403, "insufficient_scope", f"{READ} {WRITE}")(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    def _challenge(self, status: int, error: str, scopes: str) -> Response:
        value = f'Bearer error="{error}", scope="{scopes}", resource_metadata="{self.metadata_url}"'
        return JSONResponse({"error": error}, status_code=status, headers={"WWW-Authenticate": value})


def _calls_tool(body: bytes, name: str) -> bool:
    try:
        message = json.loads(body)
    except ValueError:
        return False
    return isinstance(message, dict) and message.get("method") == "tools/call" \
        and isinstance(message.get("params"), dict) and message["params"].get("name") == name


def build_mcp(provider: Provider) -> MCPServer:
    mcp = MCPServer("protected")

    def token_of(ctx: Context) -> AccessToken:
        request = ctx.request_context.request
        if request is None:
            raise RuntimeError("a tool call without its HTTP request: not served over streamable HTTP?")
        bearer = request.headers["authorization"].removeprefix("Bearer ").strip()  # the gate let it in
        return provider.access[bearer]

    @mcp.tool()
    def whoami(ctx: Context) -> str:
        """The client and scopes of the token this call came with."""
        token = token_of(ctx)
        return json.dumps({"clientId": token.client_id, "scopes": token.scopes, "resource": token.resource})

    @mcp.tool()
    def write_note(ctx: Context, text: str = "hello") -> str:
        """Needs the mcp:write scope."""
        return f"wrote {text!r} with {' '.join(token_of(ctx).scopes)}"

    return mcp


def build_apps(provider: Provider, issuer: str, mcp_url: str, elsewhere_url: str | None = None,
               moved: tuple[str, ...] = ()) -> tuple[Starlette, ASGIApp, ASGIApp | None]:
    """`moved` ("/token", "/register"): endpoints served at `elsewhere_url` and named there."""
    registration = ClientRegistrationOptions(enabled=True, valid_scopes=[READ, WRITE], default_scopes=[READ])
    revocation = RevocationOptions(enabled=True)
    routes = create_auth_routes(provider, AnyHttpUrl(issuer), client_registration_options=registration,
                                revocation_options=revocation)
    elsewhere: ASGIApp | None = None
    if elsewhere_url is not None and moved:
        served = [r for r in routes if isinstance(r, Route) and r.path in moved]
        elsewhere = _CountTokenRequests(Starlette(routes=served), provider)
        metadata = build_metadata(AnyHttpUrl(issuer), None, registration, revocation)
        if "/token" in moved:
            metadata.token_endpoint = AnyHttpUrl(f"{elsewhere_url}/token")
        if "/register" in moved:
            metadata.registration_endpoint = AnyHttpUrl(f"{elsewhere_url}/register")
        published = metadata.model_dump(mode="json", exclude_none=True)

        async def metadata_elsewhere(request: Request) -> Response:
            return JSONResponse(published)

        routes.insert(0, Route("/.well-known/oauth-authorization-server", metadata_elsewhere, methods=["GET"]))

    async def expire_access(request: Request) -> Response:
        for token in provider.access.values():
            token.expires_at = 0
        return JSONResponse({"expired": len(provider.access)})

    async def revoke_refresh(request: Request) -> Response:
        count = len(provider.refresh)
        provider.refresh.clear()
        return JSONResponse({"revoked": count})

    async def stats(request: Request) -> Response:
        return JSONResponse(provider.stats)

    routes += [Route("/test/expire-access", expire_access, methods=["POST"]),
               Route("/test/revoke-refresh", revoke_refresh, methods=["POST"]),
               Route("/test/stats", stats, methods=["GET"])]
    authorization_server = Starlette(routes=routes)
    # The token endpoint records how clients authenticated (never the secrets).
    authorization_server.add_middleware(_RecordClientAuth, provider=provider)

    mcp_app = build_mcp(provider).streamable_http_app()
    prm = create_protected_resource_routes(AnyHttpUrl(mcp_url), [AnyHttpUrl(issuer)], scopes_supported=[READ, WRITE],
                                           resource_name="protected test server")
    mcp_app.router.routes.extend(prm)
    metadata_url = f"{_origin(mcp_url)}/.well-known/oauth-protected-resource{urlsplit(mcp_url).path}"
    return authorization_server, BearerGate(mcp_app, provider, metadata_url), elsewhere


class _CountTokenRequests:
    """The token (or registration) endpoint on another origin: counts what reaches it (never the values)."""

    def __init__(self, app: ASGIApp, provider: Provider) -> None:
        self.app = app
        self.provider = provider

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        if scope["path"] == "/register":
            self.provider.stats["elsewhereRegistrations"] += 1
        else:
            self.provider.stats["elsewhereTokenRequests"] += 1
        if b"code=" in body and b"grant_type=authorization_code" in body:
            self.provider.stats["elsewhereCodes"] += 1
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


class _RecordClientAuth:
    def __init__(self, app: ASGIApp, provider: Provider) -> None:
        self.app = app
        self.provider = provider

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/token":
            basic = dict(scope["headers"]).get(b"authorization", b"").startswith(b"Basic ")
            body = b""
            more = True
            while more:
                message = await receive()
                body += message.get("body", b"")
                more = message.get("more_body", False)
            how = "client_secret_basic" if basic else "client_secret_post" if b"client_secret=" in body else "none"
            self.provider.stats["tokenClientAuth"].append(how)
            sent = False

            async def replay() -> Message:
                nonlocal sent
                if sent:
                    return await receive()
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}

            await self.app(scope, replay, send)
            return
        await self.app(scope, receive, send)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _bound() -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    return listener


async def serve(args: argparse.Namespace) -> None:
    as_sock, mcp_sock = _bound(), _bound()
    issuer = f"http://127.0.0.1:{as_sock.getsockname()[1]}"
    mcp_url = f"http://127.0.0.1:{mcp_sock.getsockname()[1]}/mcp"
    moved = (("/token",) if args.token_elsewhere else ()) + (("/register",) if args.registration_elsewhere else ())
    elsewhere_sock = _bound() if moved else None
    elsewhere_url = f"http://127.0.0.1:{elsewhere_sock.getsockname()[1]}" if elsewhere_sock else None
    provider = Provider()
    if args.client_id:
        provider.clients[args.client_id] = OAuthClientInformationFull(
            client_id=args.client_id, client_secret=args.client_secret or None,
            token_endpoint_auth_method=args.auth_method, redirect_uris=[AnyUrl("http://127.0.0.1/callback")],
            grant_types=["authorization_code", "refresh_token"], scope=f"{READ} {WRITE}")
    authorization_server, mcp_app, elsewhere = build_apps(provider, issuer, mcp_url, elsewhere_url, moved)
    serving = [uvicorn.Server(uvicorn.Config(authorization_server, log_level="warning")).serve([as_sock]),
               uvicorn.Server(uvicorn.Config(mcp_app, log_level="warning")).serve([mcp_sock])]
    urls = {"mcp": mcp_url, "issuer": issuer}
    if elsewhere is not None and elsewhere_sock is not None and elsewhere_url is not None:
        serving.append(uvicorn.Server(uvicorn.Config(elsewhere, log_level="warning")).serve([elsewhere_sock]))
        urls["elsewhere"] = elsewhere_url
    print("READY " + json.dumps(urls), flush=True)
    await asyncio.gather(*serving)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client-id", help="pre-register this client")
    parser.add_argument("--client-secret", default="")
    parser.add_argument("--auth-method", default="client_secret_basic",
                        choices=["client_secret_basic", "client_secret_post", "none"])
    parser.add_argument("--token-elsewhere", action="store_true",
                        help="serve the token endpoint on a third origin and name it there in the metadata")
    parser.add_argument("--registration-elsewhere", action="store_true",
                        help="the same for the registration endpoint")
    asyncio.run(serve(parser.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
