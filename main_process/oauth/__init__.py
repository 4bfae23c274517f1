"""Signing in to remote MCP servers: OAuth per the MCP authorization spec, the consent in the window.

settings.py     the `"oauth"` object of a `url` server in the config (no `mcp` import)
token_store.py  TokenStore: sign-ins at rest, system keyring or a 0600 file; ServerTokens (SDK storage)
provider.py     ElicitronOAuthProvider: the SDK's OAuthClientProvider plus PKCE check, scope override,
                refresh on 401, stored metadata, and failures that leave the connection up
loopback.py     RedirectListener: 127.0.0.1, random port, one use, `state` checked, connections capped
hosts.py        every origin a sign-in talks to; endpoints elsewhere, and what the card allowed
sign_in.py      SignIn: one server's sign-in (the card, the listener, hold after a decline, logout)

Hooked into main by `servers.ManagedServer` (its HTTP transport and status) and `app.MainApp`
(the `msgAuth` and `msgSignInRedirect` topics).
"""
