"""The `mcpServers` config (Claude Desktop / Cursor / TUUI format), read unchanged.

Elicitron-only keys are optional and ignored by the other hosts, per server:
`elicitationTimeoutSeconds` (default 600), `elicitationBurst` (default 20) and
`elicitationBurstWindowSeconds` (default 60): more than `burst` requests within the window are
answered `cancel`; `urlCompletionTimeoutSeconds` (default 120): after the user accepts the URLs of
a -32042 error, how long to wait for the server's completion notice before retrying the call;
`toolTimeoutSeconds` (default: the elicitation timeout + 300): a tool call still unanswered after it
fails with an error instead of waiting forever; `protocolMode` ("auto", the default, or "legacy" to
force the pre-2026 initialize handshake for a server that mishandles discovery); `maxRequestBytes`
(default 2 MiB, at most 16 MiB): a request larger than this once encoded for the windows is refused
with -32602 and a notice instead of being shown; `elicitationRoute` ("windows", the default;
"host"; "first"): where a request caused by an MCP host's call through `elicitron serve` goes: the
windows, that host (when it can answer it, else the windows), or both with the first answer winning.
`toolApproval`, `toolApprovalOverrides` and the top-level `elicitron.rules`: see `consent_config`;
the top-level `elicitron.notify` (webhooks for new requests): see `notify/config.py`; `elicitron.store`
(where rules and the audit log live: store/factory.py) and `elicitron.machine` (this main's name on
the audit rows of a shared store; default: the host name); `elicitron.policies` (Cedar policy
files, relative to the config file: main_process/policy/).

Every time is at most MAX_TIMEOUT_S (7 days); a key given twice in one object is an error, not
"the last one wins".
"""

import dataclasses
import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import platformdirs

from main_process.config_keys import names
from main_process.config_values import seconds, whole
from main_process.consent.consent_config import ToolPolicy, parse_rules, parse_tool_approval
from main_process.consent.escalation_rules import Escalation, parse_escalations
from main_process.consent.pending import DEFAULT_MAX_REQUEST_BYTES
from main_process.consent.rules import Rule
from main_process.notify.config import NotifyTarget, parse_notify
from main_process.oauth.settings import OAuthSettings, parse_oauth
from main_process.store.factory import check_store_url
from shared.errors import ConfigError

logger = logging.getLogger(__name__)

DEFAULT_ELICITATION_TIMEOUT_S = 600.0
DEFAULT_BURST = 20
DEFAULT_BURST_WINDOW_S = 60.0
DEFAULT_URL_COMPLETION_TIMEOUT_S = 120.0
MAX_TIMEOUT_S = 7 * 24 * 3600.0
ELICITATION_ROUTES = ("windows", "host", "first")
MIN_REQUEST_BYTES = 1024
MAX_REQUEST_BYTES = 16 << 20
MAX_MACHINE_CHARS = 255
DEMO_SERVER_SCRIPT = Path(__file__).resolve().parent / "demo_server.py"  # ships inside the package


@dataclass(frozen=True, kw_only=True)
class ServerLimits:
    """The Elicitron-only per-server keys, shared by both transports."""

    elicitation_timeout_s: float = DEFAULT_ELICITATION_TIMEOUT_S
    burst: int = DEFAULT_BURST
    burst_window_s: float = DEFAULT_BURST_WINDOW_S
    url_completion_timeout_s: float = DEFAULT_URL_COMPLETION_TIMEOUT_S
    tool_timeout_s: float = DEFAULT_ELICITATION_TIMEOUT_S + 300
    protocol_mode: str = "auto"
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    tool_approval: ToolPolicy = "allow"  # hosts' tool calls (consent_config)
    tool_approval_overrides: tuple[tuple[str, str], ...] = ()  # (tool glob, policy), first match wins
    elicitation_route: str = "windows"


def differs_beyond_approval[C: ServerLimits](new: C, old: C) -> bool:
    """Whether a reloaded server entry changed in anything but its approval keys (which apply
    without restarting the server)."""
    return dataclasses.replace(new, tool_approval=old.tool_approval,
                               tool_approval_overrides=old.tool_approval_overrides) != old


@dataclass(frozen=True, kw_only=True)
class StdioServerConfig(ServerLimits):
    name: str
    command: str
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None


@dataclass(frozen=True, kw_only=True)
class HttpServerConfig(ServerLimits):
    name: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    oauth: OAuthSettings = field(default_factory=OAuthSettings)  # sign-in (main_process/oauth/settings.py)


ServerConfig = StdioServerConfig | HttpServerConfig


@dataclass(frozen=True)
class Config:
    servers: dict[str, ServerConfig]
    source: str
    path: Path | None = None  # the file it came from, re-read by `elicitron reload`
    audit_values: bool = False  # top-level {"elicitron": {"auditValues": true}} opts in
    auto_open_window: bool | None = None  # {"elicitron": {"autoOpenWindow": …}}; None = CLI default
    rules: tuple[Rule, ...] = ()  # {"elicitron": {"rules": [...]}} (consent_config)
    escalations: tuple[Escalation, ...] = ()  # the rules with "escalateAfterSeconds" (escalation_rules)
    notify: tuple[NotifyTarget, ...] = ()  # {"elicitron": {"notify": {...} | [...]}} (notify/config.py)
    store: str | None = None  # {"elicitron": {"store": URL}}: the store's backend (store/factory.py); None: SQLite
    machine: str | None = None  # {"elicitron": {"machine": name}}: this main on a shared store; None: host name
    policies: tuple[Path, ...] = ()  # {"elicitron": {"policies": [files]}}: Cedar policy files (main_process/policy/)
    # A host's call waiting on a card (consent/long_wait.py): progress every so often to a host that
    # sent a token; to one that sent none, "still pending, retry" at the deadline, and the answer kept
    # for its retry this long.
    wait_progress_s: float = 5.0  # {"elicitron": {"waitProgressSeconds": …}}
    wait_retry_s: float = 50.0  # {"elicitron": {"waitRetrySeconds": …}}
    wait_retry_kept_s: float = 300.0  # {"elicitron": {"waitRetryKeptSeconds": …}}
    wait_task_s: float = 10.0  # {"elicitron": {"waitTaskSeconds": …}}: a call's wait before it becomes a task
    wait_task_ttl_s: float = 3600.0  # {"elicitron": {"waitTaskTtlSeconds": …}}: the longest a host's task is kept


def default_config_path() -> Path:
    return Path(platformdirs.user_config_dir("elicitron")) / "mcp.json"


def embedded_default() -> Config:
    """The demo server that ships in this package, so a fresh install has something that elicits."""
    demo = StdioServerConfig(name="demo", command=sys.executable, args=[str(DEMO_SERVER_SCRIPT)])
    return Config(servers={"demo": demo}, source="(embedded default: demo server)")


def load_config(path: Path | None) -> Config:
    """Load `path`, or the default path if it exists, or the embedded default."""
    if path is None:
        path = default_config_path()
        if not path.exists():
            return embedded_default()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except _DuplicateKeyError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    config = parse_config(data, str(path))
    return dataclasses.replace(config, path=path)


def parse_config(data: Any, source: str) -> Config:
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers"), dict):
        raise ConfigError(f"{source}: expected an object with an \"mcpServers\" object")
    servers: dict[str, ServerConfig] = {}
    for name, entry in data["mcpServers"].items():
        servers[name] = _parse_entry(source, name, entry)
    options = data.get("elicitron", {})
    if not isinstance(options, dict):
        raise ConfigError(f"{source}: \"elicitron\" must be an object")
    known = names("elicitron")  # the object is Elicitron's own: a typo there must not go unnoticed
    if unknown := sorted(set(options) - known):
        raise ConfigError(f"{source}: elicitron.{unknown[0]} is not a key Elicitron reads; the keys are "
                          f"{', '.join(sorted(known))}")
    audit_values = options.get("auditValues", False)
    auto_open = options.get("autoOpenWindow")
    if not isinstance(audit_values, bool) or not isinstance(auto_open, bool | None):
        raise ConfigError(f"{source}: elicitron.auditValues and elicitron.autoOpenWindow must be true or false")
    rules = parse_rules(options.get("rules", []), source)
    store = options.get("store")
    if not isinstance(store, str | None):
        raise ConfigError(f"{source}: elicitron.store must be a URL (a string)")
    try:
        check_store_url(store)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    machine = options.get("machine")
    if machine is not None and not (isinstance(machine, str) and machine.strip() and machine.isprintable()
                                    and len(machine) <= MAX_MACHINE_CHARS):
        raise ConfigError(f"{source}: elicitron.machine must be a name (printable text, 1 to {MAX_MACHINE_CHARS} "
                          "characters)")
    return Config(servers=servers, source=source, audit_values=audit_values, auto_open_window=auto_open,
                  rules=rules, notify=parse_notify(options.get("notify"), source), store=store, machine=machine,
                  escalations=parse_escalations(options.get("rules", []), source),
                  policies=_policy_paths(options.get("policies", []), source),
                  wait_progress_s=_seconds(options, "waitProgressSeconds", Config.wait_progress_s, source),
                  wait_retry_s=_seconds(options, "waitRetrySeconds", Config.wait_retry_s, source),
                  wait_retry_kept_s=_seconds(options, "waitRetryKeptSeconds", Config.wait_retry_kept_s, source),
                  wait_task_s=_seconds(options, "waitTaskSeconds", Config.wait_task_s, source),
                  wait_task_ttl_s=_seconds(options, "waitTaskTtlSeconds", Config.wait_task_ttl_s, source))


MAX_WAIT_SECONDS: Final = 86_400.0


def _seconds(options: dict[str, Any], key: str, default: float, source: str) -> float:
    """A top-level duration: a number of seconds above 0, at most a day."""
    value = options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_WAIT_SECONDS:
        raise ConfigError(f"{source}: elicitron.{key} must be a number of seconds above 0 (at most "
                          f"{MAX_WAIT_SECONDS:.0f})")
    return float(value)


def _policy_paths(value: Any, source: str) -> tuple[Path, ...]:
    """The policy files, relative to the config file's folder (read and checked by main_process/policy)."""
    if not isinstance(value, list) or not all(isinstance(p, str) and p.strip() for p in value):
        raise ConfigError(f"{source}: elicitron.policies must be a list of file paths (strings)")
    base = Path(source).absolute().parent
    return tuple(base / Path(p).expanduser() for p in value)


def _parse_entry(source: str, name: str, entry: Any) -> ServerConfig:
    where = f"{source}: mcpServers.{name}"
    if not name or not name.isprintable():
        raise ConfigError(f"{where}: server names must be non-empty printable text")
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: must be an object with \"command\" or \"url\"")
    most = MAX_TIMEOUT_S
    limits = {
        "elicitation_timeout_s": seconds(where, entry, "elicitationTimeoutSeconds", DEFAULT_ELICITATION_TIMEOUT_S, most),
        "burst_window_s": seconds(where, entry, "elicitationBurstWindowSeconds", DEFAULT_BURST_WINDOW_S, most),
        "burst": whole(where, entry, "elicitationBurst", DEFAULT_BURST, 1, 10**9),
        "url_completion_timeout_s": seconds(where, entry, "urlCompletionTimeoutSeconds",
                                            DEFAULT_URL_COMPLETION_TIMEOUT_S, most),
        "protocol_mode": entry.get("protocolMode", "auto"),
        "max_request_bytes": whole(where, entry, "maxRequestBytes", DEFAULT_MAX_REQUEST_BYTES, MIN_REQUEST_BYTES,
                                   MAX_REQUEST_BYTES),
        "elicitation_route": entry.get("elicitationRoute", "windows"),
    }
    limits["tool_approval"], limits["tool_approval_overrides"] = parse_tool_approval(where, entry)
    limits["tool_timeout_s"] = seconds(where, entry, "toolTimeoutSeconds",
                                       min(limits["elicitation_timeout_s"] + 300, most), most)
    if limits["protocol_mode"] not in ("auto", "legacy"):
        raise ConfigError(f"{where}: \"protocolMode\" must be \"auto\" or \"legacy\"")
    if limits["elicitation_route"] not in ELICITATION_ROUTES:
        raise ConfigError(f"{where}: \"elicitationRoute\" must be \"windows\", \"host\" or \"first\"")
    if "url" in entry:
        url, headers = entry["url"], entry.get("headers", {})
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(f"{where}: \"url\" must be an http:// or https:// URL")
        if not _is_str_map(headers):
            raise ConfigError(f"{where}: \"headers\" must map strings to strings")
        return HttpServerConfig(name=name, url=url, headers=headers, oauth=parse_oauth(where, entry),
                                **limits)
    if "command" in entry:
        command, args, env, cwd = entry["command"], entry.get("args", []), entry.get("env", {}), entry.get("cwd")
        if not isinstance(command, str) or not command:
            raise ConfigError(f"{where}: \"command\" must be a non-empty string")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ConfigError(f"{where}: \"args\" must be a list of strings")
        if not _is_str_map(env):
            raise ConfigError(f"{where}: \"env\" must map strings to strings")
        if cwd is not None and not isinstance(cwd, str):
            raise ConfigError(f"{where}: \"cwd\" must be a string")
        return StdioServerConfig(name=name, command=command, args=args, env=env, cwd=cwd,
                                 **limits)
    raise ConfigError(f"{where}: needs \"command\" (stdio) or \"url\" (streamable HTTP)")




class _DuplicateKeyError(ValueError):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKeyError(f"the key {key!r} appears twice in one object; keep one")
        result[key] = value
    return result


def _is_str_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
