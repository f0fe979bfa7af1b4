"""Schedules: tasks enqueued on a cadence, exactly once per tick across the fleet.

- :mod:`~chongming.schedules.cadence`: tick arithmetic in a time zone (pure);
- :mod:`~chongming.schedules.catch_up`: which due ticks fire (pure);
- :mod:`~chongming.schedules.loop`: the scheduler loop a worker runs.

Not to be confused with :mod:`chongming.scheduler`, which is admission.
"""
