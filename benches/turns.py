"""Run commands taking turns, run by run, and write their medians as hyperfine's JSON does.

    python3 turns.py OUT RUNS pipe|null NAME COMMAND [NAME COMMAND ...]

A hyperfine series runs one command RUNS times, then the next; on a 2-core machine each
sandboxed run leaves kernel work behind (network namespaces are torn down asynchronously)
that slows the series after it. Taking turns gives every command the same conditions.
COMMAND is split like a shell would (no shell runs). Output goes to pipes that are read (as
an agent's harness reads it) or to /dev/null (as hyperfine's). Python's spawning (~1 ms) is
in every row alike.
"""
import json
import shlex
import statistics
import subprocess
import sys
import time

out, runs, output = sys.argv[1], int(sys.argv[2]), sys.argv[3]
variants = {sys.argv[i]: shlex.split(sys.argv[i + 1]) for i in range(4, len(sys.argv), 2)}
streams = {"capture_output": True} if output == "pipe" else {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
times = {k: [] for k in variants}
for _ in range(10):
    for cmd in variants.values():
        subprocess.run(cmd, **streams)
for _ in range(runs):
    for k, cmd in variants.items():
        t = time.perf_counter()
        subprocess.run(cmd, **streams)
        times[k].append(time.perf_counter() - t)
results = [{"command": k, "median": statistics.median(v), "stddev": statistics.stdev(v), "times": v} for k, v in times.items()]
json.dump({"results": results}, open(out, "w"))
