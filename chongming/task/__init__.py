"""The task API: the ``@task`` spec and the context a task receives."""

from chongming.task.context import Checkpoint as Checkpoint
from chongming.task.context import TaskContext as TaskContext
from chongming.task.signals import AttemptSignals as AttemptSignals
from chongming.task.signals import CarrierKind as CarrierKind
from chongming.task.spec import TaskSpec as TaskSpec
from chongming.task.spec import spec_for as spec_for
from chongming.task.spec import task as task
