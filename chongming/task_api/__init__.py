"""The task API: the ``@task`` spec and the context a task receives."""

from chongming.task_api.context import Checkpoint as Checkpoint
from chongming.task_api.context import TaskContext as TaskContext
from chongming.task_api.registry import TaskRegistry as TaskRegistry
from chongming.task_api.signals import AttemptSignals as AttemptSignals
from chongming.task_api.signals import CarrierKind as CarrierKind
from chongming.task_api.spec import TaskSpec as TaskSpec
from chongming.task_api.spec import spec_for as spec_for
from chongming.task_api.spec import task as task
