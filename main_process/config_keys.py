"""Every key of the config, with what it means: the one table the parser checks the `elicitron`
object against and the documentation site's config reference is generated from
(docs/hooks/reference.py), so the reference cannot list a key the parser does not read, or miss one
(tests/test_docs_reference.py records the keys the parse functions read and compares).

A key's default is not written here: the generator reads it from what the parser makes of an entry
without the key (`attr` names the parsed field), unless `default` says it in words.
"""

from dataclasses import dataclass
from typing import Final, Literal

# Which parse function reads a section's keys: a server entry (config.py and the functions it
# calls), its "oauth" object (oauth/settings.py), the top-level "elicitron" object (config.py), a
# "notify" receiver (notify/config.py), a config rule (consent_config.py).
Kind = Literal["server", "oauth", "elicitron", "notify", "rule"]


@dataclass(frozen=True)
class Key:
    name: str
    meaning: str  # Markdown
    attr: str | None = None  # the parsed field whose value without the key is the default
    default: str | None = None  # the default in words, where no parsed field says it


@dataclass(frozen=True)
class Section:
    kind: Kind
    where: str  # where in the file, as the reference names it
    title: str
    intro: str
    keys: tuple[Key, ...]


SECTIONS: Final = (
    Section("server", "mcpServers.<name>", "A stdio server",
            "The keys Claude Desktop, Cursor and TUUI use, read unchanged: main starts the program.", (
                Key("command", "the program to start (looked up on `PATH`)", default="(required)"),
                Key("args", "its arguments, a list of strings", attr="args"),
                Key("env", "extra environment variables, strings to strings", attr="env"),
                Key("cwd", "the directory it starts in", attr="cwd", default="main's"),
            )),
    Section("server", "mcpServers.<name>", "A streamable-HTTP server",
            "A `url` in place of `command`: main reaches the server over MCP's streamable HTTP.", (
                Key("url", "`http://` or `https://`", default="(required)"),
                Key("headers", "sent with every request; an `Authorization` here is a static token and "
                               "turns sign-in off", default="`{}`"),
                Key("oauth", "sign-in settings (below), or `false` to turn sign-in off",
                    default="sign in when the server answers 401"),
            )),
    Section("server", "mcpServers.<name>", "Elicitron's keys of every server",
            "All optional; other hosts ignore them.", (
                Key("elicitationTimeoutSeconds", "after it the server gets `cancel` and the windows drop the "
                                                 "card (`expired`)", attr="elicitation_timeout_s"),
                Key("elicitationBurst", "more requests than this within the window are answered `cancel`, "
                                        "with a notice in the windows", attr="burst"),
                Key("elicitationBurstWindowSeconds", "the window of `elicitationBurst`", attr="burst_window_s"),
                Key("toolTimeoutSeconds", "a tool call with no result by then fails with error -32001 "
                                          "instead of hanging", default="elicitation timeout + 300"),
                Key("urlCompletionTimeoutSeconds", "after a -32042 (URL elicitation required) is accepted, "
                                                   "how long to wait for the server's completion notice "
                                                   "before the one retry", attr="url_completion_timeout_s"),
                Key("protocolMode", "`\"legacy\"` forces the pre-2026 initialize handshake",
                    attr="protocol_mode"),
                Key("maxRequestBytes", "a request larger than this once encoded for the windows is refused "
                                       "(-32602, with a notice); 1024 to 16 MiB", attr="max_request_bytes"),
                Key("toolApproval", "tool calls *hosts* make through Elicitron: `\"allow\"` (the host "
                                    "approves as it always did), `\"ask\"`, `\"ask-destructive\"`, `\"deny\"` "
                                    "(see [Consent memory](consent.md))", attr="tool_approval"),
                Key("toolApprovalOverrides", "`{\"<tool or glob>\": \"allow\" | \"ask\" | \"deny\"}`, first "
                                             "match wins, over `toolApproval`", default="`{}`"),
                Key("elicitationRoute", "for requests an MCP host's call caused (`elicitron serve`): "
                                        "`\"windows\"`; `\"host\"` (that host answers, if it can, else the "
                                        "windows); `\"first\"` (both; first answer wins, the other is dismissed)",
                    attr="elicitation_route"),
            )),
    Section("oauth", "mcpServers.<name>.oauth", "Sign-in (OAuth) of a `url` server",
            "All optional: a server whose authorization server allows Dynamic Client Registration needs none.", (
                Key("clientId", "a pre-registered OAuth app's client id", default="none: registers itself"),
                Key("clientSecret", "its secret", default="none"),
                Key("tokenEndpointAuthMethod", "`client_secret_basic`, `client_secret_post` or `none`",
                    default="`client_secret_basic` with a secret, else `none`"),
                Key("clientMetadataUrl", "a Client ID Metadata Document, used where the server supports "
                                         "them", default="none"),
                Key("scopes", "replaces the scopes the server asks for", default="the server's"),
            )),
    Section("elicitron", "elicitron", "Top level: the `elicitron` object",
            "Beside `mcpServers`; every key optional. A key not listed here stops main at start (and "
            "`reload` keeps the old config), naming it.", (
                Key("auditValues", "record answered values in the audit log (off: only outcomes, fields and "
                                   "windows)", attr="audit_values"),
                Key("autoOpenWindow", "`true` or `false` overrides the CLI's default (open a window when a "
                                      "request arrives and none is attached)", default="the CLI's"),
                Key("rules", "answers and decisions given without asking (below, and "
                             "[Consent memory](consent.md))", default="`[]`"),
                Key("notify", "webhooks: a notice of each new request (below); an object or a list of them",
                    default="none"),
                Key("store", "where rules and the audit log live: `\"sqlite:\"` or "
                             "`\"postgresql://USER@HOST:PORT/DATABASE\"` (`--store` and `ELICITRON_STORE` "
                             "come first)", default="`sqlite:`"),
                Key("machine", "this main's name on the audit rows", default="the host name"),
                Key("policies", "Cedar policy files (paths relative to the config file) that decide hosts' "
                                "tool calls before any rule or card: `permit` lets a call through, `forbid` "
                                "denies it (see [Consent memory](consent.md#policy-files-cedar))", default="`[]`"),
                Key("waitProgressSeconds", "while a host's call waits on a card (its approval, or its server's "
                                           "question), a host that sent a `progressToken` gets a progress "
                                           "notification this often (`waiting for approval on <machine>`), "
                                           "which keeps a host that resets its timeout on progress waiting",
                    attr="wait_progress_s"),
                Key("waitRetrySeconds", "a host's call that sent no `progressToken` and still waits on its approval "
                                        "card then gets a tool error telling the model to retry the same call; "
                                        "the card stays open and the retry waits on it (keep it below the "
                                        "host's own timeout)", attr="wait_retry_s"),
                Key("waitRetryKeptSeconds", "how long the person's answer on such a card is kept for that retry "
                                            "(same session, tool and arguments); it answers the retry once",
                    attr="wait_retry_kept_s"),
                Key("waitTaskSeconds", "a host whose request declares the tasks extension "
                                       "(`io.modelcontextprotocol/tasks`, MCP 2026-07-28) and whose call still "
                                       "waits on its approval card after this long gets a task for it "
                                       "(`working`, `waiting for approval on <machine>`); `tasks/get` gives the "
                                       "result once the person answered", attr="wait_task_s"),
                Key("waitTaskTtlSeconds", "a host that asks for a task on its call (`params.task`, the tasks of "
                                          "MCP 2025-11-25) gets one at once, `working` with `waiting for approval "
                                          "on <machine>` while its card waits; the task is kept for the ttl the "
                                          "host asks, at most this long", attr="wait_task_ttl_s"),
            )),
    Section("notify", "elicitron.notify", "Webhooks: `notify`",
            "One object per receiver, or a list of them (see "
            "[The web window](web.md#knowing-a-request-waits-webhooks)).", (
                Key("url", "`http://` or `https://` with a host; anything else stops main at start (and "
                           "`reload` keeps the old config) with one line naming the key", default="(required)"),
                Key("format", "`\"json\"`, `\"ntfy\"`, `\"gotify\"`, `\"slack\"`, `\"discord\"`", attr="format"),
                Key("headers", "sent with every POST: an ntfy token (`\"Authorization\": \"Bearer tk_…\"`), "
                               "`X-Gotify-Key`, ntfy's `Priority` or `Tags`", default="`{}`"),
                Key("link", "the address your phone opens the web window at (e.g. your reverse proxy's "
                            "`https://phone.example.net/`); default: the URL of the `elicitron web` that runs "
                            "now (its `web.json`); none runs and no `link`: no link",
                    default="the running web window"),
                Key("when", "`\"no-window\"`: only requests that reached no window (no Qt window, no open "
                            "page); `\"always\"`: every request", attr="when"),
                Key("burst", "at most that many POSTs within `burstWindowSeconds`; what arrives meanwhile goes "
                             "as one notice when it opens (\"3 requests wait (demo, files)\"), without those "
                             "answered in between", attr="burst"),
                Key("burstWindowSeconds", "the window of `burst`", attr="burst_window_s"),
                Key("retries", "attempts after a first that failed (unreachable, timed out, 5xx, 408, 425, "
                               "429), 1, 2, 4 s apart (a `Retry-After` is kept, up to 5 minutes; at most 10 "
                               "retries); any other answer (a 4xx, a redirect, which is not followed) fails "
                               "at once", attr="retries"),
                Key("timeoutSeconds", "for one POST, answer included", attr="timeout_s"),
            )),
    Section("rule", "elicitron.rules[]", "Config rules",
            "Applied in file order before remembered rules; `tool` and `message` are globs.", (
                Key("server", "the server the rule is for", default="(one of server, asker)"),
                Key("asker", "in place of `server`: a program's `elicitron ask` questions",
                    default="(one of server, asker)"),
                Key("tool", "a host's tool calls to this tool (with `decision`)", default="none"),
                Key("decision", "`\"allow\"` or `\"deny\"` (with `tool`)", default="none"),
                Key("quorum", "in place of `decision`: the call needs this many approvals from `approvers`",
                    default="none"),
                Key("approvers", "with `quorum`: the people who may approve (device, window or OS user names)",
                    default="none"),
                Key("message", "form requests whose message matches (with `answer`)", default="any"),
                Key("answer", "`{\"action\": \"accept\", \"content\": {...}}` or `{\"action\": \"decline\"}`, "
                              "checked against each request's schema", default="none"),
                Key("escalateAfterSeconds", "a rule of its own kind (with `server` or `asker`, and `tool` or "
                                            "`message` to narrow it): a request still unanswered after this "
                                            "many seconds goes to the `notify` webhooks once more, naming "
                                            "its machine and server", default="none"),
            )),
)


def names(kind: Kind) -> frozenset[str]:
    """The keys of every section of `kind`."""
    return frozenset(key.name for section in SECTIONS if section.kind == kind for key in section.keys)
