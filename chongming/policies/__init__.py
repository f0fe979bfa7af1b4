"""Policies as pure data and decisions: no asyncio, no clock reads."""

from chongming.policies.retry import Backoff as Backoff
from chongming.policies.retry import ExponentialBackoff as ExponentialBackoff
from chongming.policies.retry import RetryDecision as RetryDecision
from chongming.policies.retry import RetryPolicy as RetryPolicy
from chongming.policies.timeout import Expiry as Expiry
from chongming.policies.timeout import Timeout as Timeout
from chongming.policies.windows import ControlWindows as ControlWindows
