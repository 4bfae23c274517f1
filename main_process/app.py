"""main: lock, bind, publish the connection file, run servers and broker until told to stop."""

import asyncio
import logging
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable
from contextlib import AsyncExitStack
from pathlib import Path

import msgspec
import zmq
import zmq.asyncio
from zmq.auth.asyncio import AsyncioAuthenticator

from main_process.broker import ZAP_DOMAIN, Broker, Listener, ProgressTo, ReplyTo
from main_process.config import Config, differs_beyond_approval, load_config
from main_process.consent import Consent, remembered_rules
from main_process.curve_keys import AllowListProvider, CurveKeys
from main_process.host_pipes import HostPipes
from main_process.http_gateway import (
    HttpGatewayChild,
    check_listen,
    forget_old_token_file,
    new_token,
    probe_listen,
)
from main_process.lock import InstanceLock
from main_process.notify.notifier import Notifier
from main_process.open_calls import OpenCalls
from main_process.paths import default_log_dir
from main_process.peer_calls import Cancel
from main_process.peers import Peer
from main_process.policy.live import Policies
from main_process.questions import QuestionDesk
from main_process.relay import Relay
from main_process.reload_report import reload_report
from main_process.server_identity import identities
from main_process.servers import ManagedServer, error_reply
from main_process.store.factory import default_audit_path, open_store
from main_process.tcp_front import TcpFront, parse_tcp_listen
from main_process.web_child import WebWindowChild
from shared import PROTOCOL_VERSION, channels, locator
from shared.codec import DEFAULT_MAX_BODY_BYTES
from shared.connection_file import (
    ConnectionInfo,
    ensure_private_dir,
    ipc_endpoint_beside,
    remove_connection_file,
    write_connection_file,
)
from shared.descriptors import raise_soft_limit
from shared.errors import ConfigError, RpcCode
from shared.messages import (
    Ask,
    AuthRequest,
    CallTool,
    ChannelReply,
    McpClose,
    McpRelay,
    McpRequest,
    RevokeReport,
    RevokeRules,
    ServerControl,
    ServerControlReport,
    ServerInfo,
    ServerPolicy,
    SignInRedirect,
    Withdraw,
)

logger = logging.getLogger(__name__)

AUTO_OPEN_QUIET_S = 15.0  # after opening a window, give it this long to attach before opening another
# A main just started (e.g. by `ask --start` for its question) gives the windows that were waiting
# for it this long to attach (they retry every second) before it opens one of its own.
AUTO_OPEN_GRACE_S = 3.0
AUTO_OPEN_GRACE_ENV = "ELICITRON_AUTO_OPEN_GRACE_S"
# What a call still open when main stops is answered (its server is stopped after).
STOPPING = error_reply(RpcCode.SERVER_ERROR, "main is stopping: the call did not finish")


class MainApp:
    """The host the broker talks to: owns the servers, the audit log and the shutdown switch."""

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
        self.config = config
        self.store_url = config.store if store is None else store  # --store / ELICITRON_STORE win (factory.py)
        self.connection_path = connection_path
        self.log_dir = log_dir or default_log_dir()
        self.audit_path = audit_path or default_audit_path()  # the SQLite store's (the default store)
        self.auto_open_window = config.auto_open_window if config.auto_open_window is not None else auto_open_window
        self.listen = listen
        self.max_body_bytes = max_body_bytes
        self.mcp_http = mcp_http
        self.mcp_http_tls = mcp_http_tls  # (certificate, key): https
        self.mcp_http_insecure = mcp_http_insecure
        self.web = web  # `--web HOST:PORT` (checked by the CLI): the web window runs as a child
        self.web_tls = web_tls
        self.web_insecure = web_insecure
        self._stop = asyncio.Event()
        self._last_auto_open = float("-inf")
        self._started_at = time.monotonic()  # again once the connection file is written
        self.auto_open_grace_s = _auto_open_grace()
        self._auto_open_timer: asyncio.TimerHandle | None = None
        self.servers: dict[str, ManagedServer] = {}
        self.broker: Broker | None = None
        # The consent layer (rules, remembered answers, tool approval); rules=False runs main
        # without it (the bench's baseline).
        self.rules = rules
        self.consent: Consent | None = None
        self.questions: QuestionDesk | None = None  # made once the broker has started
        self._relay: Relay | None = None  # hosts' own sessions with a server, once the broker runs
        self.notifier: Notifier | None = None  # the config's `notify` webhooks, once the broker runs
        self._calls = OpenCalls()  # peers' tool calls and MCP requests not answered yet

    # ---- BrokerHost --------------------------------------------------------------------

    def server_infos(self) -> list[ServerInfo]:
        return [server.info() for server in self.servers.values()]

    def call_tool(self, request: CallTool, caller: Peer, reply: ReplyTo,
                  progress: ProgressTo | None = None) -> Cancel | None:
        server = self.servers.get(request.server)
        if server is None:
            reply(self._unknown_server(request.server))
            return None
        # Windows' and controllers' calls: the user's own, never approved (hosts call in their
        # relayed sessions, where consent decides: relay.py).
        return self._calls.start(reply, progress, lambda answer, report: server.call_tool(
            request.tool, request.arguments, caller.window, answer, call_id=request.response_channel,
            progress=report))

    # ---- relayed sessions (extension msgMcpRelay) ----------------------------------------

    def relay(self, peer: Peer, message: McpRelay) -> None:
        if self._relay is not None:
            self._relay.from_peer(peer, message)

    def relay_close(self, peer: Peer, close: McpClose) -> None:
        if self._relay is not None:
            self._relay.close_from_peer(peer, close)

    def peer_gone(self, peer: Peer) -> None:
        if self._relay is not None:
            self._relay.peer_gone(peer.routing_id)

    def rules_report(self) -> ChannelReply:
        return self.consent.rules_report() if self.consent is not None else ChannelReply(rules=[])

    def revoke_rules(self, request: RevokeRules, caller: Peer) -> Awaitable[ChannelReply]:
        if self.consent is None:
            return _ready(ChannelReply(revoked=RevokeReport(revoked=[], refused=["this main runs without rules"])))
        return self.consent.revoke_rules(request, caller.name or caller.window)  # in memory now, the store soon

    def mcp_request(self, request: McpRequest, reply: ReplyTo) -> None:
        server = self.servers.get(request.server)
        if server is None:
            reply(self._unknown_server(request.server))
            return
        self._calls.start(reply, None, lambda answer, _report: server.mcp_request(request.method, request.params,
                                                                                    answer))

    async def control_server(self, request: ServerControl) -> ChannelReply:
        server = self.servers.get(request.server)
        if server is None:
            return self._unknown_server(request.server)
        logger.info("%s server %s on request", request.action, request.server)
        if request.action == "stop":
            await server.stop()
        elif request.action == "restart":
            await server.restart()
        else:
            server.start()
        return ChannelReply(control=ServerControlReport(server=request.server, status=server.status))

    async def reload(self, config: str | None = None) -> ChannelReply:
        """Re-read the config (or read `config`, an absolute path, which becomes main's): start added
        servers, stop removed ones, restart changed ones."""
        if config is not None and not Path(config).is_absolute():
            return error_reply(RpcCode.INVALID_PARAMS, f"the config path must be absolute: {config!r}")
        try:
            fresh = load_config(Path(config) if config is not None else self.config.path)
        except ConfigError as exc:
            return error_reply(RpcCode.INVALID_PARAMS, str(exc))
        before, old = self.config, self.config.servers
        policy_problem: str | None = None
        added = [n for n in fresh.servers if n not in old]
        removed = [n for n in old if n not in fresh.servers]
        changed = [n for n in fresh.servers if n in old and differs_beyond_approval(fresh.servers[n], old[n])]
        unchanged = [n for n in fresh.servers if n in old and n not in changed]
        if fresh.notify != self.config.notify:
            await self._start_notifier(fresh)
        if fresh.store != self.config.store:
            logger.warning("the config's store changed: this main keeps the one it opened until it restarts")
        self.config = fresh
        if self.consent is not None:
            self.consent.set_config_rules(fresh.rules, identities(fresh.servers))
            policy_problem = self.consent.policies.reload(fresh.policies)  # a bad file keeps the last good set
        for name in unchanged:  # a new toolApproval takes effect without a restart
            self.servers[name].config = fresh.servers[name]
        for name in removed + changed:
            await self.servers[name].stop()
            del self.servers[name]
        assert self.broker is not None
        for name in added + changed:
            self.servers[name] = ManagedServer(fresh.servers[name], self.broker, self.log_dir)
            self.servers[name].start()
        self.broker.publish_servers()
        logger.info("reloaded %s: added %s, removed %s, changed %s", fresh.source, added, removed, changed)
        return ChannelReply(reload=reload_report(before, fresh, policy_problem))  # every change applied (reload_report.py)

    def set_server_policy(self, policy: ServerPolicy, caller: Peer) -> None:
        server = self.servers.get(policy.server)
        if server is None:
            return
        server.decline_all = policy.decline_all
        verb = "declining every request" if policy.decline_all else "asking again"
        logger.info("server %s: %s for this session (chosen in %s)", policy.server, verb,
                    caller.name or caller.window)
        assert self.broker is not None
        self.broker.publish_notice("info", f"{verb} from this server for this session", policy.server)

    # ---- sign-in (main_process/oauth) --------------------------------------------------------

    async def auth(self, request: AuthRequest) -> ChannelReply:
        from main_process.oauth.commands import auth_command

        server = self.servers.get(request.server)
        return self._unknown_server(request.server) if server is None else await auth_command(server, request.action)

    async def sign_in_redirect(self, request: SignInRedirect) -> ChannelReply:
        from main_process.oauth.commands import pasted_redirect

        server = self.servers.get(request.server)
        return self._unknown_server(request.server) if server is None else await pasted_redirect(server, request)

    def request_shutdown(self) -> None:
        self._stop.set()

    def no_window_attached(self) -> None:
        if not self.auto_open_window or self._auto_open_timer is not None:
            return
        if time.monotonic() - self._last_auto_open < AUTO_OPEN_QUIET_S:
            return
        wait = self._started_at + self.auto_open_grace_s - time.monotonic()
        if wait > 0:  # windows that were waiting for this main may be attaching right now
            logger.info("an elicitation is waiting and no window is attached: opening one unless a window "
                        "attaches within %.1f s", wait)
            self._auto_open_timer = asyncio.get_running_loop().call_later(wait, self._auto_open_after_grace)
            return
        self._open_window()

    def _auto_open_after_grace(self) -> None:
        self._auto_open_timer = None
        if self.broker is None or self.broker.renderers():
            logger.info("auto-open: a window attached within the grace; opening none")
            return
        if not self.broker.pending.all():
            logger.info("auto-open: nothing waits any more; opening no window")
            return
        self._open_window()

    def _open_window(self) -> None:
        self._last_auto_open = time.monotonic()
        logger.info("an elicitation is waiting and no window is attached: opening one")
        # The renderer is a separate program; main only starts it and never imports Qt.
        subprocess.Popen([sys.executable, "-m", "renderer_process", "--connection", str(self.connection_path),
                          "--name", "auto-opened"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)

    # ---- questions from programs (extension msgAsk; main_process/questions.py) ---------------

    def ask_question(self, request: Ask, caller: Peer, reply: ReplyTo) -> None:
        assert self.questions is not None
        self.questions.ask(caller.routing_id, request, reply)

    def withdraw_question(self, request: Withdraw, caller: Peer) -> None:
        assert self.questions is not None
        self.questions.withdraw(caller.routing_id, request)

    def _remote_listener(self) -> tuple[Listener | None, AsyncioAuthenticator | None, TcpFront | None]:
        """The tcp listener for remote windows: a capped front (tcp_front.py) on the --listen address,
        piping to a CURVE ROUTER with main's keypair on a private ipc endpoint; clients by allow-list."""
        if self.listen is None:
            return None, None, None
        host, port = parse_tcp_listen(self.listen)
        front = TcpFront(host, port, ipc_endpoint_beside(self.connection_path, "main-tcp.sock").removeprefix("ipc://"))
        try:
            front.start()  # first: a port in use is one line, before anything else starts
        except OSError as exc:
            raise ConfigError(f"--listen {self.listen}: cannot listen there ({exc.strerror or exc})") from None
        keys = CurveKeys()
        # The ZAP handler must live in the same libzmq context as the ROUTER; shadow it for asyncio.
        authenticator = AsyncioAuthenticator(zmq.asyncio.Context.shadow(zmq.Context.instance()))
        authenticator.start()
        authenticator.configure_curve_callback(ZAP_DOMAIN.decode(), AllowListProvider(keys))
        return Listener(f"ipc://{front.backend_path}", keys.server_keypair()), authenticator, front

    def _start_http_gateway(self, info: ConnectionInfo) -> HttpGatewayChild | None:
        """`--mcp-http`: the gateway child serves MCP hosts; its URL joins the connection file."""
        if self.mcp_http is None:
            return None

        current = info

        def publish(url: str) -> None:
            nonlocal current
            current = msgspec.structs.replace(current, mcp_http_url=url)
            write_connection_file(self.connection_path, current)

        async def rotate() -> None:
            """A new token in the connection file, and the child restarted on it: the old one is refused."""
            nonlocal current
            current = msgspec.structs.replace(current, mcp_http_token=new_token())
            write_connection_file(self.connection_path, current)
            await child.restart()

        child = HttpGatewayChild(check_listen(self.mcp_http), self.connection_path, self.log_dir, publish,
                                 tls=self.mcp_http_tls, insecure=self.mcp_http_insecure)
        if self.broker is not None:
            self.broker.http_gateway_status = child.status
            self.broker.rotate_http_token = rotate
        child.start()
        return child

    async def _start_notifier(self, config: Config) -> None:
        """The config's webhooks (replacing those of the config before it, counts and all)."""
        assert self.broker is not None
        pending = self.broker.pending
        if self.notifier is not None:
            await self.notifier.close()
        self.notifier = Notifier(config.notify, still_open=lambda channel: pending.get(channel) is not None) \
            if config.notify else None
        pending.opened = self.notifier.opened if self.notifier is not None else None
        self.broker.notify_status = self.notifier.statuses if self.notifier is not None else None
        if self.notifier is not None:
            self.notifier.start()

    def _web_window(self) -> WebWindowChild | None:
        """`--web`: the web window child (not started yet; its status says starting); each page a
        browser opens on it is a window of this main."""
        if self.web is None:
            return None
        child = WebWindowChild(self.web, self.connection_path, self.log_dir, tls=self.web_tls,
                               insecure=self.web_insecure)
        if self.broker is not None:
            self.broker.web_window_status = child.status
        return child

    def _unknown_server(self, name: str) -> ChannelReply:
        configured = ", ".join(sorted(self.servers)) or "none"
        return error_reply(RpcCode.INVALID_PARAMS, f"unknown server {name!r} (configured: {configured})")

    # ---- life --------------------------------------------------------------------------

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
            await self._start(stack)
            await self._stop.wait()
            logger.info("stopping: %d servers", len(self.servers))

    async def _start(self, stack: AsyncExitStack) -> None:
        token = secrets.token_hex(32)
        limit = raise_soft_limit()  # before any socket: libzmq aborts main on EMFILE
        logger.info("open files: up to %d", limit)
        remote, authenticator, front = self._remote_listener()
        if front is not None:
            stack.push_async_callback(front.close)
        if authenticator is not None:
            stack.callback(authenticator.stop)
        # What outlives a request, opened once and handed to the parts that keep it (store/).
        store = open_store(self.store_url, audit_path=self.audit_path, record_values=self.config.audit_values,
                           machine=self.config.machine)
        stack.push_async_callback(store.close)
        await store.open()  # unreachable: one line, and main does not start
        broker = Broker(
            endpoint=ipc_endpoint_beside(self.connection_path),
            token=token,
            session=channels.new_uuid7(),
            host=self,
            audit=store.audit,
            remote=remote,
            max_body_bytes=self.max_body_bytes,
        )
        self.broker = broker
        broker.bind()
        stack.push_async_callback(broker.close)
        stack.callback(self._calls.close, STOPPING)  # calls answered while the socket is open
        if front is not None:
            broker.listener_status = lambda: [front.status()]
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(signum, self._stop.set)
        for name, server_config in self.config.servers.items():
            self.servers[name] = ManagedServer(server_config, broker, self.log_dir)
        broker.start()
        if self.rules:
            await store.claim(self.connection_path)  # the CLI then changes the rules through this main
            self.consent = Consent(broker, store.rules, await remembered_rules(store.rules, broker), self.config.rules,
                                   loop, identities(self.config.servers), Policies(self.config.policies))
            broker.policy_status = self.consent.policies.status
            stack.push_async_callback(self.consent.close)
            broker.pending.rules = self.consent  # what a window's answer may remember
            broker.gate.rules = self.consent  # what answers before a window
        self.questions = QuestionDesk(broker.pending, broker.gate)
        await self._start_notifier(self.config)
        stack.push_async_callback(self._close_notifier)  # the one running then (reload replaces it)
        self._relay = Relay(broker, self.servers.get, self.consent, self.server_infos)
        broker.watch_servers(self._relay.merged)  # every server at once, merged in main
        stack.push_async_callback(self._relay.close)
        host_pipes = HostPipes(Path(ipc_endpoint_beside(self.connection_path, "host-pipes.sock").removeprefix("ipc://")),
                               token, broker.host_peer, self._relay)
        host_pipes.start()
        stack.push_async_callback(host_pipes.close)  # before the relay's sessions end: serve takes its pipes back
        # Made before the connection file is written, started after: from the first status a
        # peer can ask for, main says the web window is starting (`pair --web` waits for it).
        web_child = self._web_window()
        info = ConnectionInfo(
            protocol=PROTOCOL_VERSION, endpoint=broker.endpoint, token=token, pid=os.getpid(),
            remote_endpoint=front.address if front else None,
            remote_server_key=remote.curve_keypair[0].decode() if remote and remote.curve_keypair else None,
            mcp_http_token=new_token() if self.mcp_http else None, host_pipes=str(host_pipes.path))
        write_connection_file(self.connection_path, info)
        stack.callback(remove_connection_file, self.connection_path, token)
        self._started_at = time.monotonic()  # windows waiting for a main can attach from now on
        locator.main_started(self.connection_path)  # found by hosts that strip XDG_RUNTIME_DIR
        stack.callback(locator.main_stopped, self.connection_path)
        logger.info("main %s listening on %s (config %s, %d servers, audit %s)", broker.session, broker.endpoint,
                    self.config.source, len(self.servers), store.description)
        for server in self.servers.values():
            server.start()
        stack.push_async_callback(self._stop_servers)  # those running then (reload changes them)
        http_child = self._start_http_gateway(info)
        if http_child is not None:
            stack.push_async_callback(http_child.stop)
        if web_child is not None:
            web_child.start()
            stack.push_async_callback(web_child.stop)
        stack.callback(self._announce_stop)  # the first thing stopping does

    def _announce_stop(self) -> None:
        """Stopping starts here: peers hear `bye` (windows show main as gone now, not once its servers
        have stopped) and every open call is answered; then the parts stop in reverse order."""
        if self.broker is not None:
            self.broker.say_goodbye()
        if self._auto_open_timer is not None:
            self._auto_open_timer.cancel()
        answered = self._calls.close(STOPPING)
        if answered:
            logger.info("stopping: answered %d open calls", answered)

    async def _stop_servers(self) -> None:
        await asyncio.gather(*(server.stop() for server in self.servers.values()))

    async def _close_notifier(self) -> None:
        if self.notifier is not None:
            await self.notifier.close()


async def _ready(reply: ChannelReply) -> ChannelReply:
    return reply


def _auto_open_grace() -> float:
    """AUTO_OPEN_GRACE_S, or the seconds ELICITRON_AUTO_OPEN_GRACE_S names (0: open at once)."""
    raw = os.environ.get(AUTO_OPEN_GRACE_ENV, "").strip()
    if not raw:
        return AUTO_OPEN_GRACE_S
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 3600:
        logger.warning("%s=%r is not a number of seconds (0-3600); using %.0f s", AUTO_OPEN_GRACE_ENV, raw,
                       AUTO_OPEN_GRACE_S)
        return AUTO_OPEN_GRACE_S
    return seconds
