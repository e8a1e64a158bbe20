package main

// description is whimbrel-monitor's --help text.
const description = `Sweep the live activities and workflows, and for each one that needs it:
  RUNNING, no heartbeat for its timeout (+ --skew)  → TIMED_OUT, downstream CANCELLED
  QUEUED or PREPARING longer than its queued timeout → FAILED (its wrapper never started)
  pending, in a FAILED or CANCELLED workflow          → CANCELLED
  RUNNING, in a CANCELLED workflow                    → CANCELLED_RUNNING (its wrapper stops it)
  ended, but its dependents were never advanced       → advanced (ready or cancel them)
  REQUESTED, every activity it waits on COMPLETED     → READY
  every activity terminal, workflow not settled       → COMPLETED or FAILED
  workflow still REQUESTED after --queued-timeout     → FAILED (its start never finished)
Every change is a conditional write, so any number of monitors may run at
once. A sweep's cost grows with what is running, never with history, but
for a bounded scan (--adopt-pages) that finds the items other clients
wrote to DynamoDB without the shard attributes Whimbrel's indexes need.
Every monitor also fires the due schedules (whimbrel schedule) at each
interval: running monitors is running schedulers, and each fire time still
starts exactly one run. And every monitor delivers the notifications that
definitions ask for (notify:) and fires their deadlines, in a goroutine of
its own, at most --notify-concurrency at a time: a receiver that hangs is
cut off after --notify-timeout and tried again, with backoff, for 24 h.

Examples:
  whimbrel-monitor                 sweep every 30 s
  whimbrel-monitor --once          one sweep, for cron, a scheduled ECS task or an EventBridge rule`
