"""bwrap given stockade's default policy as far as bwrap can express it: the plan's uid, gid,
hostname, private /tmp and /dev/shm, writable roots, credential masks and scrubbed environment
(not expressible: Landlock, the seccomp filters, mediated creation, idmapped mounts, read-only
/proc/sys, resource limits). Reads `stockade policy show --json` on stdin and prints the bwrap
command running `true`, shell-quoted; the benches' "bwrap, stockade's policy" row.

    stockade policy show --json | python3 benches/bwrap_equivalent.py
"""
import json
import shlex
import sys

plan = json.load(sys.stdin)["plan"]
a = ["bwrap", "--unshare-all", "--uid", str(plan["ids"]["inside_uid"]), "--gid", str(plan["ids"]["inside_gid"]),
     "--cap-drop", "ALL", "--new-session", "--die-with-parent", "--hostname", plan["hostname"],
     "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/dev/shm"]
for w in plan["writable_roots"]:
    a += ["--bind", w, w]
for m in plan["mounts"]:
    if m["op"] == "mask_file":
        a += ["--ro-bind", "/dev/null", m["target"]]
    elif m["op"] == "mask_dir":
        a += ["--tmpfs", m["target"]]
a += ["--clearenv"]
for k, v in plan["env"]:
    a += ["--setenv", k, v]
a += ["--chdir", plan["cwd"], "true"]
print(shlex.join(a))
