"""`aether mcp` over stdio reads and writes its pipes without a worker thread, and only where that is safe.

The SDK's stdio transport is kept (its parsing, encoding and streams); only its two files are
the event loop's pipe transports (``mcp_bridge.pipes``). These tests hold what a user relies on:
the files are used only where a non-blocking flag cannot break another writer, a message line
of any realistic length is read whole, and a client that closes standard input ends the server
cleanly.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson
import pytest

pytest.importorskip("mcp", reason="the `mcp` extra is not installed (pip install 'aethersearch[mcp]')")

from aethersearch.mcp_bridge.pipes import stdio_pipes, usable  # noqa: E402

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes")


def test_pipes_are_used_only_where_a_non_blocking_flag_harms_no_other_writer(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    out_read, out_write = os.pipe()
    left, right = socket.socketpair()
    err = os.open(tmp_path / "err.log", os.O_WRONLY | os.O_CREAT)
    regular = os.open(tmp_path / "in.jsonl", os.O_RDONLY | os.O_CREAT)
    try:
        assert usable(read_end, out_write, err)  # how an MCP host starts a server: pipes, stderr apart
        assert usable(left.fileno(), right.fileno(), err)  # sockets too
        assert not usable(read_end, out_write, out_write)  # `2>&1`: stderr would share the flag
        assert not usable(regular, out_write, err)  # a file on stdin: the loop cannot poll it
        tty_like = os.open(os.devnull, os.O_WRONLY)
        try:
            assert not usable(read_end, tty_like, err)  # a character device (a terminal): keep the SDK's files
        finally:
            os.close(tty_like)
    finally:
        for fd in (read_end, write_end, out_read, out_write, err, regular):
            os.close(fd)
        left.close()
        right.close()


def test_lines_are_read_whole_and_written_in_order_through_the_pipes() -> None:
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    long_line = "x" * (3 << 20)  # far past asyncio's 64 KiB default line limit

    async def main() -> list[str]:
        files = await stdio_pipes(in_read, out_write)
        assert files is not None
        lines, writer = files
        os.write(in_write, "é\n".encode())
        with os.fdopen(os.dup(in_write), "wb") as feed:  # a writer thread: the pipe holds only 64 KiB at once
            task = asyncio.create_task(asyncio.to_thread(feed.write, (long_line + "\n").encode()))
            got = [await anext(lines), await anext(lines)]
            await task
        os.close(in_write)
        async for line in lines:  # end of input ends the iteration: the SDK's reader then ends the session
            got.append(line)
        for n in range(3):
            await writer.write(f"{n}\n")
            await writer.flush()
        return got

    got = asyncio.run(main())
    assert got == ["é\n", long_line + "\n"]
    assert os.read(out_read, 100) == b"0\n1\n2\n"
    for fd in (in_read, out_read, out_write):
        os.close(fd)


def test_a_line_over_the_limit_ends_the_input_and_says_so() -> None:
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()

    async def main() -> tuple[list[str], bool]:
        files = await stdio_pipes(in_read, out_write, max_line_bytes=1024)
        assert files is not None
        lines, _ = files
        os.write(in_write, b"short\n" + b"y" * 4096 + b"\n" + b"next\n")
        got = [line async for line in lines]  # ends at the long line: its tail would read as a message
        return got, lines.overrun

    got, overrun = asyncio.run(main())
    assert got == ["short\n"] and overrun
    for fd in (in_read, in_write, out_read, out_write):
        os.close(fd)


def test_a_server_on_pipes_answers_a_megabyte_line_and_ends_when_its_input_closes(tmp_path: Path) -> None:
    from aethersearch.demo import build_demo_inputs

    release, index = build_demo_inputs(tmp_path / "demo")
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([sys.executable, "-m", "aethersearch.cli", "mcp", str(release), "--out",
                                 str(tmp_path / "run"), "--index", str(index)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
        assert proc.stdin is not None and proc.stdout is not None

        def call(message: dict[str, object]) -> dict[str, object]:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(orjson.dumps(message) + b"\n")
            proc.stdin.flush()
            return dict(orjson.loads(proc.stdout.readline()))

        init = call({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}})
        assert init["result"]["serverInfo"]["name"] == "aethersearch"  # type: ignore[index]
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        question = call({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                         "params": {"name": "list_questions", "arguments": {"limit": 1}}})
        qid = orjson.loads(question["result"]["content"][0]["text"])["questions"][0]["id"]  # type: ignore[index]
        assert not call({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                         "params": {"name": "start", "arguments": {"question_id": qid}}})["result"]["isError"]  # type: ignore[index]
        huge = call({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                     "params": {"name": "search", "arguments": {"query": "q" * (1 << 20)}}})
        assert huge["result"]["isError"], huge  # type: ignore[index]  # a tool error naming the limit, not a crash
        assert "512" in huge["result"]["content"][0]["text"]  # type: ignore[index]
        found = call({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                      "params": {"name": "search", "arguments": {"query": "capital"}}})
        assert orjson.loads(found["result"]["content"][0]["text"])["documents"]  # type: ignore[index]
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
        log.seek(0)
        assert b"Traceback" not in log.read()
