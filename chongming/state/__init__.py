"""The state model: statuses, the transition table and the records.

Pure data and pure functions: nothing here imports asyncio, a driver or a clock.
"""

from chongming.state.audit import audit_history as audit_history
from chongming.state.fold import FoldedState as FoldedState
from chongming.state.fold import HistoryGap as HistoryGap
from chongming.state.fold import fold_history as fold_history
from chongming.state.machine import apply_transition as apply_transition
from chongming.state.query import TaskQuery as TaskQuery
from chongming.state.records import Failure as Failure
from chongming.state.records import FailureKind as FailureKind
from chongming.state.records import JsonValue as JsonValue
from chongming.state.records import Progress as Progress
from chongming.state.records import TaskSnapshot as TaskSnapshot
from chongming.state.records import Transition as Transition
from chongming.state.serialize import snapshot_to_json as snapshot_to_json
from chongming.state.serialize import transition_to_json as transition_to_json
from chongming.state.status import ACTIVE_STATUSES as ACTIVE_STATUSES
from chongming.state.status import CARRIER_STATUSES as CARRIER_STATUSES
from chongming.state.status import TERMINAL_STATUSES as TERMINAL_STATUSES
from chongming.state.status import TaskStatus as TaskStatus
from chongming.state.table import TRANSITIONS as TRANSITIONS
from chongming.state.table import check_transition as check_transition
from chongming.state.table import is_allowed as is_allowed
from chongming.state.triggers import Trigger as Trigger
