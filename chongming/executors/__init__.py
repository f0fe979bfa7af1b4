"""Executors carry sync task functions; coroutines run on the loop itself."""

from chongming.executors.base import Executor as Executor
from chongming.executors.base import StopSemantics as StopSemantics
from chongming.executors.inline import InlineExecutor as InlineExecutor
from chongming.executors.thread import ThreadExecutor as ThreadExecutor
