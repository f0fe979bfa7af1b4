"""``chongming run`` and ``chongming tasks`` in-process, through Typer's CliRunner.

``run`` writes through to the store it is given, so every test reads the
outcome back with the query commands, as another terminal would.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.cli.support import as_json, assert_one_line_error, invoke

TASKS = "tests.cli.cli_tasks"


def _stored(db: Path, task_id: str) -> dict[str, object]:
    result = invoke(db, "status", task_id, "--json")
    assert result.exit_code in (0, 3), result.stderr  # 3: the task did not succeed
    task: dict[str, object] = json.loads(result.stdout)["task"]
    return task


def test_run_succeeds_writes_through_and_exits_0(tmp_path: Path) -> None:
    db = tmp_path / "new.db"  # run may create the embedded database
    result = invoke(db, "run", "--tasks", TASKS, "steps", "--arg", "count=3", "--task-id", "s-1")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1].startswith("s-1 succeeded after ")
    assert lines[-1].endswith("; result: 3")
    assert any(line.startswith("s-1  running") for line in lines)  # plain lines off a TTY
    task = _stored(db, "s-1")
    assert task["status"] == "succeeded"
    assert task["result"] == 3
    assert task["progress"] == {"done": 3, "total": 3, "unit": "steps", "message": "done"}
    assert task["tags"] == ["etl", "slow"]
    history = as_json(invoke(db, "history", "s-1", "--json"))["transitions"]
    assert [t["to"] for t in history] == ["queued", "starting", "running", "succeeded"]
    # the node this run was let go of its lease when it ended
    nodes = as_json(invoke(db, "nodes", "--json"))["nodes"]
    assert [node["live"] for node in nodes] == [False]


def test_run_json_arguments_and_typed_values(tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    result = invoke(
        db,
        "run",
        "--tasks",
        TASKS,
        "echo",
        "--json-args",
        '{"nested": {"a": [1, 2]}, "text": "007"}',
        "--arg",
        "n=3",
        "--arg",
        "flag=true",
        "--arg",
        "tenant=A",
        "--arg",
        "expr=a=b",
        "--task-id",
        "e-1",
        "--label",
        "同步-A",
        "--bucket-key",
        "tenant-A",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    task = json.loads(result.stdout)["task"]
    assert task["result"] == {
        "nested": {"a": [1, 2]},
        "text": "007",
        "n": 3,
        "flag": True,
        "tenant": "A",
        "expr": "a=b",
    }
    assert task["label"] == "同步-A"
    assert task["bucket_key"] == "tenant-A"
    assert _stored(db, "e-1")["bucket"] == task["bucket"] is not None


def test_run_arg_values_that_are_not_json_are_strings(tmp_path: Path) -> None:
    """``NaN``, ``Infinity`` and ``1e400`` parse in Python's json but are not JSON: strings."""
    db = tmp_path / "tasks.db"
    args = ["--arg", "a=NaN", "--arg", "b=Infinity", "--arg", "c=-Infinity", "--arg", "d=1e400"]
    args += ["--arg", "e=[NaN]", "--arg", "f=1.5"]
    result = invoke(db, "run", "--tasks", TASKS, "echo", *args, "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["task"]["result"] == {
        "a": "NaN",
        "b": "Infinity",
        "c": "-Infinity",
        "d": "1e400",
        "e": "[NaN]",
        "f": 1.5,
    }
    refused = invoke(db, "run", "--tasks", TASKS, "echo", "--json-args", '{"a": NaN}')
    assert "--json-args is not valid JSON: NaN is not JSON" in assert_one_line_error(refused)


def test_run_of_a_failing_task_exits_3_with_the_failure(tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    result = invoke(db, "run", "--tasks", TASKS, "boom", "--task-id", "b-1")
    assert result.exit_code == 3, result.stderr
    assert result.stdout.splitlines()[-1].startswith("b-1 failed after ")
    assert "boom from the task" in result.stdout.splitlines()[-1]
    assert any("attempt 2/2" in line for line in result.stdout.splitlines())
    task = _stored(db, "b-1")
    assert task["status"] == "failed"
    assert task["attempt"] == 2
    assert invoke(db, "status", "b-1").exit_code == 3


def test_run_of_a_duplicate_task_id_fails_and_keeps_the_first(tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    assert (
        invoke(
            db, "run", "--tasks", TASKS, "double", "--arg", "value=2", "--task-id", "d-1"
        ).exit_code
        == 0
    )
    again = invoke(db, "run", "--tasks", TASKS, "double", "--arg", "value=5", "--task-id", "d-1")
    line = assert_one_line_error(again)
    assert "d-1" in line
    assert _stored(db, "d-1")["result"] == 4


def test_tasks_lists_the_registry(tmp_path: Path) -> None:
    result = invoke(tmp_path / "absent.db", "tasks", "--tasks", TASKS)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "KIND", "EXECUTOR", "TAGS", "PRIORITY", "RETRY", "TIMEOUT"]
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert sorted(rows) == [
        "boom",
        "deaf",
        "double",
        "echo",
        "loops",
        "mark",
        "steps",
        "versioned@1",
        "versioned@2",
    ]
    assert rows["steps"][1:4] == ["sync", "thread", "etl,slow"]
    assert rows["double"][1:4] == ["async", "loop", "math"]
    assert rows["boom"][5:7] == ["2", "attempts"]
    data = as_json(invoke(None, "tasks", "--tasks", TASKS, "--json"))
    assert data["module"] == TASKS
    boom = next(task for task in data["tasks"] if task["name"] == "boom")
    assert boom == {
        "name": "boom",
        "version": None,
        "kind": "async",
        "executor": "loop",
        "tags": [],
        "priority": 0,
        "retry": {"max_attempts": 2, "backoff": "ExponentialBackoff", "retry_timeouts": True},
        "timeout": None,
    }
    assert not (tmp_path / "absent.db").exists()  # listing a module touches no store


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--arg", "novalue"), "has no '='"),
        (("--arg", "9x=1"), "not a Python identifier"),
        (("--arg", "a=1", "--arg", "a=2"), "given twice"),
        (("--json-args", "[1, 2]"), "must be a JSON object"),
        (("--json-args", "{not json"), "not valid JSON"),
        (("--json-args", '{"a": 1}', "--arg", "a=2"), "given twice"),
        (("--arg", "label=x"), "clashes with the run option"),
        (("--task-id", "bad\x00id"), "invalid task id"),
        (("--task-id", "x" * 10_000), "invalid task id"),
        (("--arg", "value=1", "--arg", "extra=2"), "arguments do not fit"),
        (("--bucket-key", ""), "--bucket-key must not be empty"),
    ],
)
def test_run_refuses_bad_arguments_and_leaves_no_database(
    tmp_path: Path, args: tuple[str, ...], expected: str
) -> None:
    db = tmp_path / "tasks.db"
    result = invoke(db, "run", "--tasks", TASKS, "double", *args)
    assert expected in assert_one_line_error(result)
    assert not db.exists()


@pytest.mark.parametrize(
    ("module", "name", "expected"),
    [
        ("os", "double", "defines no register(controller)"),
        ("tests.cli.no_such_module", "double", "no such module"),
        ("tests.cli.broken_module", "double", "RuntimeError: this module cannot be imported"),
        ("tests.cli.failing_register", "double", "LookupError: no such configuration"),
        ("tests.cli.cli_tasks:double", "double", "not 'module:function'"),
        ("os.path; rm -rf", "double", "not a dotted module name"),
        ("bad\x00module", "double", "not a dotted module name"),
        ("m" * 10_000, "double", "1 to 200 characters"),
        (TASKS, "not-registered", "not-registered"),
        (TASKS, "bad\x00name", "control characters"),
        (TASKS, "n" * 10_000, "1 to 200 characters"),
    ],
)
def test_run_refuses_bad_modules_and_names(
    tmp_path: Path, module: str, name: str, expected: str
) -> None:
    db = tmp_path / "tasks.db"
    result = invoke(db, "run", "--tasks", module, name, "--arg", "value=1")
    line = assert_one_line_error(result)
    assert expected in line
    assert "\x00" not in line
    assert len(line) <= 520
    assert not db.exists()


def test_unregistered_name_lists_what_is_registered(tmp_path: Path) -> None:
    line = assert_one_line_error(invoke(tmp_path / "t.db", "run", "--tasks", TASKS, "nope"))
    assert "double" in line
    assert "steps" in line


def test_tasks_refuses_a_module_without_register() -> None:
    assert "defines no register(controller)" in assert_one_line_error(
        invoke(None, "tasks", "--tasks", "json")
    )


def test_run_refuses_bad_store_locations(tmp_path: Path) -> None:
    missing_dir = tmp_path / "no" / "such" / "dir" / "tasks.db"
    assert "does not exist" in assert_one_line_error(
        invoke(missing_dir, "run", "--tasks", TASKS, "double", "--arg", "value=1")
    )
    assert not missing_dir.parent.exists()
    assert "is a directory" in assert_one_line_error(
        invoke(tmp_path, "run", "--tasks", TASKS, "double", "--arg", "value=1")
    )
    not_db = tmp_path / "notes.txt"
    not_db.write_text("these are not the tables you are looking for\n" * 100)
    before = not_db.read_bytes()
    assert_one_line_error(invoke(not_db, "run", "--tasks", TASKS, "double", "--arg", "value=1"))
    assert not_db.read_bytes() == before


def test_run_on_an_unreachable_server_never_prints_the_password() -> None:
    dsn = "postgresql://admin:s3cr3t-pw@127.0.0.1:1/tasks?connect_timeout=2"
    result = invoke(dsn, "run", "--tasks", TASKS, "double", "--arg", "value=1")
    line = assert_one_line_error(result)
    assert "s3cr3t-pw" not in result.stdout + result.stderr
    assert line


def test_schema_is_for_postgresql_only(tmp_path: Path) -> None:
    result = invoke(tmp_path / "t.db", "--schema", "x", "run", "--tasks", TASKS, "double")
    assert "--schema applies to PostgreSQL only" in assert_one_line_error(result)


def test_run_in_a_bucket_this_node_does_not_own_fails(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    result = invoke(
        db,
        "--owned-buckets",
        "0",
        "--num-buckets",
        "64",
        "run",
        "--tasks",
        TASKS,
        "double",
        "--arg",
        "value=1",
        "--bucket-key",
        "tenant-A",  # bucket 7 of 64
    )
    assert "bucket" in assert_one_line_error(result)


async def test_ps_and_the_bucket_report_name_what_no_live_worker_serves(tmp_path: Path) -> None:
    from chongming import Controller

    db = tmp_path / "q.db"
    # The client reads what live workers serve at most every poll_interval.
    async with Controller(store=db, owner="client", poll_interval=0.05) as client:
        await client.enqueue("sync", task_id="a", version=1)
        await client.enqueue("sync", task_id="b", version=1)
        await client.enqueue("report", task_id="c")
        worker = Controller(store=db, owner="w", work=True, poll_interval=0.05)

        async def sync_v2(ctx: object) -> None:
            return None

        worker.register("sync", sync_v2, version=2)  # serves sync@2 only
        async with worker:
            result = await asyncio.to_thread(invoke, db, "ps")
            data = as_json(await asyncio.to_thread(invoke, db, "ps", "--json"))
            report = await asyncio.to_thread(invoke, db, "buckets")
            report_json = as_json(await asyncio.to_thread(invoke, db, "buckets", "--json"))
            await asyncio.sleep(0.1)  # past the client's cached view of the nodes
            pinned = await client.enqueue("sync", task_id="d")  # pinned to the live @2
            assert (await pinned.wait(timeout=20)).version == 2
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[-1] == (
        "    no worker serves report (1), sync@1 (2): those tasks wait, queued"
    )
    assert data["unserved"] == {"report": 1, "sync@1": 2}
    # The bucket report says the same.
    assert report.stdout.splitlines()[-1] == result.stdout.splitlines()[-1]
    assert report_json["unserved"] == {"report": 1, "sync@1": 2}
    nodes = as_json(await asyncio.to_thread(invoke, db, "nodes", "--json"))["nodes"]
    assert nodes[0]["serves"] == ["chongming:pipeline", "sync@2"]  # and pipelines, anywhere
