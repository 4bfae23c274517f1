"""Catalog: the host's lists, made of every server's, and where each name or URI in them leads.

- lists: every page of every server, one page for the host, names `<server>__<name>` (tools,
  prompts, resources' `name`; URIs unchanged). A name two servers would both produce (server `a`'s
  `b__c`, server `a__b`'s `c`) is left out, with a warning in the log and to the host (a log
  message, at listing time, where the host takes warnings): never routed to the wrong one;
- a public name leads to the server its prefix names, under its own name; a URI to the server that
  listed it, else whose template matches it most specifically (templates are looked at only with
  every server's lists current, so a catch-all never takes a URI another server lists). A name or
  URI the last listing does not explain is looked up again once (`refresh`) before it is refused.
"""

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from main_process.relay.merge.fanout import FanOuts
from main_process.relay.merge.records import FanOut, Headers, Id, Member
from main_process.relay.merge.state import Shared
from main_process.relay.merge.templates import Template, specificity
from main_process.relay.merge.wire import cache_fields, shaped
from shared import jsonrpc
from shared.errors import RpcCode
from shared.merged_names import SEPARATOR, clash_notice

logger = logging.getLogger(__name__)

LOG_LEVEL_KEY: Final = "io.modelcontextprotocol/logLevel"
_LOG_LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


@dataclass(frozen=True)
class ListKind:
    key: str  # the result's key for its items
    capability: str  # the server capability that offers it
    kind: str  # what an item is called in messages


LISTS: Final = {
    "tools/list": ListKind("tools", "tools", "tool"),
    "prompts/list": ListKind("prompts", "prompts", "prompt"),
    "resources/list": ListKind("resources", "resources", "resource"),
    "resources/templates/list": ListKind("resourceTemplates", "resources", "resource template"),
}
CHANGED: Final = {  # a server's list_changed -> the listings it makes stale
    "notifications/tools/list_changed": ("tools/list",),
    "notifications/prompts/list_changed": ("prompts/list",),
    "notifications/resources/list_changed": ("resources/list", "resources/templates/list"),
}


class Catalog:
    def __init__(self, state: Shared, fans: FanOuts) -> None:
        self._state = state
        self._fans = fans
        self.log_level: str | None = None  # the host's logging/setLevel (handshake era)
        self._routes: dict[str, dict[str, tuple[str, str]]] = {method: {} for method in LISTS}
        self._clashes: dict[str, dict[str, list[str]]] = {method: {} for method in LISTS}
        self._uris: dict[str, str] = {}
        self._templates: list[Template] = []
        self._refreshing: dict[str, list[Callable[[], None]]] = {}
        self._warned: set[tuple[str, str]] = set()
        self._notices: list[str] = []  # for the host: names left out since it last heard

    # ---- listing -------------------------------------------------------------------------------

    def list_for_host(self, host_id: Id, method: str, params: dict[str, Any], headers: Headers,
                      modern: bool) -> None:
        if params.get("cursor") is not None:  # every item came on the first page
            self._state.to_host(jsonrpc.error_response(host_id, RpcCode.INVALID_PARAMS,
                                                       f"invalid cursor: {method} gives every item on one page"))
            return
        self._list(method, params, headers, host_id=host_id, modern=modern)

    def _list(self, method: str, params: dict[str, Any], headers: Headers, *, host_id: Id | None,
              modern: bool) -> None:
        listing = LISTS[method]
        targets = [member for member in self._state.active() if member.offers(listing.capability)]
        self._fans.start(method, params, targets, host_id=host_id, headers=headers, key=listing.key,
                         done=lambda fan: self._listed(fan, modern))

    def _listed(self, fan: FanOut, modern: bool) -> None:
        method = fan.method
        key = LISTS[method].key
        members = self._state.members
        for name in fan.timed_out:
            member = members.get(name)
            if member is not None:
                member.listings.pop(method, None)
        for name, member in members.items():
            if name in fan.results:
                member.listings[method] = fan.results[name][key]
                member.stale.discard(method)
            elif name in fan.errors:
                member.listings.pop(method, None)
                logger.info("%s of %s left out: %s", method, name, fan.errors[name].get("message"))
        items = self.rebuild(method)
        self._tell_notices(fan.params, modern)
        for waiter in self._refreshing.pop(method, []) if fan.host_id is None else ():
            waiter()
        if fan.host_id is not None:
            result: dict[str, Any] = {key: items}
            if modern:
                result.update(cache_fields(fan.results.values()))
            self._state.to_host(jsonrpc.response(fan.host_id, shaped(result, modern)))

    def rebuild(self, method: str) -> list[dict[str, Any]]:
        """The host's listing from every server's last one, and where each name leads."""
        kind = LISTS[method]
        found: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
        unnamed: list[dict[str, Any]] = []
        for member in self._state.active():
            for item in member.listings.get(method, ()):
                own = item.get("name")
                if isinstance(own, str):
                    found.setdefault(f"{member.name}{SEPARATOR}{own}", []).append((member.name, own, item))
                else:
                    unnamed.append(item)
        items: list[dict[str, Any]] = []
        routes: dict[str, tuple[str, str]] = {}
        clashes: dict[str, list[str]] = {}
        for public, entries in found.items():
            owners = list(dict.fromkeys(server for server, _, _ in entries))
            if len(owners) > 1:
                clashes[public] = owners
                if (method, public) not in self._warned:
                    self._warned.add((method, public))
                    notice = clash_notice(kind.kind, public, [(server, own) for server, own, _ in entries])
                    logger.warning("%s", notice)
                    self._notices.append(notice)
                continue
            for server, own, item in entries:
                items.append({**item, "name": public})
                routes[public] = (server, own)
        items += unnamed
        self._routes[method], self._clashes[method] = routes, clashes
        if method == "resources/list":
            uris: dict[str, str] = {}
            for item in items:
                uri = item.get("uri")
                route = routes.get(item.get("name", ""))
                if isinstance(uri, str) and route is not None:
                    if uri in uris and uris[uri] != route[0] and ("uri", uri) not in self._warned:
                        self._warned.add(("uri", uri))
                        logger.warning("resource %s is listed by %s and %s: reads go to %s", uri, uris[uri],
                                       route[0], uris[uri])
                    uris.setdefault(uri, route[0])
            self._uris = uris
        elif method == "resources/templates/list":
            self._templates = [Template(item["uriTemplate"], routes[item["name"]][0],
                                        specificity(item["uriTemplate"]))
                               for item in items if isinstance(item.get("uriTemplate"), str) and item.get("name") in routes]
        return items

    def _tell_notices(self, params: dict[str, Any], modern: bool) -> None:
        """What the merger left out, as a warning log message for the host, where the host takes
        warnings: in 2026-07-28 when the listing's request opted in to that level (as servers
        must), before it unless its logging/setLevel is above warning."""
        notices, self._notices = self._notices, []
        if modern:
            meta = params.get("_meta")
            level = meta.get(LOG_LEVEL_KEY) if isinstance(meta, dict) else None
        else:
            level = self.log_level or "warning"
        if level not in _LOG_LEVELS or _LOG_LEVELS.index(level) > _LOG_LEVELS.index("warning"):
            return
        for notice in notices:
            self._state.to_host(jsonrpc.notification("notifications/message",
                                                     {"level": "warning", "logger": "elicitron", "data": notice}))

    def refresh(self, methods: Sequence[str], then: Callable[[], None]) -> None:
        """List again (the merger's own requests), then `then`."""
        left = set(methods)

        def one_done(method: str) -> None:
            left.discard(method)
            if not left:
                then()

        for method in methods:
            waiters = self._refreshing.get(method)
            start = waiters is None
            if waiters is None:
                waiters = self._refreshing[method] = []
            waiters.append(partial(one_done, method))
            if start:
                self._list(method, self._state.own_params(), None, host_id=None,
                           modern=self._state.era == "modern")

    # ---- where a name or URI leads -------------------------------------------------------------

    def _fresh_listing(self, method: str, members: Iterable[Member]) -> bool:
        return all(method in member.listings and method not in member.stale for member in members)

    def resolve(self, list_method: str, public: str, refreshed: bool) -> tuple[Member, str] | str | None:
        """(server, its name) for a public name; a str saying why there is none; None: list first."""
        kind = LISTS[list_method].kind
        clash = self._clashes[list_method].get(public)
        if clash is not None:
            return (f"{kind} {public!r} is ambiguous: servers {' and '.join(repr(s) for s in clash)} would both "
                    f"have it; Elicitron leaves it out")
        route = self._routes[list_method].get(public)
        active = {member.name: member for member in self._state.active()}
        if route is not None and route[0] in active:
            return active[route[0]], route[1]
        owners = sorted((member for name, member in active.items()
                         if public.startswith(name + SEPARATOR) and len(public) > len(name) + len(SEPARATOR)),
                        key=lambda member: len(member.name), reverse=True)
        if not owners:
            names = ", ".join(active) or "none are configured"
            return (f"unknown {kind} {public!r}: names here are <server>{SEPARATOR}<{kind}>, "
                    f"with <server> one of: {names}")
        if not refreshed and not self._fresh_listing(list_method, owners):
            return None
        for member in owners:
            if list_method not in member.listings:  # it could not list them: the server decides
                return member, public[len(member.name) + len(SEPARATOR):]
        member = owners[0]
        own = public[len(member.name) + len(SEPARATOR):]
        listing = [item.get("name") for item in member.listings.get(list_method, ())]
        shown = ", ".join(f"{member.name}{SEPARATOR}{name}" for name in listing[:20] if isinstance(name, str))
        return (f"unknown {kind} {public!r}: server {member.name!r} has no {kind} {own!r} "
                f"(its {LISTS[list_method].key}: {shown or 'none'})")

    def resource_owner(self, uri: str, refreshed: bool) -> Member | str | None:
        """The server a URI leads to; a str saying why there is none; None: list first."""
        active = {member.name: member for member in self._state.active()}
        owner = self._uris.get(uri)
        if owner in active:
            return active[owner]
        offering = [member for member in active.values() if member.offers("resources")]
        if not refreshed and not (self._fresh_listing("resources/list", offering)
                                  and self._fresh_listing("resources/templates/list", offering)):
            # Templates only from every server's current lists: a server that lists the URI wins
            # over any template (else a catch-all elsewhere answers a read meant for it), and a
            # template added since the host last listed may be the more specific one.
            return None
        best: Template | None = None
        for template in self._templates:
            if template.server not in active:
                continue
            if template.text == uri:  # a template itself (a completion's ref/resource)
                return active[template.server]
            if template.matches(uri) and (best is None or template.specificity > best.specificity):
                best = template
        if best is not None:
            return active[best.server]
        return f"unknown resource {uri!r}: no server lists it or a template matching it"
