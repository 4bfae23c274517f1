"""Every exception Elicitron raises on purpose.

    ElicitronError
    ├── ProtocolError          a frame or message broke wire contract v1 (carries the contract's code)
    ├── ConfigError            the mcpServers config file is unreadable or has a bad entry
    ├── ConnectionFileError    the connection file is missing, unreadable or too permissive
    ├── AlreadyRunningError    another main already owns the endpoint
    ├── MainUnreachableError   no main answered a controller in time
    ├── UnsupportedSchemaError a requestedSchema uses something outside MCP's restricted subset
    ├── InvalidContentError    an accepted answer does not validate against its requestedSchema
    └── AuditLogError          the audit log cannot be opened or read (readers only; writers log)
"""


class ElicitronError(Exception):
    """Base of every error Elicitron raises deliberately."""


class ProtocolError(ElicitronError):
    """A message that cannot be acted on; `code` is one of the contract's string error codes."""

    def __init__(self, code: str, message: str, topic: str | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.topic = topic


class ConfigError(ElicitronError):
    """The config file cannot be used; the message names the file and the bad entry."""


class ConnectionFileError(ElicitronError):
    """The connection file cannot be read, written or trusted."""


class AlreadyRunningError(ElicitronError):
    """A second main tried to start while one holds the lock."""


class MainUnreachableError(ElicitronError):
    """A controller could not reach a running main."""


class UnsupportedSchemaError(ElicitronError):
    """A requestedSchema uses features outside MCP's restricted elicitation schema."""


class InvalidContentError(ElicitronError):
    """Accepted content does not match the requestedSchema; `problems` lists each reason."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class AuditLogError(ElicitronError):
    """The audit log cannot be opened or read (raised by the readers only, never by `record_*`)."""
