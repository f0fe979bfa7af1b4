"""Run a page's Python blocks in order, as a reader pasting them would.

Used by ``tests/docs/test_blocks.py`` in a fresh interpreter per page: read a
JSON request on stdin (``prelude`` and ``blocks``, each with ``where`` and
``line``), run the prelude, then every block in one shared namespace with
``__name__ == "__main__"``. A block may use top-level ``await``; those run on
one event loop kept for the page. Exit 1 on the first block that raises,
naming it; tracebacks point at the lines of the Markdown page.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import sys
import traceback
from typing import Any


def main() -> int:
    request = json.load(sys.stdin)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(request["prelude"], "<prelude>", "exec"), namespace)
    with asyncio.Runner() as runner:
        for block in request["blocks"]:
            # Leading newlines make tracebacks name the page's own line numbers.
            source = "\n" * block["line"] + block["source"]
            try:
                code = compile(source, block["where"], "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
                result = eval(code, namespace)
                if inspect.iscoroutine(result):
                    runner.run(result)
            except BaseException:
                print(f"the block at {block['where']} failed:", file=sys.stderr)
                traceback.print_exc()
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
