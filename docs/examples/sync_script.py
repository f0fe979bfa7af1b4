"""A plain sync program (a script, a Django or Flask view) using chongming.

``BlockingController`` runs the event loop in a background thread; every
call below is an ordinary blocking call. Several plain threads submit at once.
"""

from __future__ import annotations

import threading
import time

from chongming import BlockingController, TaskContext, render_table


def resize(ctx: TaskContext, image: str) -> str:
    """A sync task: runs in a worker thread, checkpointing as it goes."""
    for step in range(1, 6):
        ctx.checkpoint()
        ctx.progress(step, total=5)
        time.sleep(0.01)
    return f"{image} resized"


def main() -> None:
    with BlockingController(max_parallel=2) as controller:
        controller.register("resize", resize)

        def upload_handler(index: int) -> None:  # what a web view would do
            controller.submit("resize", f"img-{index}.png", task_id=f"img-{index}")

        threads = [threading.Thread(target=upload_handler, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        outcomes = controller.wait_all(timeout=60)
        for outcome in sorted(outcomes, key=lambda o: o.task_id):
            print(f"{outcome.task_id}: {outcome.status.value} -> {outcome.value}")
        print(render_table(controller.list_tasks()).splitlines()[-1])
        print(f"stop of a finished task issued: {controller.stop('img-0')}")


if __name__ == "__main__":
    main()
