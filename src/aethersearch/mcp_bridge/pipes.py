"""Standard input and output as non-blocking pipes for the MCP SDK's stdio transport.

Why: the SDK's ``stdio_server`` reads and writes through ``anyio.wrap_file``, which hands
every line read, every write and every flush to a worker thread: three thread hops per tool
call, the largest share of the server's CPU per call over stdio once the SDK's logging and
output validation are off (``benchmarks/mcp_calls.py``). ``stdio_server`` takes the two files
as arguments, so the SDK's own transport (its message parsing, encoding and streams) is kept
and only the files change: the event loop's pipe transports, read and written without a thread.

They are used only where that is safe: on a POSIX event loop, with standard input and output
both pipes or sockets, and standard output not shared with standard error (a non-blocking
flag is shared by every descriptor of one open file, so a terminal or ``2>&1`` would make
the process's other writes fail with ``EAGAIN``). Anywhere else, :func:`stdio_pipes` returns
``None`` and the SDK's threaded files are used, as before.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from typing import Self

__all__ = ["MAX_LINE_BYTES", "PipeLines", "PipeWriter", "stdio_pipes", "usable"]

#: the longest JSON-RPC message line read from standard input; a longer one ends the session, and the command
#: exits with an error naming it (the SDK's threaded reader had no limit at all)
MAX_LINE_BYTES = 64 << 20


class PipeLines:
    """Standard input's lines, decoded as the SDK decodes them (UTF-8, bad bytes replaced).

    A line longer than the reader's limit ends the iteration, as the end of input does, and
    sets ``overrun``: the SDK then ends the session, and the caller reports why.
    """

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self.overrun = False

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> str:
        try:
            line = await self._reader.readline()
        except ValueError:  # asyncio's limit overrun: the rest of the line cannot be told from the next message
            self.overrun = True
            raise StopAsyncIteration from None
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class PipeWriter:
    """Standard output, written without a thread: ``write`` buffers in the transport, ``flush`` waits for room."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        """Queue ``text`` (one encoded JSON-RPC message and its newline) on the pipe."""
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        """Wait until the pipe has taken what was queued, or has room for more (flow control)."""
        await self._writer.drain()


def _pipe_like(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _same_file(a: int, b: int) -> bool:
    first, second = os.fstat(a), os.fstat(b)
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def usable(stdin_fd: int = 0, stdout_fd: int = 1, stderr_fd: int = 2) -> bool:
    """Whether the non-blocking pipes are safe here (see the module's docstring)."""
    if sys.platform == "win32":
        return False
    try:
        if not (_pipe_like(stdin_fd) and _pipe_like(stdout_fd)):
            return False
        return not _same_file(stdout_fd, stderr_fd)
    except OSError:
        return False


async def stdio_pipes(stdin_fd: int = 0, stdout_fd: int = 1, *,
                      max_line_bytes: int = MAX_LINE_BYTES) -> tuple[PipeLines, PipeWriter] | None:
    """The two files for ``mcp.server.stdio.stdio_server``, or ``None`` where they are not safe.

    The descriptors are duplicated, so closing the transports at the end leaves the
    process's own standard input and output open.
    """
    if not usable(stdin_fd, stdout_fd):
        return None
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=max_line_bytes)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                 os.fdopen(os.dup(stdin_fd), "rb", buffering=0))
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                        os.fdopen(os.dup(stdout_fd), "wb", buffering=0))
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return PipeLines(reader), PipeWriter(writer)
