"""Running one task: attempts, timeouts, stop and pause, the outcome."""

from chongming.run.host import RunHost as RunHost
from chongming.run.host import StandaloneHost as StandaloneHost
from chongming.run.outcome import Outcome as Outcome
from chongming.run.run_task import run_task as run_task
from chongming.run.task_run import TaskRun as TaskRun
