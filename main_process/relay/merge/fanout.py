"""FanOuts: one request to several servers and its answers gathered — every page of a list, the
first result when one is enough, a server that does not answer in time left out — then `done`.

Each server's part gets a fresh id (the host's id goes to one server only: router.py); the host's
cancellation cancels every part still in flight.
"""

import logging
from collections.abc import Callable, Sequence
from typing import Any, Final

import msgspec

from main_process.relay.merge.records import FanOut, Headers, Id, Member, Part
from main_process.relay.merge.state import Shared
from main_process.relay.merge.wire import cancelled
from shared import jsonrpc
from shared.errors import RpcCode

logger = logging.getLogger(__name__)

REQUEST_TIMEOUT_S: Final = 60.0  # a request to several servers: one that does not answer is left out
MAX_PAGES: Final = 100  # per server and list: a paginator that never ends cannot hang the host


class FanOuts:
    def __init__(self, state: Shared) -> None:
        self._state = state

    def start(self, method: str, params: dict[str, Any], targets: Sequence[Member], *, host_id: Id | None,
              headers: Headers, done: Callable[[FanOut], None], key: str | None = None, first: bool = False,
              timeout: float = REQUEST_TIMEOUT_S,
              late: Callable[[Member, jsonrpc.Envelope], None] | None = None) -> FanOut:
        fan = FanOut(method, host_id, params, headers, done, key=key, first=first, late=late)
        if host_id is not None:
            self._state.by_host[host_id] = fan
        sends = [(member, self._ask(member, fan, params)) for member in targets]
        if sends:
            fan.timer = self._state.call_later(timeout, lambda: self._timed_out(fan))
        for member, raw in sends:
            if fan.waiting.get(member.name) is not None and not fan.finished:
                member.upstream.from_host(raw, headers)
            elif fan.finished:  # done already (the first result came at once): not sent at all
                member.outstanding.pop(jsonrpc.peek(raw).id, None)  # type: ignore[arg-type]
        fan.sealed = True
        self._maybe_finish(fan)
        return fan

    def _ask(self, member: Member, fan: FanOut, params: dict[str, Any]) -> bytes:
        upstream_id = self._state.fresh(member)
        member.outstanding[upstream_id] = Part(fan)
        fan.waiting[member.name] = upstream_id
        return jsonrpc.request(upstream_id, fan.method, params)

    def answered(self, member: Member, fan: FanOut, envelope: jsonrpc.Envelope) -> None:
        """`member`'s answer to its part of `fan` (a list's page: the next page is asked for)."""
        if fan.waiting.get(member.name) != envelope.id:
            return
        del fan.waiting[member.name]
        if fan.finished:  # after the host got its answer
            if fan.late is not None and member.name in fan.timed_out:
                fan.late(member, envelope)
            return
        if envelope.error is not msgspec.UNSET:
            fan.errors[member.name] = envelope.error_dict()
        else:
            result = envelope.result_dict()
            if fan.key is not None:
                items = result.get(fan.key)
                items = [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []
                got = fan.results.get(member.name)
                if got is None:
                    got = fan.results[member.name] = {**result, fan.key: items}
                else:
                    got[fan.key].extend(items)
                pages = fan.pages[member.name] = fan.pages.get(member.name, 1) + 1
                cursor = result.get("nextCursor")
                got.pop("nextCursor", None)
                if isinstance(cursor, str) and cursor:
                    if pages <= MAX_PAGES:
                        member.upstream.from_host(self._ask(member, fan, {**fan.params, "cursor": cursor}),
                                                  fan.headers)
                        return
                    logger.warning("%s of %s: stopped after %d pages", fan.method, member.name, MAX_PAGES)
            else:
                fan.results[member.name] = result
                if fan.first:
                    self._finish(fan)
                    return
        self._maybe_finish(fan)

    def lost(self, member: Member, fan: FanOut, why: str) -> None:
        """`member` left the session with its part of `fan` in flight: that part failed."""
        if fan.waiting.pop(member.name, None) is not None and not fan.finished:
            fan.errors[member.name] = {"code": RpcCode.SERVER_ERROR, "message": why}
            self._maybe_finish(fan)

    def drop(self, fan: FanOut, reason: object) -> None:
        """The host cancelled it: every server's part is cancelled, and no answer goes out."""
        fan.finished = True
        if fan.timer is not None:
            fan.timer.cancel()
        for name, upstream_id in fan.waiting.items():
            member = self._state.members.get(name)
            if member is not None and member.outstanding.pop(upstream_id, None) is not None:
                member.upstream.from_host(cancelled(upstream_id, reason))
        fan.waiting.clear()

    def _maybe_finish(self, fan: FanOut) -> None:
        if fan.sealed and not fan.waiting and not fan.finished:
            self._finish(fan)

    def _finish(self, fan: FanOut) -> None:
        fan.finished = True
        if fan.timer is not None:
            fan.timer.cancel()
        if fan.host_id is not None and self._state.by_host.get(fan.host_id) is fan:
            del self._state.by_host[fan.host_id]
        fan.done(fan)

    def _timed_out(self, fan: FanOut) -> None:
        if fan.finished:
            return
        fan.timed_out = list(fan.waiting)
        if fan.late is None:  # else a late answer still counts (an initialize: the server joins then)
            for name, upstream_id in list(fan.waiting.items()):
                logger.warning("%s: server %s did not answer within its time; left out", fan.method, name)
                member = self._state.members.get(name)
                if member is not None and member.outstanding.pop(upstream_id, None) is not None:
                    member.upstream.from_host(cancelled(upstream_id, "Elicitron stopped waiting"))
            fan.waiting.clear()
        self._finish(fan)
