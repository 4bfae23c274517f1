"""tests/conformance_server.py with one addition, for test_transparent_gateway.py: it accepts
`resources/subscribe` and, as the resource changes, sends `notifications/resources/updated` for it on
the subscribe request's own stream, so a subscription has an update to deliver (the conformance
server alone remembers subscriptions and never sends one). Same arguments (`--http PORT`)."""

from typing import Any

import conformance_server as server
import mcp_types as types

accept = server.subscribe


async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> dict[str, Any]:
    answer = await accept(ctx, params)
    updated = types.ResourceUpdatedNotificationParams(uri=str(params.uri))
    await ctx.session.send_notification(types.ResourceUpdatedNotification(params=updated),
                                        related_request_id=ctx.request_id)
    return answer


server.subscribe = subscribe

if __name__ == "__main__":
    server.main()
