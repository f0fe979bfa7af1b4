"""Every query and control command through CliRunner, on a store a real controller filled."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from chongming.stores.nodes import NodeInfo
from chongming.stores.sqlite import SqliteTaskStore
from tests.cli.conftest import NASTY_LABEL
from tests.cli.support import as_json, assert_one_line_error, invoke

ALL_IDS = ["ok-1", "bad-1", "stop-1"]


def test_ps_without_all_shows_only_unfinished_tasks(db: Path) -> None:
    result = invoke(db, "ps")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "TASK_ID",
        "NAME",
        "STATUS",
        "ATTEMPT",
        "ELAPSED",
        "PROGRESS",
        "FAILURE",
    ]
    assert len(lines) == 3  # header, dashes, summary: every task here has ended
    assert lines[2] == "    active 0 (queued 0, holding a slot 0)"
    assert as_json(invoke(db, "ps", "--json")) == {"tasks": [], "unserved": {}, "matching": 0}


def test_ps_all_is_the_render_table_format(db: Path) -> None:
    result = invoke(db, "ps", "--all")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "TASK_ID",
        "NAME",
        "BUCKET",
        "STATUS",
        "ATTEMPT",
        "ELAPSED",
        "PROGRESS",
        "FAILURE",
    ]
    assert set(lines[1]) == {"-", " "}
    rows = {line.split()[0]: line for line in lines[2:5]}
    assert set(rows) == set(ALL_IDS)
    assert "同步-A" in rows["ok-1"]
    assert "succeeded" in rows["ok-1"]
    assert "failed" in rows["bad-1"]
    assert "exception" in rows["bad-1"]
    assert "stopped" in rows["stop-1"]
    # The label's escape sequences are shown escaped, never sent to the terminal.
    assert "\x1b" not in result.stdout
    assert "\u202e" not in result.stdout
    assert r"evil\x1b[31m\u202e\nlabel" in rows["bad-1"]
    # Wide characters keep the columns aligned: STATUS starts at one display column.
    from chongming.render import display_width

    starts = {
        display_width(line[: line.index(word)])
        for line, word in (
            (rows["ok-1"], "succeeded"),
            (rows["bad-1"], "failed"),
            (lines[0], "STATUS"),
        )
    }
    assert len(starts) == 1


def test_ps_json_shape_and_filters(db: Path) -> None:
    data = as_json(invoke(db, "--json", "ps", "--all"))
    assert list(data) == ["tasks", "unserved", "matching"]
    assert [task["task_id"] for task in data["tasks"]] == ALL_IDS
    ok = data["tasks"][0]
    assert ok["status"] == "succeeded"
    assert ok["result"] == 42
    assert ok["bucket"] == 7
    assert data["tasks"][1]["label"] == NASTY_LABEL  # JSON carries the raw label
    assert {"task_id", "name", "status", "owner", "failure", "progress", "tags"} <= set(ok)

    def ids(*args: str) -> list[str]:
        return [task["task_id"] for task in as_json(invoke(db, "ps", "--json", *args))["tasks"]]

    assert ids("--status", "failed") == ["bad-1"]
    assert ids("--status", "failed", "--status", "stopped") == ["bad-1", "stop-1"]
    assert ids("--all", "--tag", "slow") == ["stop-1"]
    assert ids("--all", "--bucket", "7") == ["ok-1"]
    assert ids("--all", "--owner", "writer", "--limit", "2") == ["ok-1", "bad-1"]
    assert ids("--all", "--owner", "nobody") == []
    mine = as_json(
        invoke(db, "--owner", "writer", "--owned-buckets", "0-7", "ps", "--all", "--mine", "--json")
    )
    assert [task["task_id"] for task in mine["tasks"]] == ["ok-1"]


def test_ps_bad_filters_exit_1(db: Path) -> None:
    assert "status" in assert_one_line_error(invoke(db, "ps", "--status", "nonsense"))
    assert "--mine" in assert_one_line_error(invoke(db, "ps", "--mine"))
    assert "--limit" in assert_one_line_error(invoke(db, "ps", "--limit", "0"))


def test_status_exit_codes(db: Path) -> None:
    ok = invoke(db, "status", "ok-1")
    assert ok.exit_code == 0, ok.stderr
    assert "succeeded" in ok.stdout
    assert "owner:    writer" in ok.stdout
    failed = invoke(db, "status", "bad-1")
    assert failed.exit_code == 3
    assert "failure:  exception: boom" in failed.stdout
    stopped = invoke(db, "status", "stop-1", "--json")
    assert stopped.exit_code == 3
    import json

    data = json.loads(stopped.stdout)
    assert list(data) == ["task"]
    assert data["task"]["task_id"] == "stop-1"
    assert data["task"]["status"] == "stopped"


def test_history_columns_and_json(db: Path) -> None:
    result = invoke(db, "history", "stop-1")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["VER", "FROM", "TO", "AT", "TRIGGER", "ACTOR", "REASON"]
    moves = [line.split()[1:3] for line in lines[2:]]
    assert moves == [
        ["pending", "queued"],
        ["queued", "starting"],
        ["starting", "running"],
        ["running", "stopping"],
        ["stopping", "stopped"],
    ]
    assert lines[5].split()[4:] == ["user:stop", "user", "window"]
    data = as_json(invoke(db, "history", "stop-1", "--json"))
    assert data["task_id"] == "stop-1"
    assert [t["to"] for t in data["transitions"]][-1] == "stopped"
    assert data["transitions"][3]["reason"] == "window"


def test_stats(db: Path) -> None:
    result = invoke(db, "stats")
    assert result.exit_code == 0, result.stderr
    assert "    total 3, active 0" in result.stdout
    data = as_json(invoke(db, "stats", "--json"))
    assert data == {
        "total": 3,
        "active": 0,
        "by_status": {"failed": 1, "stopped": 1, "succeeded": 1},
        "by_owner": {"writer": 3},
    }


def _register(db: Path, owner: str, owned: frozenset[int]) -> None:
    async def go() -> None:
        store = SqliteTaskStore(db)
        try:
            info = NodeInfo(
                owner=owner,
                incarnation=f"{owner}-1",
                host="h",
                pid=1,
                version="t",
                num_buckets=64,
                owned_buckets=owned,
            )
            await store.register_node(info, ttl_seconds=600)
        finally:
            await store.close()

    asyncio.run(go())


def test_buckets_star_owned_twice_and_json(db: Path) -> None:
    _register(db, "n1", frozenset(range(8)))
    _register(db, "n2", frozenset(range(6, 10)))
    result = invoke(db, "--owned-buckets", "0-7", "buckets")
    assert result.exit_code == 0, result.stderr
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()[2:12]}
    assert rows["7*"] == ["7*", "n1,n2", "1", "0", "OWNED", "TWICE"]
    assert rows["0*"][1:4] == ["n1", "0", "0"]
    assert rows["8"][1] == "n2"
    assert "owned twice: 6-7;" in result.stdout
    data = as_json(invoke(db, "--owned-buckets", "0-7", "buckets", "--json"))
    assert data["num_buckets"] == 64
    assert data["owned_buckets"] == "0-7"
    assert data["owned_twice"] == [6, 7]
    assert data["orphaned"] == []
    seven = next(row for row in data["buckets"] if row["bucket"] == 7)
    assert seven == {
        "bucket": 7,
        "owners": ["n1", "n2"],
        "ranged": ["n1", "n2"],
        "tasks": 1,
        "active": 0,
        "mine": True,
        "owned_twice": True,
        "orphaned": False,
    }
    nodes = as_json(invoke(db, "nodes", "--json"))["nodes"]
    assert {node["owner"]: node["live"] for node in nodes} == {
        "n1": True,
        "n2": True,
        "writer": False,
    }
    assert next(n for n in nodes if n["owner"] == "n2")["owned_buckets"] == "6-9"
    text = invoke(db, "nodes")
    assert text.exit_code == 0
    assert "    live 2, expired 1" in text.stdout
    assert text.stdout.split()[:9] == [
        "OWNER",
        "STATE",
        "BUCKETS",
        "HOST",
        "PID",
        "VERSION",
        "STARTED",
        "RENEWED",
        "EXPIRES",
    ]


def test_control_of_ended_tasks_exits_3_and_sends_nothing(db: Path) -> None:
    for command in ("stop", "pause", "resume"):
        result = invoke(db, command, "ok-1", "--reason", "x")
        assert result.exit_code == 3, (command, result.stdout, result.stderr)
        assert "already ended (succeeded); nothing sent" in result.stdout
    data = invoke(db, "--json", "stop", "bad-1")
    assert data.exit_code == 3
    import json

    assert json.loads(data.stdout) == {
        "task_id": "bad-1",
        "command": "stop",
        "issued": False,
        "status": "failed",
        "owner": "writer",
    }
    assert as_json(invoke(db, "commands", "--json")) == {"commands": []}


def test_reconcile_and_commands_tables(db: Path) -> None:
    result = invoke(db, "reconcile", "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0].split() == ["OUTCOME", "TASK_ID", "WAS", "DETAIL"]
    assert "(dry run: nothing written)" in result.stdout
    data = as_json(invoke(db, "reconcile", "--json", "--reason", "cron"))
    assert data["dry_run"] is False
    assert data["entries"] == []
    assert data["at"]
    commands = invoke(db, "commands", "ok-1")
    assert commands.exit_code == 0
    assert commands.stdout.split()[:8] == [
        "AT",
        "KIND",
        "TASK_ID",
        "TARGET",
        "STATE",
        "OUTCOME",
        "ACTOR",
        "REASON",
    ]


def test_query_commands_never_register_a_node(db: Path) -> None:
    for args in (["ps"], ["stats"], ["buckets"], ["reconcile"], ["status", "ok-1"]):
        invoke(db, "--owner", "cli-probe", *args)
    nodes = as_json(invoke(db, "nodes", "--json"))["nodes"]
    assert [node["owner"] for node in nodes] == ["writer"]


def test_ps_limit_footer_counts_every_matching_task(tmp_path: Path) -> None:
    from chongming import Controller

    db = tmp_path / "q.db"

    async def fill() -> None:
        async with Controller(store=db, owner="client") as client:
            for n in range(5):
                await client.enqueue("later", n, task_id=f"q-{n}", tags=["t"] if n else None)

    asyncio.run(fill())
    lines = invoke(db, "ps", "--limit", "2").stdout.splitlines()
    assert [line.split()[0] for line in lines[2:4]] == ["q-0", "q-1"]
    assert lines[4] == "    active 5 (queued 5, holding a slot 0); 2 of 5 matching tasks shown"
    tagged = invoke(db, "ps", "--tag", "t", "--limit", "1").stdout.splitlines()
    assert tagged[-2] == "    active 4 (queued 4, holding a slot 0); 1 of 4 matching tasks shown"
    data = as_json(invoke(db, "ps", "--json", "--limit", "2"))
    assert (len(data["tasks"]), data["matching"]) == (2, 5)
    whole = invoke(db, "ps", "--limit", "5").stdout.splitlines()
    assert whole[-2] == "    active 5 (queued 5, holding a slot 0)"


def test_version_prints_json_when_asked() -> None:
    from importlib.metadata import version

    plain = invoke(None, "version")
    assert plain.stdout == f"{version('chongming')}\n"
    for args in (("version", "--json"), ("--json", "version")):
        assert as_json(invoke(None, *args)) == {"version": version("chongming")}


def test_node_i_of_n_owns_its_contiguous_share(db: Path) -> None:
    for index, expected in ((0, "0-15"), (3, "48-63")):
        data = as_json(invoke(db, "--node", f"{index}/4", "buckets", "--json"))
        assert data["owned_buckets"] == expected
    data = as_json(invoke(db, "--num-buckets", "10", "--node", "2/3", "buckets", "--json"))
    assert data["owned_buckets"] == "6-9"  # shares differ by one bucket at most: 3, 3, 4


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--node", "4/4"), "index must be from 0 to count - 1"),
        (("--node", "0/0"), "count must be from 1 to num_buckets"),
        (("--node", "0/65"), "count must be from 1 to num_buckets (64)"),
        (("--node", "two/4"), "--node must be I/N"),
        (("--node", "1"), "--node must be I/N"),
        (("--node", "-1/4"), "--node must be I/N"),
        (("--node", "0/4", "--owned-buckets", "0-15"), "give one"),
    ],
)
def test_bad_node_places_are_refused_naming_the_flag(
    db: Path, args: tuple[str, ...], needle: str
) -> None:
    line = assert_one_line_error(invoke(db, *args, "buckets"))
    assert needle in line
    assert "--node" in line
