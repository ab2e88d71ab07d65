"""The consistency of an llm reranker: the figures worked by hand, and
`llm-eval rerank consistency` against a local chat endpoint whose scores do or do not
move with the seed."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Cli
from rerank_servers import OverlapChat, root_of, write_prompt
from servers import serve, write_project

from llm_eval.rerankers.consistency import consistency, consistency_line


def test_the_figures_by_hand() -> None:
    scores = {
        # a and b swap between repeats 1 and 2; c stays below both
        "q1": [[0.8, 0.6, 0.7], [0.7, 0.7, 0.9], [0.1, 0.1, 0.1]],
        # one unreadable answer leaves its pair out of the variance and the flips
        "q2": [[0.5, None, 0.5], [0.2, 0.2, 0.2]],
    }
    figures = consistency(scores, max_flips=0.25)
    assert (figures.pairs, figures.repeats, figures.unreadable) == (5, 3, 1)
    # variances (n − 1): 0.01, 0.013333, 0, 0
    assert figures.mean_variance == pytest.approx((0.01 + 0.04 / 3) / 4)
    assert figures.max_variance == pytest.approx(0.04 / 3)
    # compared: q1 has 3 candidate pairs (a-b flips, a-c and b-c do not), q2 none whole
    assert (figures.compared, figures.flipped) == (3, 1)
    assert figures.flip_share == pytest.approx(1 / 3)
    assert not figures.consistent
    assert consistency_line("minimal", figures) == (
        "minimal: not consistent: 33.3% of candidate pairs flip between 3 repeats (limit "
        "25%); score variance mean 0.0058, max 0.0133; 14 of 15 answers readable"
    )


@pytest.mark.parametrize(
    ("first", "second", "flips"),
    [
        ([0.5, 0.5], [0.5, 0.5], False),  # ties throughout
        ([0.6, 0.5], [0.5, 0.5], False),  # above, then a tie: no flip
        ([0.6, 0.4], [0.5, 0.5], True),  # above, then below
    ],
)
def test_a_flip_needs_each_order_once(first: list[float], second: list[float], flips: bool) -> None:
    figures = consistency({"q": [first, second]})
    assert figures.flipped == flips


def test_nothing_readable_is_never_consistent() -> None:
    figures = consistency({"q": [[None, None], [None, None]]})
    assert (figures.mean_variance, figures.flip_share, figures.consistent) == (None, None, False)
    assert consistency_line("x", figures) == (
        "x: not consistent: no pair to compare between 2 repeats (limit 5%); no readable "
        "pair; 0 of 4 answers readable"
    )


def rerank_project(root: Path, url: str, prompt: Path, **reranker: object) -> Path:
    section = {
        "kind": "rerank",
        "first": {"kind": "bm25"},
        "candidates": 5,
        "reranker": {
            "type": "llm",
            "base_url": root_of(url) + "/v1",
            "model": "overlap",
            "prompt": str(prompt),
            **reranker,
        },
    }
    return write_project(root, section, queries=4).config


def test_a_steady_reranker_is_consistent_and_each_prompt_is_measured(
    tmp_path: Path, cli: Cli
) -> None:
    with serve(OverlapChat()) as server:
        prompt = write_prompt(tmp_path)
        other = write_prompt(tmp_path, "Be strict.\n" + prompt.read_text(), "strict.txt")
        config = rerank_project(tmp_path, server.url, prompt)
        args = ["rerank", "consistency", "--config", config, "--queries", "2", "--repeats", "3"]
        code, out, err = cli(*args, "--prompt", other)
        assert code == 0, err
        assert out.splitlines() == [
            "retriever: consistent: 0.0% of candidate pairs flip between 3 repeats (limit 5%); "
            "score variance mean 0.0000, max 0.0000; 30 of 30 answers readable",
            f"prompt {other}: consistent: 0.0% of candidate pairs flip between 3 repeats "
            "(limit 5%); score variance mean 0.0000, max 0.0000; 30 of 30 answers readable",
        ]
        assert len(server.requests) == 60
        seeds = sorted({r.body["seed"] for r in server.requests})
        assert seeds == [0, 1, 2]
        cli(*args)
        assert len(server.requests) == 60  # every repeat's answer is in the call cache


def test_a_reranker_whose_scores_move_with_the_seed_is_not_consistent(
    tmp_path: Path, cli: Cli
) -> None:
    with serve(OverlapChat(noisy=True)) as server:
        config = rerank_project(tmp_path, server.url, write_prompt(tmp_path), temperature=1.0)
        code, out, err = cli(
            "rerank", "consistency", "--config", config, "--queries", "2", "--max-flips", "0.1"
        )
    assert code == 0, err
    assert out.startswith("retriever: not consistent: ")
    assert "flip between 3 repeats (limit 10%)" in out


def test_only_an_llm_reranker_is_measured(tmp_path: Path, cli: Cli) -> None:
    config = write_project(tmp_path, {"kind": "bm25"}, queries=2).config
    code, _, err = cli("rerank", "consistency", "--config", config)
    assert code == 3
    assert err.strip() == (
        f"llm-eval: error: {config}:4: retriever: the consistency of a reranker is "
        "measured on a `rerank` retriever with an `llm` reranker, not a bm25 retriever"
    )
