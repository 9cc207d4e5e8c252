# Sourced by .ci/slurm-up and .ci/slurm-down: where the daemons write their pid files, and how
# to tell that one of them still runs.
# shellcheck shell=bash disable=SC2034  # the pid files are read by the scripts that source this
readonly SLURMCTLD_PID=/run/slurmctld.pid
readonly SLURMD_PID=/run/slurmd.pid
readonly MUNGED_PID=/run/munge/munged.pid

daemon_pid() {   # daemon_pid PIDFILE NAME: prints the pid when that daemon is alive
    local pid state
    pid=$(cat "$1" 2>/dev/null) || return 1
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] || return 1
    # A daemon that exited stays a zombie where nothing reaps orphans (a container's PID 1).
    state=$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "/proc/$pid/status" 2>/dev/null)
    [ -n "$state" ] && [ "$state" != Z ] && echo "$pid"
}
