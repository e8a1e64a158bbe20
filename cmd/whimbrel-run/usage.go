package main

const description = `Run one Whimbrel activity: claim it (→ RUNNING), run CMD, heartbeat while it
runs, stop CMD if the activity is cancelled or its lease is lost, record
COMPLETED or FAILED from CMD's exit status, and ready the activities that wait
on it. stdin, stdout and stderr pass through untouched; signals are relayed to
CMD's process group; as PID 1 it reaps orphans. Logs go to stderr. When not
PID 1, a guard process stops CMD's process group if whimbrel-run is killed
outright (kill -9); under a local launcher the launcher is that guard.

Identity comes from flags or the environment (a launcher sets the variables):
WHIMBREL_ACTIVITY_EXEC_ID, WHIMBREL_WORKFLOW_EXEC_ID, and optionally
WHIMBREL_ACTIVITY_NAME and WHIMBREL_WORKFLOW_NAME, which must then match the IDs.

Exit status:
  CMD's own         CMD exited (COMPLETED if 0, else FAILED)
  128+N             CMD was killed by signal N, or signal N came before CMD
                    started (CMD not started; recorded FAILED)
  121               the activity FAILED over its data: a template could not be
                    resolved (CMD was not started), or CMD exited 0 but its
                    WHIMBREL_OUTPUT is not a JSON object within 32 KiB
  122               the activity could not be claimed; CMD was not started
  123               CMD ran, but its outcome could not be recorded (see the log)
  124               CMD ran longer than --timeout and was stopped
  125               whimbrel-run itself failed (bad usage, store unreachable)
  126               CMD could not be executed
  127               CMD was not found

With --api simple (the Simple Lambda API) it writes no activity itself: it
reports its claim, heartbeats and outcome as activity_event items, which a
processor (whimbrel-lambda, or whimbrel-poller) applies and advances the
workflow from. It still starts CMD only once its claim took effect, and still
stops CMD when a heartbeat finds the activity cancelled or taken.

Examples:
  ENTRYPOINT ["whimbrel-run", "--"]           in a Dockerfile; CMD is the image's command
  whimbrel-run --timeout 2h -- ./etl.sh nightly
  whimbrel-run --heartbeat-interval 5s --heartbeat-timeout 30s -- python job.py`
