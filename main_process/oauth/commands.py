"""What `msgAuth` (`elicitron auth status|login|logout SERVER`) and `msgSignInRedirect` do to one server."""

import logging

from main_process.servers.server_faults import error_reply
from main_process.servers.servers import ManagedServer
from shared.errors import RpcCode, TokenStoreError
from shared.messages import AuthAction, ChannelReply, SignInRedirect

logger = logging.getLogger(__name__)


async def auth_command(server: ManagedServer, action: AuthAction) -> ChannelReply:
    sign_in = server.sign_in
    if sign_in is None:
        return error_reply(RpcCode.INVALID_PARAMS, f"server {server.name!r} does not sign in (only `url` servers "
                                                   "do, and not with \"oauth\": false or a static Authorization header)")
    message = None
    try:
        if action == "login":
            logger.info("sign-in to %s asked for", server.name)
            if server.status == "needs-sign-in" and sign_in.in_progress:
                message = "a sign-in card is already waiting in the windows"
            elif server.status == "needs-sign-in":
                sign_in.login()
                message = "sign-in started: answer the card in a window"
            else:
                # Signed in already (or stopped): sign in afresh, e.g. as another account.
                await sign_in.logout()
                sign_in.login()
                if server.running:
                    await server.restart()
                else:
                    server.start()
                message = "sign-in started: answer the card in a window"
        elif action == "logout":
            logger.info("signing out of %s", server.name)
            await sign_in.logout()
            if server.running:  # the connection's token goes with it; no card until a login
                await server.stop()
                server.start(sign_in=False)
            message = "signed out; the tokens were forgotten (and revoked where the server allows it)"
    except TokenStoreError as exc:
        return error_reply(RpcCode.INTERNAL_ERROR, str(exc))
    return ChannelReply(auth=await sign_in.report(server.status, message))


async def pasted_redirect(server: ManagedServer, request: SignInRedirect) -> ChannelReply:
    sign_in = server.sign_in
    if sign_in is None:
        return error_reply(RpcCode.INVALID_PARAMS, f"server {server.name!r} does not sign in")
    status, text = await sign_in.deliver_pasted(request.elicitation_id, request.url)
    if status != 200:
        return error_reply(RpcCode.INVALID_PARAMS, text)
    return ChannelReply(auth=await sign_in.report(server.status, text))
