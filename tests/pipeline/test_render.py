"""The pipeline table: the seed's columns, wide characters aligned, control characters escaped."""

from __future__ import annotations

from chongming.pipeline import JoinMode, NodeSnapshot, PipelineSnapshot, PipelineStatus
from chongming.pipeline.join import AggregationPolicy
from chongming.render import display_width, render_pipeline
from chongming.state import TaskStatus

S = TaskStatus


def node(
    node_id: str, name: str, status: TaskStatus, *ups: str, join: JoinMode | None = None
) -> NodeSnapshot:
    return NodeSnapshot(
        node_id=node_id,
        task_id=f"r:{node_id}",
        name=name,
        status=status,
        depends_on=ups,
        join=join or JoinMode.ALL_SUCCEEDED,
        trigger="",
        reason=None,
    )


SEED = [
    node("fetch", "fetch", S.RUNNING),
    node("shard0", "transform", S.BLOCKED, "fetch"),
    node("shard1", "transform", S.BLOCKED, "fetch"),
    node("shard2", "transform", S.BLOCKED, "fetch"),
    node("load", "load", S.BLOCKED, "shard0", "shard1", "shard2"),
    node("audit", "audit", S.BLOCKED, "load", join=JoinMode.ALL_SETTLED),
]


def test_the_seed_table_exactly() -> None:
    assert render_pipeline(SEED).splitlines() == [
        "NODE    TASK       STATUS   DEPENDS_ON            JOIN",
        "------  ---------  -------  --------------------  -------------",
        "fetch   fetch      running  -                     all_succeeded",
        "shard0  transform  blocked  fetch                 all_succeeded",
        "shard1  transform  blocked  fetch                 all_succeeded",
        "shard2  transform  blocked  fetch                 all_succeeded",
        "load    load       blocked  shard0,shard1,shard2  all_succeeded",
        "audit   audit      blocked  load                  all_settled",
    ]


def test_a_snapshot_renders_like_its_nodes() -> None:
    snapshot = PipelineSnapshot(
        run_id="r",
        name="nightly-etl",
        aggregation=AggregationPolicy.FAIL_FAST,
        status=PipelineStatus.RUNNING,
        nodes=tuple(SEED),
    )
    assert render_pipeline(snapshot) == render_pipeline(SEED)


def test_wide_characters_line_up_and_control_characters_are_escaped() -> None:
    text = render_pipeline(
        [
            node("抽取", "fetch", S.SUCCEEDED),
            node("evil\u202egnp.exe", "transform", S.SKIPPED, "抽取"),
            node("x", "load", S.CANCELLED, "evil\u202egnp.exe", join=JoinMode.ANY_SUCCEEDED),
        ]
    )
    lines = text.splitlines()
    assert "\u202e" not in text
    assert lines[3].startswith("evil\\u202egnp.exe  ")
    status_column = [
        display_width(line[: line.index(status)])
        for line, status in zip(lines[2:], ("succeeded", "skipped", "cancelled"), strict=True)
    ]
    assert len(set(status_column)) == 1  # the STATUS column starts at one cell for every row
    assert all(not line.endswith(" ") for line in lines)
