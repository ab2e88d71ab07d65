"""A real MCP server with a search tool over the demo corpus (term overlap), for the
mcp retriever's tests: `python mcp_search_server.py stdio` or `... http PORT`.

Queries containing `tool-error` make the tool fail; `slow` makes it sleep 3 s. A
server started with `noisy` as a further argument prints a line that is not JSON-RPC
to stdout when it starts, as a careless server's banner would (which the MCP stdio
transport forbids); queries containing `chatty` print one while answering. With
`dies-after N`, the server process ends (exit 1) at its N+1th search, as a server that
crashes would.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
from pathlib import Path
from typing import Any

from mcp.server.fastmcp import FastMCP

sys.path.insert(0, str(Path(__file__).parent))
from servers import CORPUS, SearchService

SERVICE = SearchService(CORPUS)
_CALLS = itertools.count(1)
DIES_AFTER = int(sys.argv[sys.argv.index("dies-after") + 1]) if "dies-after" in sys.argv else None


def build(port: int = 8000) -> FastMCP:
    server = FastMCP("demo-search", host="127.0.0.1", port=port, log_level="WARNING")

    @server.tool()
    async def search(query: str, limit: int = 10) -> dict[str, Any]:
        """Passages of the Python docs that share the most words with the query."""
        if DIES_AFTER is not None and next(_CALLS) > DIES_AFTER:
            os._exit(1)
        if "tool-error" in query:
            raise ValueError("index unavailable")
        if "slow" in query:
            await asyncio.sleep(3)
        if "chatty" in query:
            # One write of the whole line: `print` writes the text and the newline
            # apart, and the SDK's writer thread can put an answer between them.
            sys.stdout.buffer.write(f"searching for {query}\n".encode())
            sys.stdout.buffer.flush()
        found = SERVICE.search(query, limit)
        return {"hits": [{"id": d, "score": s, "text": t} for d, s, t in found]}

    @server.tool()
    def search_list(query: str, top_k: int = 10) -> list[dict[str, Any]]:
        """The same, answered as a bare list."""
        return [{"doc_id": d, "score": s} for d, s, _ in SERVICE.search(query, top_k)]

    return server


if __name__ == "__main__":
    if "noisy" in sys.argv[2:]:
        print("demo-search starting up", flush=True)
    if sys.argv[1] == "stdio":
        build().run("stdio")
    else:
        build(int(sys.argv[2])).run("streamable-http")
