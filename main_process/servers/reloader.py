"""msgReload (`elicitron reload`): re-read the config (or read another, which becomes main's), then
start added servers, stop removed ones, restart changed ones; a new toolApproval takes effect
without a restart, and so do the config's rules and `notify` receivers."""

import logging
from pathlib import Path

from main_process.config import Config, differs_beyond_approval, load_config
from main_process.consent.consent import Consent
from main_process.consent.pending import PendingRequests
from main_process.notifications import Notifications
from main_process.servers.reload_report import reload_report
from main_process.servers.server_desk import ServerDesk
from main_process.servers.server_faults import error_reply
from main_process.servers.server_identity import identities
from main_process.servers.servers import ManagedServer
from main_process.wire.broker_ports import Publisher, ServerSide
from shared.errors import ConfigError, RpcCode
from shared.messages import ChannelReply

logger = logging.getLogger(__name__)


class Reloader:
    def __init__(self, config: Config, *, servers: ServerDesk, server_ports: ServerSide, publisher: Publisher,
                 consent: Consent | None, notifications: Notifications, pending: PendingRequests,
                 log_dir: Path) -> None:
        self.config = config  # main's config now
        self._servers = servers
        self._server_ports = server_ports
        self._publisher = publisher
        self._consent = consent
        self._notifications = notifications
        self._pending = pending
        self._log_dir = log_dir

    async def reload(self, config: str | None = None) -> ChannelReply:
        """Re-read the config (or read `config`, an absolute path, which becomes main's)."""
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
        if (fresh.notify, fresh.escalations) != (self.config.notify, self.config.escalations):
            await self._notifications.replace(fresh.notify, self._pending, fresh.escalations)
        if fresh.store != self.config.store:
            logger.warning("the config's store changed: this main keeps the one it opened until it restarts")
        self.config = fresh
        if self._consent is not None:
            self._consent.set_config_rules(fresh.rules, identities(fresh.servers))
            policy_problem = self._consent.policies.reload(fresh.policies)  # a bad file keeps the last good set
        for name in unchanged:  # a new toolApproval takes effect without a restart
            self._servers.set_config(name, fresh.servers[name])
        for name in removed + changed:
            await self._servers.remove(name)
        for name in added + changed:
            server = ManagedServer(fresh.servers[name], self._server_ports, self._log_dir)
            self._servers.add(server)
            server.start()
        self._publisher.publish_servers()
        logger.info("reloaded %s: added %s, removed %s, changed %s", fresh.source, added, removed, changed)
        return ChannelReply(reload=reload_report(before, fresh, policy_problem))  # every change applied (reload_report.py)
