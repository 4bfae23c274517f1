"""A child's stderr copied into its log file, bounded: past `max_bytes` the file moves to `<name>.1`
(the one before it goes) and a new one starts, so a child that floods its stderr costs at most twice
`max_bytes` of disk. The last line written is kept: it usually says why the child stopped."""

import asyncio
import codecs
import os
from pathlib import Path

from main_process.private_files import open_private

MAX_LOG_BYTES = 4 << 20
CHUNK = 64 << 10


class CappedLog:
    def __init__(self, path: Path, max_bytes: int = MAX_LOG_BYTES) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.last_line = ""
        self._partial = ""

    async def copy(self, stream: asyncio.StreamReader) -> None:
        """Until `stream` ends (the child exited)."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        log = open_private(self.path, "a")  # 0600: requests may name what hosts do
        try:
            size = os.fstat(log.fileno()).st_size
            while chunk := await stream.read(CHUNK):
                if size + len(chunk) > self.max_bytes and size:
                    log.close()
                    os.replace(self.path, self.path.with_name(self.path.name + ".1"))
                    log = open_private(self.path, "w")
                    size = 0
                text = decoder.decode(chunk)
                log.write(text)
                log.flush()
                size += len(chunk)
                self._remember(text)
        finally:
            log.close()

    def _remember(self, text: str) -> None:
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()[-4096:]
        for line in reversed(lines):
            if line.strip():
                self.last_line = line.strip()[:4096]
                break
