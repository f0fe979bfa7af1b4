"""Building and validating pipelines: every mistake is a typed error, found before anything runs."""

from __future__ import annotations

from typing import Any

import pytest

from chongming import Controller
from chongming.errors import (
    ConfigurationError,
    DuplicateNode,
    DuplicateTask,
    InvalidPipeline,
    PayloadError,
    PipelineCycle,
    QuorumNotSupported,
    UnknownTask,
    UnknownUpstream,
)
from chongming.pipeline import AggregationPolicy, JoinMode, Pipeline
from chongming.pipeline.graph import find_cycle
from chongming.task_api import TaskRegistry


async def echo(ctx: Any, value: Any = None) -> Any:
    return value


def test_nodes_keep_their_order_ids_and_dependencies() -> None:
    pipeline = Pipeline("etl")
    fetch = pipeline.node("fetch", "2026-10-02")
    shard = pipeline.node("transform", 0, node_id="shard0", depends_on=[fetch], rows=[1, 2])
    pipeline.node("load", depends_on=[shard, "fetch", shard], join="all_settled")
    assert [node.node_id for node in pipeline.nodes] == ["fetch", "shard0", "load"]
    assert fetch.node_id == "fetch"  # defaults to the task name
    assert shard.args == (0,)
    assert dict(shard.kwargs) == {"rows": [1, 2]}
    assert pipeline.nodes[2].depends_on == ("shard0", "fetch")  # a repeat counts once
    assert pipeline.nodes[2].join is JoinMode.ALL_SETTLED
    assert pipeline.aggregation is AggregationPolicy.FAIL_FAST
    graph = pipeline.validate()
    assert graph.upstreams == ((), (0,), (1, 0))
    assert graph.downstreams == ((1, 2), (2,), ())


def test_an_upstream_may_be_named_before_it_is_added() -> None:
    pipeline = Pipeline("forward")
    pipeline.node("load", depends_on=["fetch"])
    pipeline.node("fetch")
    assert pipeline.validate().upstreams == ((1,), ())


def test_a_duplicate_node_id_is_refused_at_once() -> None:
    pipeline = Pipeline("dup")
    pipeline.node("fetch")
    with pytest.raises(DuplicateNode) as caught:
        pipeline.node("fetch")
    assert caught.value.node_id == "fetch"
    assert "node_id=" in str(caught.value)
    assert isinstance(caught.value, ConfigurationError)
    assert len(pipeline.nodes) == 1


def test_an_unknown_upstream_is_named() -> None:
    pipeline = Pipeline("p")
    pipeline.node("load", depends_on=["fecth"])
    with pytest.raises(UnknownUpstream) as caught:
        pipeline.validate()
    assert (caught.value.node_id, caught.value.upstream) == ("load", "fecth")
    assert isinstance(caught.value, LookupError)
    assert "'fecth'" in str(caught.value)


@pytest.mark.parametrize(
    ("edges", "cycle"),
    [
        ({"a": ["a"]}, ("a", "a")),
        ({"a": ["b"], "b": ["a"]}, ("a", "b", "a")),
        ({"root": [], "a": ["root", "c"], "b": ["a"], "c": ["b"]}, ("a", "c", "b", "a")),
    ],
)
def test_a_cycle_is_refused_and_named(edges: dict[str, list[str]], cycle: tuple[str, ...]) -> None:
    pipeline = Pipeline("loop")
    for node_id, ups in edges.items():
        pipeline.node("echo", node_id=node_id, depends_on=ups)
    with pytest.raises(PipelineCycle) as caught:
        pipeline.validate()
    assert caught.value.cycle == cycle
    assert " -> ".join(repr(n) for n in cycle) in str(caught.value)


def test_cycle_search_survives_a_long_chain() -> None:
    count = 20_000  # far past the recursion limit
    chain = tuple((i + 1,) if i + 1 < count else () for i in range(count))
    assert find_cycle(chain) is None
    looped = (*chain[:-1], (0,))
    found = find_cycle(looped)
    assert found is not None
    assert found[0] == found[-1]
    assert len(found) == count + 1


def test_an_unregistered_task_name_names_the_node() -> None:
    registry = TaskRegistry()
    registry.register("echo", echo)
    pipeline = Pipeline("p")
    pipeline.node("echo", node_id="a")
    pipeline.node("ehco", node_id="b", depends_on=["a"])
    with pytest.raises(UnknownTask) as caught:
        pipeline.validate(registry)
    assert caught.value.name == "ehco"
    assert caught.value.registered == ("echo",)
    assert any("'b'" in note for note in caught.value.__notes__)


@pytest.mark.parametrize("asked", ["quorum", "QUORUM", "quorum:2", " Quorum "])
def test_quorum_settlement_is_refused_with_the_reason(asked: str) -> None:
    with pytest.raises(QuorumNotSupported) as caught:
        Pipeline("p", aggregation=asked)
    assert "same work" in str(caught.value)
    assert "ANY_SUCCEEDED" in str(caught.value)
    with pytest.raises(QuorumNotSupported):
        AggregationPolicy(asked)
    with pytest.raises(QuorumNotSupported):
        Pipeline("p").node("echo", join=asked)


def test_other_bad_modes_list_the_choices() -> None:
    with pytest.raises(ConfigurationError, match="fail_fast, all_settled"):
        Pipeline("p", aggregation="best_effort")
    with pytest.raises(ConfigurationError, match="all_succeeded, all_settled, any_succeeded"):
        Pipeline("p").node("echo", join="majority")
    with pytest.raises(ConfigurationError, match="JoinMode"):
        Pipeline("p").node("echo", join=2)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "depends_on",
    ["fetch", 7, [7], [None]],
)
def test_depends_on_must_be_a_list_of_nodes_or_ids(depends_on: Any) -> None:
    with pytest.raises(ConfigurationError, match="depends_on"):
        Pipeline("p").node("echo", depends_on=depends_on)


@pytest.mark.parametrize(
    ("node_id", "message"),
    [
        ("bad\x00id", "control"),
        ("x" * 10_000, "longer than 100"),
        ("", "empty"),
        ("tab\tid", "control"),
        (3, "string"),
    ],
)
def test_bad_node_ids_are_refused(node_id: Any, message: str) -> None:
    pipeline = Pipeline("p")
    with pytest.raises(PayloadError, match=message) as caught:
        pipeline.node("echo", node_id=node_id)
    assert caught.value.what == "node_id"
    assert pipeline.nodes == ()


@pytest.mark.parametrize("name", ["", "x" * 10_000, "nul\x00", "bell\x07"])
def test_bad_pipeline_names_are_refused(name: str) -> None:
    with pytest.raises(PayloadError):
        Pipeline(name)


def test_non_json_arguments_are_refused_naming_the_node() -> None:
    pipeline = Pipeline("p")
    with pytest.raises(PayloadError) as caught:
        pipeline.node("echo", object(), node_id="fetch")
    assert caught.value.what.startswith("node 'fetch'")
    with pytest.raises(PayloadError, match="node 'n'"):
        pipeline.node("echo", node_id="n", value=float("nan"))
    with pytest.raises(PayloadError, match="NUL"):
        pipeline.node("echo", "a\x00b", node_id="m")
    assert pipeline.nodes == ()


def test_an_empty_pipeline_is_refused() -> None:
    with pytest.raises(InvalidPipeline, match="no nodes"):
        Pipeline("empty").validate()


async def test_submit_refuses_before_any_node_exists() -> None:
    async with Controller() as controller:
        controller.register("echo", echo)
        cases: list[tuple[Pipeline, type[Exception]]] = []
        unknown = Pipeline("unknown-name")
        unknown.node("echo", node_id="a")
        unknown.node("missing", node_id="b", depends_on=["a"])
        cases.append((unknown, UnknownTask))
        cyclic = Pipeline("cycle")
        cyclic.node("echo", node_id="a", depends_on=["b"])
        cyclic.node("echo", node_id="b", depends_on=["a"])
        cases.append((cyclic, PipelineCycle))
        misfit = Pipeline("misfit")
        misfit.node("echo", node_id="ok")
        misfit.node("echo", 1, 2, 3, node_id="too-many", depends_on=["ok"])
        cases.append((misfit, ConfigurationError))
        for pipeline, error in cases:
            with pytest.raises(error):
                await controller.submit_pipeline(pipeline, run_id="r1")
        with pytest.raises(ConfigurationError, match="takes a Pipeline"):
            await controller.submit_pipeline("etl")  # type: ignore[arg-type]
        for run_id in ("with:colon", "x" * 150, "nul\x00"):
            good = Pipeline("good")
            good.node("echo")
            with pytest.raises(PayloadError):
                await controller.submit_pipeline(good, run_id=run_id)
        assert (await controller.stats()).total == 0  # nothing was left behind

        good = Pipeline("good")
        good.node("echo", 1)
        first = await controller.submit_pipeline(good, run_id="same")
        with pytest.raises(DuplicateTask):
            await controller.submit_pipeline(good, run_id="same")
        await first.wait(5)
        assert (await controller.stats()).total == 1


async def test_arguments_over_the_payload_limit_are_refused_at_submit() -> None:
    async with Controller(max_payload_bytes=1000) as controller:
        controller.register("echo", echo)
        pipeline = Pipeline("big")
        pipeline.node("echo", node_id="small")
        pipeline.node("echo", "x" * 5000, node_id="large", depends_on=["small"])
        with pytest.raises(PayloadError) as caught:
            await controller.submit_pipeline(pipeline)
        assert any("'large'" in note for note in caught.value.__notes__)
        assert (await controller.stats()).total == 0
