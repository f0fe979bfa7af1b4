"""Executors carry sync task functions; coroutines run on the loop itself."""

from chongming.executors.base import CarrierFailure as CarrierFailure
from chongming.executors.base import Executor as Executor
from chongming.executors.base import StopSemantics as StopSemantics
from chongming.executors.inline import InlineExecutor as InlineExecutor
from chongming.executors.process import ProcessExecutor as ProcessExecutor
from chongming.executors.process_target import in_child_loop as in_child_loop
from chongming.executors.thread import ThreadExecutor as ThreadExecutor
