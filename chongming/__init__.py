"""chongming: an asyncio-native task runtime with auditable trajectories.

``__all__`` is the supported surface. Every name is imported on first use, so
``import chongming`` is cheap (a one-shot CLI command pays only for what it
uses) and never needs an optional driver such as asyncpg.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chongming.exports import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from chongming.blocking import BlockingController as BlockingController
    from chongming.blocking import BlockingQueuedTask as BlockingQueuedTask
    from chongming.blocking import BlockingTaskRun as BlockingTaskRun
    from chongming.controller import Controller as Controller
    from chongming.controller import ControllerStats as ControllerStats
    from chongming.controller.outbox import OutboxRelay as OutboxRelay
    from chongming.controller.outbox import install_outbox as install_outbox
    from chongming.controller.outbox import outbox_enqueue as outbox_enqueue
    from chongming.controller.queued import QueuedTask as QueuedTask
    from chongming.controller.stored_handle import StoredPipeline as StoredPipeline
    from chongming.errors import AdmissionStateError as AdmissionStateError
    from chongming.errors import BucketNotOwned as BucketNotOwned
    from chongming.errors import CheckpointMisuse as CheckpointMisuse
    from chongming.errors import ChildCycle as ChildCycle
    from chongming.errors import ChildFailed as ChildFailed
    from chongming.errors import ChongmingError as ChongmingError
    from chongming.errors import ConfigurationError as ConfigurationError
    from chongming.errors import ControllerClosed as ControllerClosed
    from chongming.errors import DuplicateNode as DuplicateNode
    from chongming.errors import DuplicateTask as DuplicateTask
    from chongming.errors import DuplicateTaskId as DuplicateTaskId
    from chongming.errors import ExecutorClosed as ExecutorClosed
    from chongming.errors import FactConflict as FactConflict
    from chongming.errors import FactTimeout as FactTimeout
    from chongming.errors import FencingError as FencingError
    from chongming.errors import IdempotencyConflict as IdempotencyConflict
    from chongming.errors import InvalidPipeline as InvalidPipeline
    from chongming.errors import InvalidRetention as InvalidRetention
    from chongming.errors import InvalidTransition as InvalidTransition
    from chongming.errors import NodeConflict as NodeConflict
    from chongming.errors import NondeterminismError as NondeterminismError
    from chongming.errors import PayloadError as PayloadError
    from chongming.errors import PipelineCycle as PipelineCycle
    from chongming.errors import QuorumNotSupported as QuorumNotSupported
    from chongming.errors import RetentionTooShort as RetentionTooShort
    from chongming.errors import ScheduleInvalid as ScheduleInvalid
    from chongming.errors import SchemaError as SchemaError
    from chongming.errors import StepFailed as StepFailed
    from chongming.errors import StoreBusy as StoreBusy
    from chongming.errors import StoreClosed as StoreClosed
    from chongming.errors import StoreError as StoreError
    from chongming.errors import StoreFull as StoreFull
    from chongming.errors import StoreUnavailable as StoreUnavailable
    from chongming.errors import TaskCancelled as TaskCancelled
    from chongming.errors import TaskFailed as TaskFailed
    from chongming.errors import TaskNotFound as TaskNotFound
    from chongming.errors import TaskNotPrunable as TaskNotPrunable
    from chongming.errors import UnknownClusterLimit as UnknownClusterLimit
    from chongming.errors import UnknownNode as UnknownNode
    from chongming.errors import UnknownRateLimit as UnknownRateLimit
    from chongming.errors import UnknownSchedule as UnknownSchedule
    from chongming.errors import UnknownTask as UnknownTask
    from chongming.errors import UnknownUpstream as UnknownUpstream
    from chongming.errors import VersionConflict as VersionConflict
    from chongming.executors import Executor as Executor
    from chongming.executors import InlineExecutor as InlineExecutor
    from chongming.executors import ProcessExecutor as ProcessExecutor
    from chongming.executors import ThreadExecutor as ThreadExecutor
    from chongming.executors import in_child_loop as in_child_loop
    from chongming.pipeline import AggregationPolicy as AggregationPolicy
    from chongming.pipeline import JoinMode as JoinMode
    from chongming.pipeline import NodeSnapshot as NodeSnapshot
    from chongming.pipeline import Pipeline as Pipeline
    from chongming.pipeline import PipelineOutcome as PipelineOutcome
    from chongming.pipeline import PipelineRun as PipelineRun
    from chongming.pipeline import PipelineSnapshot as PipelineSnapshot
    from chongming.pipeline import PipelineStatus as PipelineStatus
    from chongming.plane import PersistFailures as PersistFailures
    from chongming.plane import open_store as open_store
    from chongming.plane.reconcile import ReconcileReport as ReconcileReport
    from chongming.policies import Backoff as Backoff
    from chongming.policies import ControlWindows as ControlWindows
    from chongming.policies import ExponentialBackoff as ExponentialBackoff
    from chongming.policies import RetryPolicy as RetryPolicy
    from chongming.policies import Timeout as Timeout
    from chongming.render import render_history as render_history
    from chongming.render import render_pipeline as render_pipeline
    from chongming.render import render_table as render_table
    from chongming.run import Outcome as Outcome
    from chongming.run import TaskRun as TaskRun
    from chongming.run import run_task as run_task
    from chongming.scheduler import BucketPolicy as BucketPolicy
    from chongming.state import Failure as Failure
    from chongming.state import FailureKind as FailureKind
    from chongming.state import Progress as Progress
    from chongming.state import TaskQuery as TaskQuery
    from chongming.state import TaskSnapshot as TaskSnapshot
    from chongming.state import TaskStatus as TaskStatus
    from chongming.state import Transition as Transition
    from chongming.state import snapshot_to_json as snapshot_to_json
    from chongming.state import transition_to_json as transition_to_json
    from chongming.stores import InMemoryTaskStore as InMemoryTaskStore
    from chongming.stores import SqliteTaskStore as SqliteTaskStore
    from chongming.stores import TaskStore as TaskStore
    from chongming.stores.postgres import PostgresTaskStore as PostgresTaskStore
    from chongming.stores.retention import Retention as Retention
    from chongming.task_api import TaskContext as TaskContext
    from chongming.task_api import TaskRegistry as TaskRegistry
    from chongming.task_api import task as task
    from chongming.task_api.journal import ChildEnd as ChildEnd
    from chongming.task_api.journal import ChildHandle as ChildHandle
    from chongming.task_api.journal import EffectInfo as EffectInfo

#: Public name -> the module that defines it.
_WHERE: dict[str, str] = {
    "outbox_enqueue": "chongming.controller.outbox",
    "install_outbox": "chongming.controller.outbox",
    "OutboxRelay": "chongming.controller.outbox",
    "in_child_loop": "chongming.executors",
    "ProcessExecutor": "chongming.executors",
    "render_pipeline": "chongming.render",
    "UnknownNode": "chongming.errors",
    "QuorumNotSupported": "chongming.errors",
    "PipelineCycle": "chongming.errors",
    "UnknownUpstream": "chongming.errors",
    "DuplicateNode": "chongming.errors",
    "InvalidPipeline": "chongming.errors",
    "PipelineStatus": "chongming.pipeline",
    "NodeSnapshot": "chongming.pipeline",
    "PipelineSnapshot": "chongming.pipeline",
    "PipelineOutcome": "chongming.pipeline",
    "PipelineRun": "chongming.pipeline",
    "AggregationPolicy": "chongming.pipeline",
    "JoinMode": "chongming.pipeline",
    "Pipeline": "chongming.pipeline",
    "QueuedTask": "chongming.controller.enqueue",
    "StoredPipeline": "chongming.controller.stored_handle",
    "IdempotencyConflict": "chongming.errors",
    "AdmissionStateError": "chongming.errors",
    "Backoff": "chongming.policies",
    "BlockingController": "chongming.blocking",
    "BlockingQueuedTask": "chongming.blocking",
    "EffectInfo": "chongming.task_api.journal",
    "ChildEnd": "chongming.task_api.journal",
    "ChildHandle": "chongming.task_api.journal",
    "FencingError": "chongming.errors",
    "NondeterminismError": "chongming.errors",
    "StepFailed": "chongming.errors",
    "ChildFailed": "chongming.errors",
    "TaskFailed": "chongming.errors",
    "ChildCycle": "chongming.errors",
    "FactConflict": "chongming.errors",
    "FactTimeout": "chongming.errors",
    "BlockingTaskRun": "chongming.blocking",
    "UnknownClusterLimit": "chongming.errors",
    "Retention": "chongming.stores.retention",
    "InvalidRetention": "chongming.errors",
    "RetentionTooShort": "chongming.errors",
    "ScheduleInvalid": "chongming.errors",
    "UnknownSchedule": "chongming.errors",
    "UnknownRateLimit": "chongming.errors",
    "TaskNotPrunable": "chongming.errors",
    "BucketNotOwned": "chongming.errors",
    "BucketPolicy": "chongming.scheduler",
    "CheckpointMisuse": "chongming.errors",
    "ChongmingError": "chongming.errors",
    "ConfigurationError": "chongming.errors",
    "ControlWindows": "chongming.policies",
    "Controller": "chongming.controller",
    "ControllerClosed": "chongming.errors",
    "ControllerStats": "chongming.controller",
    "DuplicateTask": "chongming.errors",
    "DuplicateTaskId": "chongming.errors",
    "Executor": "chongming.executors",
    "ExecutorClosed": "chongming.errors",
    "ExponentialBackoff": "chongming.policies",
    "Failure": "chongming.state",
    "FailureKind": "chongming.state",
    "InMemoryTaskStore": "chongming.stores",
    "InlineExecutor": "chongming.executors",
    "InvalidTransition": "chongming.errors",
    "NodeConflict": "chongming.errors",
    "Outcome": "chongming.run",
    "PayloadError": "chongming.errors",
    "PersistFailures": "chongming.plane",
    "PostgresTaskStore": "chongming.stores.postgres",
    "Progress": "chongming.state",
    "ReconcileReport": "chongming.plane.reconcile",
    "RetryPolicy": "chongming.policies",
    "SchemaError": "chongming.errors",
    "SqliteTaskStore": "chongming.stores",
    "StoreBusy": "chongming.errors",
    "StoreClosed": "chongming.errors",
    "StoreError": "chongming.errors",
    "StoreFull": "chongming.errors",
    "StoreUnavailable": "chongming.errors",
    "TaskCancelled": "chongming.errors",
    "TaskContext": "chongming.task_api",
    "TaskNotFound": "chongming.errors",
    "TaskQuery": "chongming.state",
    "TaskRegistry": "chongming.task_api",
    "TaskRun": "chongming.run",
    "TaskSnapshot": "chongming.state",
    "TaskStatus": "chongming.state",
    "TaskStore": "chongming.stores",
    "ThreadExecutor": "chongming.executors",
    "Timeout": "chongming.policies",
    "Transition": "chongming.state",
    "UnknownTask": "chongming.errors",
    "VersionConflict": "chongming.errors",
    "open_store": "chongming.plane",
    "render_history": "chongming.render",
    "render_table": "chongming.render",
    "run_task": "chongming.run",
    "snapshot_to_json": "chongming.state",
    "task": "chongming.task_api",
    "transition_to_json": "chongming.state",
}

__all__ = sorted(_WHERE)

__getattr__, __dir__ = _lazy_exports(__name__, _WHERE, globals())
