"""main: lock, bind, publish the connection file, run servers and broker until told to stop.

`MainApp._compose` builds every part, each given what it needs when it is made, in the order
their needs allow: the wire first (it needs only the servers' list), the consent layer on it, the
broker's requests on both, then the servers, questions and relayed sessions on the broker, and
last `broker.start(...)` hands each message to them. Every part pushes its own stop on one exit
stack as it starts, so main stops in reverse order of start.
"""

import asyncio
import logging
import os
import secrets
import signal
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path

import zmq
import zmq.asyncio
from zmq.auth.asyncio import AsyncioAuthenticator

from main_process.auto_open import AutoOpen
from main_process.clock import MONOTONIC
from main_process.config import Config
from main_process.consent.consent import Consent, remembered_rules
from main_process.consent.long_wait import LongWaits, WaitSettings
from main_process.consent.questions import QuestionDesk
from main_process.consent.shared_requests import SharedRequestsDesk
from main_process.consent.tool_approval import ToolApproval
from main_process.device_mirror import DeviceMirror
from main_process.http_gateway import (
    HttpGatewayChild,
    check_listen,
    forget_old_token_file,
    new_token,
    probe_listen,
)
from main_process.lock import InstanceLock
from main_process.notifications import Notifications
from main_process.paths import default_log_dir, default_state_dir
from main_process.policy.live import Policies
from main_process.published_connection import PublishedConnection
from main_process.relay.host_pipes import HostPipes
from main_process.relay.relay import Relay
from main_process.servers.reloader import Reloader
from main_process.servers.server_desk import ServerDesk, ServerPolicies
from main_process.servers.server_faults import error_reply
from main_process.servers.server_identity import identities
from main_process.servers.servers import ManagedServer
from main_process.store.factory import default_audit_path, default_machine, open_store
from main_process.store.spool import spool_path
from main_process.web_child import WebWindowChild
from main_process.wire.broker import ZAP_DOMAIN, Broker, Listener, Receivers, StatusSources
from main_process.wire.consent_topics import NoRules
from main_process.wire.curve_keys import AllowListProvider, CurveKeys
from main_process.wire.open_calls import OpenCalls
from main_process.wire.tcp_front import TcpFront, parse_tcp_listen
from main_process.wire.wire import Wire
from shared import PROTOCOL_VERSION, channels, locator
from shared.codec import DEFAULT_MAX_BODY_BYTES
from shared.connection_file import ConnectionInfo, ensure_private_dir, ipc_endpoint_beside
from shared.descriptors import raise_soft_limit
from shared.errors import ConfigError, RpcCode
from shared.messages import ListenerStatus
from shared.web_devices import default_web_dir

logger = logging.getLogger(__name__)

# What a call still open when main stops is answered (its server is stopped after).
STOPPING = error_reply(RpcCode.SERVER_ERROR, "main is stopping: the call did not finish")


class MainApp:
    """`elicitron main`: its settings, and the run that builds and stops every part."""

    def __init__(
        self,
        config: Config,
        connection_path: Path,
        *,
        log_dir: Path | None = None,
        audit_path: Path | None = None,
        auto_open_window: bool = False,
        listen: str | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        rules: bool = True,
        mcp_http: str | None = None,
        mcp_http_tls: tuple[Path, Path] | None = None,
        mcp_http_insecure: bool = False,
        web: str | None = None,
        web_tls: tuple[Path, Path] | None = None,
        web_insecure: bool = False,
        store: str | None = None,
    ) -> None:
        self.config = config  # as main starts (reloader.py keeps the current one)
        self.store_url = config.store if store is None else store  # --store / ELICITRON_STORE win (factory.py)
        self.connection_path = connection_path
        self.log_dir = log_dir or default_log_dir()
        self.audit_path = audit_path or default_audit_path()  # the SQLite store's (the default store)
        self.auto_open_window = config.auto_open_window if config.auto_open_window is not None else auto_open_window
        self.listen = listen
        self.max_body_bytes = max_body_bytes
        # The consent layer (rules, remembered answers, tool approval); rules=False runs main
        # without it (the bench's baseline).
        self.rules = rules
        self.mcp_http = mcp_http
        self.mcp_http_tls = mcp_http_tls  # (certificate, key): https
        self.mcp_http_insecure = mcp_http_insecure
        self.web = web  # `--web HOST:PORT` (checked by the CLI): the web window runs as a child
        self.web_tls = web_tls
        self.web_insecure = web_insecure
        self._stop = asyncio.Event()

    async def run(self) -> None:
        ensure_private_dir(self.connection_path.parent)
        lock = InstanceLock(self.connection_path.with_name(self.connection_path.name + ".lock"))
        lock.acquire()
        try:
            await self._run_locked()
        finally:
            lock.release()

    async def _run_locked(self) -> None:
        if self.mcp_http is not None:
            probe_listen(check_listen(self.mcp_http))
            forget_old_token_file()  # a port in use: one line before anything starts
        if self.web is not None:
            probe_listen(self.web, "--web")
        # Every part pushes its own stop as it starts: main stops in reverse order of start (and
        # stops what did start when a later part fails to), so nothing that answers on the
        # broker's socket outlives it.
        async with AsyncExitStack() as stack:
            stack.callback(logger.info, "main stopped")
            servers = await self._compose(stack)
            await self._stop.wait()
            logger.info("stopping: %d servers", len(servers))

    async def _compose(self, stack: AsyncExitStack) -> ServerDesk:
        """Every part, made with what it needs and started, its stop pushed on `stack`; returns the
        servers (a reload changes them)."""
        loop = asyncio.get_running_loop()
        config = self.config
        token = secrets.token_hex(32)
        limit = raise_soft_limit()  # before any socket: libzmq aborts main on EMFILE
        logger.info("open files: up to %d", limit)
        remote, front = self._remote_listener(stack)
        # What outlives a request, opened once and handed to the parts that keep it (store/).
        store = open_store(self.store_url, audit_path=self.audit_path, record_values=config.audit_values,
                           machine=config.machine,
                           spool=spool_path(default_state_dir(), self.connection_path, self.store_url or ""))
        stack.push_async_callback(store.close)
        await store.open()  # unreachable: one line, and main does not start
        endpoint = ipc_endpoint_beside(self.connection_path)
        pipes_path = Path(ipc_endpoint_beside(self.connection_path, "host-pipes.sock").removeprefix("ipc://"))
        connection = PublishedConnection(self.connection_path, ConnectionInfo(
            protocol=PROTOCOL_VERSION, endpoint=endpoint, token=token, pid=os.getpid(),
            remote_endpoint=front.address if front else None,
            remote_server_key=remote.curve_keypair[0].decode() if remote and remote.curve_keypair else None,
            mcp_http_token=new_token() if self.mcp_http else None, host_pipes=str(pipes_path)))
        # Made now, started last: from the first status a peer can ask for, main says the web
        # window is starting (`pair --web` waits for it).
        http_child = self._http_gateway(connection)
        web_child = self._web_window()
        calls = OpenCalls()  # peers' tool calls and MCP requests not answered yet
        servers = ServerDesk(calls)
        notifications = Notifications(machine=config.machine or default_machine())
        wire = Wire(endpoint=endpoint, server_infos=servers.infos, remote=remote, max_body_bytes=self.max_body_bytes)
        wire.bind()
        stack.callback(wire.close)
        consent = None
        if self.rules:
            await store.claim(self.connection_path)  # the CLI then changes the rules through this main
            consent = Consent(wire.consent_ports, store.rules, await remembered_rules(store.rules, wire.consent_ports),
                              config.rules, loop, identities(config.servers), Policies(config.policies))
            stack.push_async_callback(consent.close)
        auto_open = AutoOpen(self.connection_path, enabled=self.auto_open_window, renderers=wire.attachments.renderers)
        broker = Broker(wire, token=token, session=channels.new_uuid7(), audit=store.audit, rules=consent,
                        opened=notifications.opened, unseen=auto_open.no_window_attached, status=StatusSources(
                            http_gateway=http_child.status if http_child else None,
                            rotate_http_token=_rotation(connection, http_child),
                            listeners=_listener_status(front), notify=notifications.statuses,
                            web_window=web_child.status if web_child else None,
                            policies=consent.policies.status if consent is not None else None,
                            store=store.status))
        stack.push_async_callback(broker.close)
        shared: SharedRequestsDesk | None = None
        if store.inbox is not None:  # a store many mains share: one inbox for all of them
            shared = SharedRequestsDesk(store.inbox, broker.pending, main_id=broker.session,
                                        reload_rules=consent.reload_stored if consent is not None else None)
            broker.pending.shared = shared
            shared.start()
            stack.push_async_callback(shared.close)  # after the servers stopped: their requests ended
        if store.devices is not None:  # paired web devices every main of the store accepts
            mirror = DeviceMirror(store.devices, default_web_dir())
            mirror.start()
            stack.push_async_callback(mirror.close)
        stack.callback(calls.close, STOPPING)  # calls answered while the socket is open
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(signum, self._stop.set)
        for server_config in config.servers.values():
            servers.add(ManagedServer(server_config, broker.server_ports, self.log_dir))
        await notifications.replace(config.notify, broker.pending, config.escalations)
        stack.push_async_callback(notifications.close)  # the one running then (reload replaces it)
        # A host's call waiting on a card longer than the host waits: progress, or "retry" (issue 36)
        waits = LongWaits(WaitSettings(config.wait_progress_s, config.wait_retry_s, config.wait_retry_kept_s,
                                       config.machine or default_machine(), task_ttl_s=config.wait_task_ttl_s,
                                       task_after_s=config.wait_task_s),
                          MONOTONIC)
        approval = ToolApproval(consent, broker.pending, wire.publisher, waits) if consent is not None else None
        if approval is not None:
            stack.callback(approval.close)
        relay = Relay(broker.relay_ports, servers.get, approval, servers.infos, waits)  # hosts' own sessions with a server
        stack.push_async_callback(relay.close)
        reloader = Reloader(config, servers=servers, server_ports=broker.server_ports, publisher=wire.publisher,
                            consent=consent, notifications=notifications, pending=broker.pending,
                            log_dir=self.log_dir)
        broker.start(Receivers(
            calls=servers, servers=servers, server_policy=ServerPolicies(servers, wire.publisher).set_server_policy,
            reload=reloader.reload, shutdown=self._stop.set, rules=consent if consent is not None else NoRules(),
            questions=QuestionDesk(broker.pending, broker.gate,
                                   resume=shared.resume_question if shared is not None else None),
            relay=relay, merged=relay.merged))
        host_pipes = HostPipes(pipes_path, token, wire.host_peer, relay)
        host_pipes.start()
        stack.push_async_callback(host_pipes.close)  # before the relay's sessions end: serve takes its pipes back
        connection.write()
        stack.callback(connection.remove)
        auto_open.listening()  # windows waiting for a main can attach from now on
        locator.main_started(self.connection_path)  # found by hosts that strip XDG_RUNTIME_DIR
        stack.callback(locator.main_stopped, self.connection_path)
        logger.info("main %s listening on %s (config %s, %d servers, audit %s)", broker.session, broker.endpoint,
                    config.source, len(servers), store.description)
        for server in servers:
            server.start()
        stack.push_async_callback(servers.stop_all)  # those running then (reload changes them)
        if http_child is not None:
            http_child.start()
            stack.push_async_callback(http_child.stop)
        if web_child is not None:
            web_child.start()
            stack.push_async_callback(web_child.stop)
        stack.callback(_announce_stop, wire, auto_open, calls)  # the first thing stopping does
        return servers

    def _remote_listener(self, stack: AsyncExitStack) -> tuple[Listener | None, TcpFront | None]:
        """The tcp listener for remote windows: a capped front (tcp_front.py) on the --listen address,
        piping to a CURVE ROUTER with main's keypair on a private ipc endpoint; clients by allow-list."""
        if self.listen is None:
            return None, None
        host, port = parse_tcp_listen(self.listen)
        front = TcpFront(host, port, ipc_endpoint_beside(self.connection_path, "main-tcp.sock").removeprefix("ipc://"))
        try:
            front.start()  # first: a port in use is one line, before anything else starts
        except OSError as exc:
            raise ConfigError(f"--listen {self.listen}: cannot listen there ({exc.strerror or exc})") from None
        stack.push_async_callback(front.close)
        keys = CurveKeys()
        # The ZAP handler must live in the same libzmq context as the ROUTER; shadow it for asyncio.
        authenticator = AsyncioAuthenticator(zmq.asyncio.Context.shadow(zmq.Context.instance()))
        authenticator.start()
        stack.callback(authenticator.stop)
        authenticator.configure_curve_callback(ZAP_DOMAIN.decode(), AllowListProvider(keys))
        return Listener(f"ipc://{front.backend_path}", keys.server_keypair()), front

    def _http_gateway(self, connection: PublishedConnection) -> HttpGatewayChild | None:
        """`--mcp-http`: the gateway child serves MCP hosts; its URL joins the connection file."""
        if self.mcp_http is None:
            return None
        return HttpGatewayChild(check_listen(self.mcp_http), self.connection_path, self.log_dir,
                                connection.mcp_http_url, tls=self.mcp_http_tls, insecure=self.mcp_http_insecure)

    def _web_window(self) -> WebWindowChild | None:
        """`--web`: the web window child; each page a browser opens on it is a window of this main."""
        if self.web is None:
            return None
        return WebWindowChild(self.web, self.connection_path, self.log_dir, tls=self.web_tls,
                              insecure=self.web_insecure)


def _rotation(connection: PublishedConnection, child: HttpGatewayChild | None) -> Callable[[], Awaitable[None]] | None:
    """How msgRotateHttpToken rotates the MCP HTTP token: a new one in the connection file, and the
    child restarted on it, so the old one is refused."""
    if child is None:
        return None

    async def rotate() -> None:
        connection.new_mcp_http_token()
        await child.restart()

    return rotate


def _listener_status(front: TcpFront | None) -> Callable[[], list[ListenerStatus]]:
    return (lambda: [front.status()]) if front is not None else list


def _announce_stop(wire: Wire, auto_open: AutoOpen, calls: OpenCalls) -> None:
    """Stopping starts here: peers hear `bye` (windows show main as gone now, not once its servers
    have stopped) and every open call is answered; then the parts stop in reverse order."""
    wire.publisher.say_goodbye()
    auto_open.cancel()
    answered = calls.close(STOPPING)
    if answered:
        logger.info("stopping: answered %d open calls", answered)
