# Sourced by scripts/test: runs named steps, one at a time or several at
# once, keeps how long each took, and prints a table of the times at the
# end, or when a step fails, naming the step. Functions only; the caller
# sets steps_logs to a folder for the logs of steps run at once.
#
# A step's command is a program, or a function that returns non-zero on
# failure: bash ignores set -e inside a command whose status is tested, so
# a function step must test its own commands.

steps_started=$SECONDS
steps_names=()
steps_seconds=()
steps_how=()
steps_running=() # pids of the steps running at once, for the interrupt trap

# steps_record NAME SECONDS HOW adds a line to the table.
steps_record() {
  steps_names+=("$1")
  steps_seconds+=("$2")
  steps_how+=("$3")
}

# steps_table prints each step's time and the total.
steps_table() {
  local i
  printf '\n%-28s %8s\n' "step" "seconds"
  for i in "${!steps_names[@]}"; do
    printf '%-28s %8s%s\n' "${steps_names[$i]}" "${steps_seconds[$i]}" "${steps_how[$i]:+  ${steps_how[$i]}}"
  done
  printf '%-28s %8s\n' "total (wall clock)" "$((SECONDS - steps_started))"
}

# steps_fail NAME... prints the table and stops the script, naming the
# failed steps.
steps_fail() {
  steps_table
  printf '\nFAILED: %s\n' "$*" >&2
  exit 1
}

# step NAME COMMAND [ARG...] runs COMMAND, its output shown as it comes,
# and stops the script when it fails.
step() {
  local name=$1 started=$SECONDS status=0
  shift
  printf '\n==> %s\n' "$name"
  "$@" || status=$?
  steps_record "$name" $((SECONDS - started)) ""
  if [ "$status" -ne 0 ]; then
    steps_fail "$name (exit $status)"
  fi
}

# steps_at_once NAME COMMAND [NAME COMMAND]... runs the commands (programs
# without arguments) at the same time, each with its output in a log of
# its own; once all have ended it prints the logs in the order given, and
# stops the script when any failed, naming each that did.
steps_at_once() {
  local names=() commands=() pids=() logs=() ended=() seconds=() codes=()
  local i n started=$SECONDS running joined failed=()
  while [ $# -gt 0 ]; do
    names+=("$1")
    commands+=("$2")
    shift 2
  done
  n=${#names[@]}
  joined=$(printf '%s, ' "${names[@]}")
  printf '\n==> at once: %s\n' "${joined%, }"
  # Each step runs in a process group of its own (set -m), so that an
  # interrupt ends what it started too (steps_stop).
  set -m
  for ((i = 0; i < n; i++)); do
    logs+=("$steps_logs/$(printf '%02d' "$i")-$(echo "${names[$i]}" | tr -c 'A-Za-z0-9\n' '-').log")
    "${commands[$i]}" </dev/null >"${logs[$i]}" 2>&1 &
    pids+=($!)
    ended+=(0)
    seconds+=(0)
    codes+=(0)
  done
  set +m
  steps_running=("${pids[@]}")
  # Each step's time is when it ended, seen within a second: a step that
  # ended is no longer a process, and wait gives its exit status.
  running=$n
  while [ "$running" -gt 0 ]; do
    for ((i = 0; i < n; i++)); do
      if [ "${ended[$i]}" -eq 0 ] && ! kill -0 "${pids[$i]}" 2>/dev/null; then
        wait "${pids[$i]}" && codes[$i]=0 || codes[$i]=$?
        ended[$i]=1
        seconds[$i]=$((SECONDS - started))
        running=$((running - 1))
        if [ "${codes[$i]}" -eq 0 ]; then
          printf '    %s: ok after %s s\n' "${names[$i]}" "${seconds[$i]}"
        else
          printf '    %s: FAILED (exit %s) after %s s\n' "${names[$i]}" "${codes[$i]}" "${seconds[$i]}"
        fi
      fi
    done
    if [ "$running" -gt 0 ]; then
      sleep 1
    fi
  done
  steps_running=()
  for ((i = 0; i < n; i++)); do
    printf '\n==> %s (at once with the others; its log follows)\n' "${names[$i]}"
    cat "${logs[$i]}"
    steps_record "${names[$i]}" "${seconds[$i]}" "at once"
    if [ "${codes[$i]}" -ne 0 ]; then
      failed+=("${names[$i]} (exit ${codes[$i]})")
    fi
  done
  if [ ${#failed[@]} -gt 0 ]; then
    steps_fail "${failed[@]}"
  fi
}

# steps_stop ends the steps running at once, with their process groups
# (on an interrupt); each step's own exit trap stops the servers it started.
steps_stop() {
  local pid
  for pid in "${steps_running[@]+"${steps_running[@]}"}"; do
    kill -TERM -- "-$pid" 2>/dev/null || true
  done
}
