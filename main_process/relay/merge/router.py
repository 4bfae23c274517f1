"""Router: where a host request goes, and its answer back.

- requests with a name (`tools/call`, `prompts/get`, a prompt's completion) go to the server the
  prefix names, without it; by URI (`resources/read`, `subscribe`, `unsubscribe`, a resource's
  completion) to the server that listed it or whose template matches it (catalog.py); by task id
  (`tasks/*`) to the server that created the task; `logging/setLevel` to every server (`everyone`);
  anything else by its `name` when it has a prefixed one, else by every server, the first result
  winning (`unknown`);
- the host's request keeps its id toward the one server it goes to (a fresh one only when that
  server has a request of ours with that id in flight); requests to several servers get fresh ids
  (fanout.py). Errors of a server reach the host as the server wrote them; Elicitron's own (an
  unknown prefix, no server for a URI) are -32602 naming the problem.
"""

import logging
from collections.abc import Callable, Sequence
from typing import Any, Final

import msgspec

from main_process.relay.merge.catalog import Catalog
from main_process.relay.merge.fanout import FanOuts
from main_process.relay.merge.records import Deferred, FanOut, Headers, Id, Member, Routed
from main_process.relay.merge.state import Shared
from main_process.relay.merge.wire import cancelled, error_answer, shaped, unnamed, with_params
from shared import jsonrpc
from shared.errors import RpcCode
from shared.merged_names import SEPARATOR

logger = logging.getLogger(__name__)

TASK_METHODS: Final = ("tasks/get", "tasks/update", "tasks/cancel", "tasks/result")


class Router:
    def __init__(self, state: Shared, fans: FanOuts, catalog: Catalog) -> None:
        self._state = state
        self._fans = fans
        self._catalog = catalog

    # ---- by name, URI, task ----------------------------------------------------------------------

    def by_name(self, host_id: Id, method: str, raw: bytes, params: dict[str, Any], headers: Headers,
                list_method: str, *, refreshed: bool = False) -> None:
        public = params.get("name")
        if not isinstance(public, str):
            self._refuse(host_id, f"{method} needs a name")
            return
        found = self._catalog.resolve(list_method, public, refreshed)
        if found is None:  # not in the last listing: look again once
            self._defer(host_id, [list_method], lambda: self.by_name(host_id, method, raw, params, headers,
                                                                      list_method, refreshed=True))
            return
        if isinstance(found, str):
            self._refuse(host_id, found)
            return
        member, own = found
        logger.debug("%s %s -> %s %s", method, public, member.name, own)
        self.route(member, host_id, method, with_params(raw, {**params, "name": own}), unnamed(headers))

    def by_uri(self, host_id: Id, method: str, raw: bytes, params: dict[str, Any], headers: Headers, *,
               refreshed: bool = False) -> None:
        uri = params.get("uri")
        if not isinstance(uri, str):
            self.unknown(host_id, method, raw, params, headers)
            return
        member = self._catalog.resource_owner(uri, refreshed)
        if member is None:
            self._defer(host_id, ["resources/list", "resources/templates/list"],
                        lambda: self.by_uri(host_id, method, raw, params, headers, refreshed=True))
        elif isinstance(member, str):
            self._refuse(host_id, member)
        else:
            self.route(member, host_id, method, raw, headers)

    def complete(self, host_id: Id, raw: bytes, params: dict[str, Any], headers: Headers, *,
                 refreshed: bool = False) -> None:
        ref = params.get("ref")
        ref = ref if isinstance(ref, dict) else {}
        if ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
            found = self._catalog.resolve("prompts/list", ref["name"], refreshed)
            if found is None:
                self._defer(host_id, ["prompts/list"],
                            lambda: self.complete(host_id, raw, params, headers, refreshed=True))
            elif isinstance(found, str):
                self._refuse(host_id, found)
            else:
                member, own = found
                self.route(member, host_id, "completion/complete",
                           with_params(raw, {**params, "ref": {**ref, "name": own}}), unnamed(headers))
        elif ref.get("type") == "ref/resource" and isinstance(ref.get("uri"), str):
            owner = self._catalog.resource_owner(ref["uri"], refreshed)
            if owner is None:
                self._defer(host_id, ["resources/list", "resources/templates/list"],
                            lambda: self.complete(host_id, raw, params, headers, refreshed=True))
            elif isinstance(owner, str):
                self._refuse(host_id, owner)
            else:
                self.route(owner, host_id, "completion/complete", raw, headers)
        else:
            self._refuse(host_id, "completion/complete needs a ref: ref/prompt with a name, or "
                                  "ref/resource with a uri")

    def task_owner(self, method: str, params: dict[str, Any]) -> Member | None:
        """The server that has the task a `tasks/*` request names (None: not known here)."""
        task_id = params.get("taskId")
        if method not in TASK_METHODS or not isinstance(task_id, str):
            return None
        server = self._state.tasks.get(task_id)
        return self._state.members.get(server) if server is not None else None

    def _defer(self, host_id: Id, methods: Sequence[str], then: Callable[[], None]) -> None:
        deferred = self._state.by_host[host_id] = Deferred(host_id)

        def go_on() -> None:
            if self._state.by_host.get(host_id) is deferred:
                del self._state.by_host[host_id]
            if not deferred.cancelled and not self._state.closed:
                then()

        self._catalog.refresh(methods, go_on)

    def _refuse(self, host_id: Id, why: str) -> None:
        self._state.to_host(jsonrpc.error_response(host_id, RpcCode.INVALID_PARAMS, why))

    # ---- at one server ---------------------------------------------------------------------------

    def route(self, member: Member, host_id: Id, method: str, raw: bytes, headers: Headers) -> None:
        """The host's request to one server, under the host's id (unless that server has a request
        of ours with that id in flight)."""
        upstream_id = host_id
        if upstream_id in member.outstanding:
            upstream_id = self._state.fresh(member)
            raw = jsonrpc.with_id(raw, upstream_id)
        routed = Routed(host_id, member.name, upstream_id, method)
        member.outstanding[upstream_id] = routed
        self._state.by_host[host_id] = routed
        member.upstream.from_host(raw, headers)

    def answered(self, member: Member, routed: Routed, envelope: jsonrpc.Envelope, raw: bytes) -> None:
        """The server's answer, to the host under the host's id."""
        by_host = self._state.by_host
        if by_host.get(routed.host_id) is routed:
            del by_host[routed.host_id]
        try:
            if b"task" in raw:
                self._state.note_task(member, envelope.result_dict())
            answer = raw if routed.upstream_id == routed.host_id else jsonrpc.with_id(raw, routed.host_id)
        except (msgspec.DecodeError, RecursionError) as exc:  # the host still gets an answer for its id
            answer = jsonrpc.error_response(routed.host_id, RpcCode.INTERNAL_ERROR,
                                            f"{member.name}'s answer could not be read ({exc}); not passed on")
        self._state.to_host(answer)

    def cancelled(self, routed: Routed, reason: object) -> None:
        """The host cancelled it: so is the server's request, unless it is answered already."""
        member = self._state.members.get(routed.server)
        if member is not None and member.outstanding.get(routed.upstream_id) is routed:
            del member.outstanding[routed.upstream_id]
            member.upstream.from_host(cancelled(routed.upstream_id, reason))

    def lost(self, member: Member, routed: Routed, why: str) -> None:
        """`member` left the session with the request in flight: the host hears it failed."""
        if self._state.by_host.get(routed.host_id) is routed:
            del self._state.by_host[routed.host_id]
        self._state.to_host(jsonrpc.error_response(routed.host_id, RpcCode.SERVER_ERROR,
                                                   f"{routed.method} to {member.name!r} was lost: {why}"))

    # ---- at several servers ----------------------------------------------------------------------

    def everyone(self, host_id: Id, method: str, params: dict[str, Any], headers: Headers, modern: bool, *,
                 capability: str) -> None:
        """One request for every server that offers `capability`; `{}` once all answered."""
        targets = [member for member in self._state.active() if member.offers(capability)]

        def done(fan: FanOut) -> None:
            if fan.results or not fan.errors:
                self._state.to_host(jsonrpc.response(host_id, shaped({}, modern)))
            else:
                self._state.to_host(error_answer(host_id, next(iter(fan.errors.values()))))

        self._fans.start(method, params, targets, host_id=host_id, headers=headers, done=done)

    def unknown(self, host_id: Id, method: str, raw: bytes, params: dict[str, Any], headers: Headers) -> None:
        """A method Elicitron does not know: by its prefixed `name` if it has one, else to every
        server, the first result winning (or the first error, if every server fails)."""
        name = params.get("name")
        if isinstance(name, str):
            owners = sorted((member for member in self._state.active()
                             if name.startswith(member.name + SEPARATOR) and len(name) > len(member.name) + 2),
                            key=lambda member: len(member.name), reverse=True)
            if owners:
                own = name[len(owners[0].name) + len(SEPARATOR):]
                self.route(owners[0], host_id, method, with_params(raw, {**params, "name": own}), unnamed(headers))
                return

        def done(fan: FanOut) -> None:
            if fan.results:
                member_name, result = next(iter(fan.results.items()))
                self._state.note_task(self._state.members.get(member_name), result)
                self._state.to_host(jsonrpc.response(host_id, result))
            elif fan.errors:
                self._state.to_host(error_answer(host_id, next(iter(fan.errors.values()))))
            else:
                self._state.to_host(jsonrpc.error_response(host_id, RpcCode.METHOD_NOT_FOUND,
                                                           f"Method not found: {method} (no server answered it)"))

        self._fans.start(method, params, self._state.active(), host_id=host_id, headers=headers, first=True,
                         done=done)

    def task_list(self, host_id: Id, params: dict[str, Any], headers: Headers, modern: bool) -> None:
        def done(fan: FanOut) -> None:
            if not fan.results and fan.errors:
                self._state.to_host(error_answer(host_id, next(iter(fan.errors.values()))))
                return
            tasks: list[Any] = []
            for name, result in fan.results.items():
                for task in result.get("tasks") or ():
                    if isinstance(task, dict):
                        self._state.note_task(self._state.members.get(name), task)
                        tasks.append(task)
            self._state.to_host(jsonrpc.response(host_id, shaped({"tasks": tasks}, modern)))

        params = {key: value for key, value in params.items() if key != "cursor"}
        self._fans.start("tasks/list", params, self._state.active(), host_id=host_id, headers=headers,
                         key="tasks", done=done)
