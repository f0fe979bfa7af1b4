"""Buckets: a stable hash per business key, and a limit per bucket.

Tenant A's backlog waits in bucket 7 while tenant B's bucket 28 runs in
parallel. The same key lands in the same bucket in every process on every
machine (blake2b, never the salted builtin ``hash()``).
"""

from __future__ import annotations

import asyncio

from chongming import BucketPolicy, Controller, TaskStatus, render_table


async def sync_tenant(ctx, tenant: str) -> str:  # type: ignore[no-untyped-def]
    for _ in range(20):
        await ctx.checkpoint()
        await asyncio.sleep(0.01)
    return tenant


async def main() -> None:
    policy = BucketPolicy(64)
    print("bucket policy: 64 buckets")
    print("limits: 10 in total, at most 1 per bucket\n")
    print("business key -> bucket (the same on every process and machine):")
    for key in ("tenant-A", "tenant-B"):
        print(f"  {key:<10} -> bucket {policy.bucket_for(key)}")

    async with Controller(max_parallel=10, max_parallel_per_bucket=1) as controller:
        controller.register("sync", sync_tenant)
        for index in range(4):
            await controller.submit(
                "sync", "A", task_id=f"a{index}", label="A-sync", bucket_key="tenant-A"
            )
        for index in range(2):
            await controller.submit(
                "sync", "B", task_id=f"b{index}", label="B-sync", bucket_key="tenant-B"
            )

        first = [controller.run_for("a0"), controller.run_for("b0")]
        while not all(run.status is TaskStatus.RUNNING for run in first):
            await asyncio.sleep(0.01)
        print("\n--- bucket A backs up, bucket B is not held back ---")
        print(render_table(await controller.list_tasks()))
        stats = await controller.stats()
        print(f"holding a slot per bucket: {dict(sorted(stats.per_bucket.items()))}")
        await controller.wait_all(timeout=60)
        print(f"\nall done: {dict(sorted((await controller.stats()).by_status.items()))}")


if __name__ == "__main__":
    asyncio.run(main())
