"""A private PostgreSQL server for one test session, never the system's: Debian's binaries
(`/usr/lib/postgresql/<version>/bin`) run `initdb` into a temp dir and `pg_ctl start` on loopback
and a free port; each test gets a database of its own; the session's end stops the server and
removes its dir.

initdb refuses to run as root: as root (CI, this machine) the server runs as the `postgres` user
(`runuser -u postgres --`) in a dir it owns; as anyone else, as that user. Local connections
(the Unix socket in the dir) are trusted; TCP ones need the password (scram-sha-256), so a wrong
password is refused as on a real server.
"""

import contextlib
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

ROOTS: Final = "/usr/lib/postgresql"
SERVER_USER: Final = "postgres"  # initdb's superuser, and the OS user the server runs as under root
START_TIMEOUT_S: Final = 60


class NoPostgres(Exception):
    """No PostgreSQL here to start (the reason says what is missing)."""


def bin_dir() -> Path:
    """The newest installed version's bin dir; raises NoPostgres."""
    versions = sorted((p for p in Path(ROOTS).glob("*/bin") if (p / "initdb").exists()),
                      key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    if not versions:
        raise NoPostgres(f"no PostgreSQL binaries in {ROOTS}/*/bin (apt-get install postgresql)")
    return versions[-1]


@dataclass
class PostgresServer:
    bin: Path
    root: Path  # the server's dir: data/, its socket, its log
    port: int
    password: str
    run_as: list[str]  # ["runuser", "-u", "postgres", "--"] under root
    options: str  # the server's command line options (socket dir, port, fsync off, ...)

    def url(self, database: str = "postgres", password: str | None = None) -> str:
        """A TCP URL (password auth) to `database`, with the server's password unless given another."""
        return f"postgresql://{SERVER_USER}:{password or self.password}@127.0.0.1:{self.port}/{database}"

    def url_without_password(self, database: str = "postgres") -> str:
        return f"postgresql://{SERVER_USER}@127.0.0.1:{self.port}/{database}"

    def admin(self, sql: str) -> None:
        """Run `sql` as the superuser over the trusted socket (CREATE/DROP DATABASE need no transaction)."""
        import psycopg

        with psycopg.connect(host=str(self.root), port=self.port, user=SERVER_USER, dbname="postgres",
                             autocommit=True) as conn:
            conn.execute(sql.encode())

    def new_database(self) -> str:
        name = f"t_{secrets.token_hex(6)}"
        self.admin(f"CREATE DATABASE {name}")
        return name

    def drop_database(self, name: str) -> None:
        self.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def restart(self, while_down: Callable[[], None] | None = None) -> None:
        """`pg_ctl restart -m fast` (every connection is ended, as an operator's restart does), each
        step waited on by pg_ctl's own `-w`. With `while_down`: stop, run it while the server is
        down (a test looks at what the mains do meanwhile), then start again, even if it raised."""
        data = str(self.root / "data")
        if while_down is None:
            _run([*self.run_as, str(self.bin / "pg_ctl"), "-D", data, "-l", str(self.root / "server.log"), "-m",
                  "fast", "-w", "-t", str(START_TIMEOUT_S), "restart"], self.root)  # -l: else the server holds our pipe
            return
        _run([*self.run_as, str(self.bin / "pg_ctl"), "-D", data, "-m", "fast", "-w", "stop"], self.root)
        try:
            while_down()
        finally:
            _run([*self.run_as, str(self.bin / "pg_ctl"), "-D", data, "-l", str(self.root / "server.log"), "-w",
                  "-t", str(START_TIMEOUT_S), "-o", self.options, "start"], self.root)

    def stop(self) -> None:
        """Stop the server (immediate: nothing of it is kept) and remove its dir."""
        try:
            _run([*self.run_as, str(self.bin / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate", "-w",
                  "stop"], self.root)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def log(self) -> str:
        try:
            return (self.root / "server.log").read_text(errors="replace")[-4000:]
        except OSError:
            return ""


def start() -> PostgresServer:
    """initdb + pg_ctl start in a new temp dir; up (pg_ctl -w) when this returns. Raises NoPostgres."""
    binaries = bin_dir()
    root = Path(tempfile.mkdtemp(prefix="eli-pg-", dir="/tmp"))  # short: the socket's path is limited
    run_as: list[str] = []
    try:
        if os.geteuid() == 0:
            try:
                user = pwd.getpwnam(SERVER_USER)
            except KeyError:
                raise NoPostgres(f"running as root and there is no {SERVER_USER!r} user for initdb") from None
            if shutil.which("runuser") is None:
                raise NoPostgres("running as root and there is no runuser to start PostgreSQL as postgres")
            os.chown(root, user.pw_uid, user.pw_gid)
            run_as = ["runuser", "-u", SERVER_USER, "--"]
        password = secrets.token_hex(12)
        password_file = root / "password"
        password_file.write_text(password)
        if run_as:
            os.chown(password_file, pwd.getpwnam(SERVER_USER).pw_uid, -1)
        _run([*run_as, str(binaries / "initdb"), "-D", str(root / "data"), "-U", SERVER_USER, "--pwfile",
              str(password_file), "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-locale",
              "--no-sync", "--no-instructions"], root)
        password_file.unlink()
        for _attempt in range(3):  # a free port may be taken before the server binds it
            port = _free_port()
            options = (f"-k {root} -p {port} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
                       "-c full_page_writes=off -c max_connections=200")
            started = subprocess.run([*run_as, str(binaries / "pg_ctl"), "-D", str(root / "data"), "-l",
                                      str(root / "server.log"), "-w", "-t", str(START_TIMEOUT_S), "-o", options,
                                      "start"], cwd=root, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                     check=False, timeout=START_TIMEOUT_S + 10)
            if started.returncode == 0:
                return PostgresServer(binaries, root, port, password, run_as, options)
        log = (root / "server.log").read_text(errors="replace") if (root / "server.log").exists() else ""
        raise RuntimeError(f"pg_ctl start failed: {started.stdout}{started.stderr}\n{log[-2000:]}")
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


def _run(argv: list[str], cwd: Path) -> None:
    done = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False,
                          timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stdout}{done.stderr}")


def _free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def closed_port() -> int:
    """A loopback port nothing listens on (for 'unreachable')."""
    return _free_port()
