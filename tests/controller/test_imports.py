"""A controller without a store imports no store, no control plane and no worker.

Why: ``from chongming import Controller`` is what every embedding pays at
start-up (issue 23 asks for <= 100 ms); the shared plane is loaded only by a
controller given a store. The public methods' annotations still resolve
(``typing.get_type_hints`` is what tools read).
"""

from __future__ import annotations

import json

from tests.stores.pg_support import run_script

#: Loaded only by a controller on a store (or a worker).
PLANE_ONLY = (
    "aiosqlite",
    "asyncpg",
    "chongming.stores.base",
    "chongming.stores.memory",
    "chongming.stores.sqlite",
    "chongming.stores.postgres",
    "chongming.plane.plane",
    "chongming.plane.writethrough",
    "chongming.plane.children",
    "chongming.plane.apply",
    "chongming.controller.worker",
    "chongming.controller.cluster",
    "chongming.controller.served",
    "chongming.controller.pipeline_view",
    "chongming.controller.stored_pipelines",
)


def test_a_controller_without_a_store_runs_tasks_without_loading_the_plane() -> None:
    result = run_script(
        f"""
        import asyncio, json, sys, typing
        from chongming import Controller, Pipeline
        anyio_at_import = "anyio" in sys.modules  # loaded by the first thread call

        async def double(ctx: object, x: int) -> int:
            return 2 * x

        def triple(ctx: object, x: int) -> int:
            return 3 * x

        async def main() -> list[object]:
            async with Controller() as controller:
                controller.register("double", double)
                controller.register("triple", triple)
                runs = [await controller.submit("double", 2), await controller.submit("triple", 2)]
                pipeline = Pipeline("p")
                pipeline.node("double", 1)
                outcome = await (await controller.submit_pipeline(pipeline)).wait()
                await controller.stop(runs[0].task_id)
                await controller.wait_all()
                return [*[(await r.wait()).value for r in runs], outcome.status.value]

        results = asyncio.run(main())
        loaded = sorted(m for m in sys.modules if m.startswith({PLANE_ONLY!r}))
        hints = {{
            name: sorted(map(str, typing.get_type_hints(getattr(Controller, name))))
            for name in ("submit", "enqueue", "enqueue_pipeline", "submit_pipeline",
                         "reconcile", "nodes", "facts", "bucket_report", "schedules")
        }}
        print(json.dumps({{
            "results": results, "loaded": loaded, "hints": sorted(hints),
            "anyio_at_import": anyio_at_import,
        }}))
        """
    )
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["results"] == [4, 6, "succeeded"]
    assert found["loaded"] == []
    assert len(found["hints"]) == 9
    assert found["anyio_at_import"] is False


def test_a_controller_on_a_store_loads_the_plane() -> None:
    result = run_script(
        f"""
        import asyncio, json, sys
        from chongming import Controller
        from chongming.stores import InMemoryTaskStore

        async def main() -> int:
            async with Controller(store=InMemoryTaskStore()) as controller:
                controller.register("one", lambda ctx: 1)
                run = await controller.submit("one")
                return (await run.wait()).value

        value = asyncio.run(main())
        loaded = sorted(m for m in sys.modules if m.startswith({PLANE_ONLY!r}))
        print(json.dumps({{"value": value, "loaded": loaded}}))
        """
    )
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["value"] == 1
    assert "chongming.plane.plane" in found["loaded"]
    assert "chongming.stores.base" in found["loaded"]
