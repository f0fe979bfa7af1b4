"""Admission and buckets: which queued task runs next, and where a key belongs.

Pure bookkeeping and pure functions; the controller applies the decisions.
"""

from chongming.scheduler.admission import AdmissionQueue as AdmissionQueue
from chongming.scheduler.buckets import BucketPolicy as BucketPolicy
from chongming.scheduler.buckets import format_bucket_ranges as format_bucket_ranges
from chongming.scheduler.buckets import parse_bucket_ranges as parse_bucket_ranges
from chongming.scheduler.limits import AdmissionLimits as AdmissionLimits
from chongming.scheduler.limits import AdmissionStatistics as AdmissionStatistics
