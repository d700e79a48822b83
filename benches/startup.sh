#!/usr/bin/env bash
# Side-by-side start-up cost of one sandboxed `true`, in one run, on this machine:
# bare `true`, `unshare -Urnpf`, bwrap (issue #2's anchor), stockade and srt (gVisor: see
# benches/gvisor.sh). Prints the medians and ratios as a Markdown page (or writes it to $1): it
# is a whole page of its own, so never give it docs/benchmarks.md, whose hand-written sections
# it would erase; copy the rows you re-measured into that page by hand.
#
#   bash benches/startup.sh [OUT.md]   # installs hyperfine/bubblewrap (Debian) and srt (npm) if missing
#   OLD=/path/to/previous/stockade bash benches/startup.sh   # the previous binary beside, every table
#
# With OLD, every table gains a row of the previous binary measured in the same series as the new
# one, and every stockade row a ratio to the previous binary's (issue 32, item 5: the previous
# binary beside the new one, ratios to an anchor measured in the same run).
#
# Not a test: nothing here asserts a time. The floor under these rows (the same kernel work
# without stockade): benches/startup_floor.sh.
set -euo pipefail
out="${1:--}"
[ "$out" = - ] || [[ "$out" = /* ]] || out="$PWD/$out"
cd "$(dirname "$0")/.."
runs="${RUNS:-200}"

need_apt=()
command -v hyperfine >/dev/null || need_apt+=(hyperfine)
command -v bwrap >/dev/null || need_apt+=(bubblewrap)
command -v socat >/dev/null || need_apt+=(socat)   # srt needs it
command -v rg >/dev/null || need_apt+=(ripgrep)    # srt needs it
[ -x /usr/bin/time ] || need_apt+=(time)          # the footprint's peak RSS
if ((${#need_apt[@]})) && [ "$(id -u)" = 0 ]; then
  apt-get update -qq && apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
srt_dir="${SRT_DIR:-/var/tmp/stockade-bench-srt}"
if [ ! -x "$srt_dir/node_modules/.bin/srt" ] && command -v npm >/dev/null; then
  mkdir -p "$srt_dir" && (cd "$srt_dir" && npm install --silent @anthropic-ai/sandbox-runtime >/dev/null 2>&1) || true
fi

# The stockade binary a `cargo build --release` makes (its path from cargo's own report).
built_stockade() {
  cargo build --release -q -p stockade-cli --message-format=json | python3 -c '
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("reason") == "compiler-artifact" and msg["target"]["name"] == "stockade" and msg.get("executable"):
        print(msg["executable"])
'
}
# Static on glibc (.cargo/config.toml), under target/<host triple>/release.
bin=$(built_stockade)
[ -x "$bin" ] || { echo "benches/startup.sh: no stockade binary from cargo build" >&2; exit 1; }
old="${OLD:-}"
[ -z "$old" ] || [ -x "$old" ] || { echo "benches/startup.sh: OLD=$old is not an executable" >&2; exit 1; }
# The same sources linked dynamically (RUSTFLAGS replaces the config's crt-static), to show
# what static linking saves.
# DYNAMIC=0 leaves that row out (its first build takes about ten minutes here).
dyn_bin=""
[ "${DYNAMIC:-1}" = 0 ] || dyn_bin=$(RUSTFLAGS="-C target-feature=-crt-static" CARGO_TARGET_DIR="$PWD/target/bench-dynamic" built_stockade) || dyn_bin=""
ws="$(mktemp -d /var/tmp/stockade-bench.XXXXXX)"
trap 'rm -rf "$ws" "$ws.tree"' EXIT
chmod 755 "$ws"
cd "$ws"
# The previous binary, where the unprivileged user can run it too.
[ -z "$old" ] || { install -m 755 "$old" "$ws/old-stockade"; old="$ws/old-stockade"; }
# A workspace with content, made now so its directories have settled (their ctimes are more
# than 3 s old) when it is measured: stockade walks the writable roots before the run (to mask
# `.env` files and protect hooks) and checks afterwards which directories changed.
tree="$ws.tree" # beside the workspace of the rows above, which is empty
python3 - "$tree" <<'PY'
import os, sys
for d in range(1000):
    p = os.path.join(sys.argv[1], f"d{d // 100}", f"e{d}")
    os.makedirs(p)
    for f in range(20):
        open(os.path.join(p, f"f{f}.rs"), "w").close()
PY
tree_entries=$(find "$tree" | wc -l)

# bwrap given stockade's default policy as far as bwrap can express it (from the plan that
# `stockade policy show --json` prints): the command's uid and gid, no capabilities, a new session,
# the hostname, private /tmp and /dev/shm, the workspace writable, the credential masks, the
# scrubbed environment. Not expressible: Landlock, the seccomp filters, mediated creation,
# idmapped mounts, read-only /proc/sys, resource limits.
bwrap_equivalent=$("$bin" policy show --json | python3 "$OLDPWD/benches/bwrap_equivalent.py")
cmds=(
  "true"
  "unshare -Urnpf true"
  "bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc true"
  "$bwrap_equivalent"
  "$bin run -- true"
  "$bin run --memory 0 --pids 0 -- true"
)
names=("bare true" "unshare -Urnpf" "bwrap --unshare-all" "bwrap, stockade's policy as far as bwrap expresses it"
  "stockade run (default policy)" "stockade run --memory 0 --pids 0 (no limits, as bwrap)")
if [ -n "$old" ]; then
  cmds+=("$old run -- true" "$old run --memory 0 --pids 0 -- true")
  names+=("previous: stockade run (default policy)" "previous: stockade run --memory 0 --pids 0 (no limits, as bwrap)")
fi
if [ -x "$dyn_bin" ] && [ "$dyn_bin" != "$bin" ]; then
  cmds+=("$dyn_bin run -- true")
  names+=("stockade run, linked dynamically (glibc)")
fi
if [ -x "$srt_dir/node_modules/.bin/srt" ]; then
  cmds+=("$srt_dir/node_modules/.bin/srt true")
  names+=("srt $(cd "$srt_dir" && node -p 'require("@anthropic-ai/sandbox-runtime/package.json").version' 2>/dev/null)")
fi
# gVisor's runsc is measured by benches/gvisor.sh, beside stockade's gvisor backend: started
# as root it gives its standard streams to `nobody`, and hyperfine's are /dev/null.

args=()
for i in "${!cmds[@]}"; do
  # Slow anchors get fewer runs so the whole benchmark stays short.
  args+=(-n "${names[$i]}" "${cmds[$i]}")
done
hyperfine -N --warmup 20 --runs "$runs" --export-json "$ws/result.json" "${args[@]}" >&2 || true

# hyperfine sends output to /dev/null, which stockade passes through unrelayed; an agent's
# harness reads a pipe, which goes through the output relay (its limit): measure that too.
pipe_json="$ws/pipe.json"
old_rows=()
[ -z "$old" ] || old_rows=(-n "previous: stockade run, stdout a pipe" "$old run -- true")
hyperfine -N --warmup 20 --runs "$runs" --output=pipe --export-json "$pipe_json" \
  -n "bwrap --unshare-all, stdout a pipe" "bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc true" \
  -n "stockade run, stdout a pipe" "$bin run -- true" "${old_rows[@]}" >&2 || true

tree_json="$ws/tree.json"
hyperfine -N --warmup 3 --runs "${TREE_RUNS:-30}" --export-json "$tree_json" \
  -n "bwrap --unshare-all, workspace bound" "bwrap --unshare-all --ro-bind / / --bind $tree $tree --dev /dev --proc /proc true" \
  -n "stockade run, workspace of $tree_entries entries" "$bin run --workspace $tree -- true" \
  ${old:+-n "previous: stockade run, workspace of $tree_entries entries" "$old run --workspace $tree -- true"} >&2 || true

# Most users are not root: run stockade and bwrap again as an unprivileged user when we can.
unpriv_json="$ws/unpriv.json"
if [ "$(id -u)" = 0 ] && id "${BENCH_USER:-stockade-test}" >/dev/null 2>&1; then
  user="${BENCH_USER:-stockade-test}"
  install -m 755 "$bin" "$ws/stockade"
  uws="$ws/unpriv-ws"
  mkdir -p "$uws" && chown "$user" "$uws" "$ws" && chmod 755 "$ws"
  (cd "$uws" && runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/ \
    hyperfine -N --warmup 20 --runs "$runs" --export-json "$unpriv_json" \
      -n "stockade run (unprivileged caller)" "$ws/stockade run -- true" \
      -n "bwrap --unshare-all (unprivileged caller)" "bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc true" \
      ${old:+-n "previous: stockade run (unprivileged caller)" "$old run -- true"} >&2) || true
fi

# The cost of mediated creation: 2000 empty files created in the workspace, one `open(O_CREAT)`
# each (plus one mkdir), under bwrap (which does not mediate) and stockade.
# A directory of the caller's own (the unprivileged rows above gave "$ws" to another user).
files=2000
cws="$ws/create-ws"
mkdir -p "$cws" && chown "$(id -u):$(id -g)" "$ws"
# On a tmpfs when we can: disk timing noise here is larger than the cost being measured.
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=64m tmpfs "$cws" 2>/dev/null; then
  trap 'umount "$cws" 2>/dev/null; rm -rf "$ws" "$ws.tree"' EXIT
  cfs=tmpfs
else
  cfs="the workspace's disk"
fi
cat > "$ws/create.sh" <<SH
d=\$(mktemp -d -p "$cws") && i=0 && while [ \$i -lt $files ]; do : > "\$d/f\$i"; i=\$((i+1)); done && rm -rf "\$d"
SH
create_json="$ws/create.json"
hyperfine -N --warmup 2 --runs "${CREATE_RUNS:-15}" --export-json "$create_json" \
  -n "sh: create $files files (bare)" "sh $ws/create.sh" \
  -n "bwrap: create $files files" "bwrap --unshare-all --ro-bind / / --bind $cws $cws --dev /dev --proc /proc sh $ws/create.sh" \
  -n "stockade: create $files files" "$bin run --workspace $cws -- sh $ws/create.sh" \
  ${old:+-n "previous: stockade: create $files files" "$old run --workspace $cws -- sh $ws/create.sh"} >&2 || true

# The same start-up rows again, taking turns run by run (benches/turns.py says why), output
# to /dev/null as hyperfine's.
turns_json="$ws/turns.json"
python3 "$OLDPWD/benches/turns.py" "$turns_json" "$runs" null \
  "bwrap --unshare-all" "bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc true" \
  "bwrap, stockade's policy as far as bwrap expresses it" "$bwrap_equivalent" \
  "stockade run (default policy)" "$bin run -- true" \
  "stockade run --memory 0 --pids 0" "$bin run --memory 0 --pids 0 -- true" \
  ${old:+"previous: stockade run (default policy)" "$old run -- true"} || true

# The cost of the limits: the default run (cgroup groups for memory and pids, their reaper,
# the output relay) against the same run with those limits off, taking turns run by run (the
# difference is about a millisecond, less than this machine's drift over a hyperfine series).
# Output to pipes, as an agent's harness reads it (to /dev/null the relay is skipped).
limits_json="$ws/limits.json"
python3 "$OLDPWD/benches/turns.py" "$limits_json" "$runs" pipe \
  "stockade run (default limits)" "$bin run -- true" \
  "stockade run --memory 0 --pids 0 --output-limit 0" "$bin run --memory 0 --pids 0 --output-limit 0 -- true" \
  ${old:+"previous: stockade run (default limits)" "$old run -- true"} \
  ${old:+"previous: stockade run --memory 0 --pids 0 --output-limit 0" "$old run --memory 0 --pids 0 --output-limit 0 -- true"} || true

# The egress proxy: start-up with --net proxy, added latency per plain HTTP request, and
# CONNECT throughput, against loopback servers on the host (allowed with --allow-host).
net_json="$ws/net.json"
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(freeport); kport=$(freeport); tport=$(freeport); sport=$(freeport); fport=$(freeport); fkport=$(freeport)
mkdir -p "$ws/www" && echo hello > "$ws/www/small" && truncate -s 1G "$ws/www/big"
# HTTP/1.0 (a new upstream connection per request) and HTTP/1.1 keep-alive servers: python's
# http.server, and a small server that answers in one write (benches/http_server.py).
(cd "$ws/www" && exec python3 -m http.server "$port" --bind 127.0.0.1 >/dev/null 2>&1) &
server=$!
cat > "$ws/keepalive.py" <<'PY'
import http.server, os, sys
class H(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def log_message(self, *a): pass
os.chdir(sys.argv[2])
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
python3 "$ws/keepalive.py" "$kport" "$ws/www" >/dev/null 2>&1 &
kserver=$!
python3 "$OLDPWD/benches/http_server.py" "$fport" close >/dev/null 2>&1 &
fserver=$!
python3 "$OLDPWD/benches/http_server.py" "$fkport" keep >/dev/null 2>&1 &
fkserver=$!
# A TLS server: what a CONNECT tunnel carries.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$ws/key.pem" \
  -out "$ws/cert.pem" -days 1 -subj /CN=localhost >/dev/null 2>&1
(cd "$ws/www" && exec openssl s_server -quiet -WWW -accept "127.0.0.1:$tport" -cert "$ws/cert.pem" -key "$ws/key.pem" >/dev/null 2>&1) &
tserver=$!
# A bare byte relay (what srt's socat bridges are), for the floor of any relay's cost.
(exec socat "TCP-LISTEN:$sport,bind=127.0.0.1,reuseaddr,fork,nodelay" "TCP:127.0.0.1:$fkport,nodelay") >/dev/null 2>&1 &
relay=$!
sleep 0.5
hyperfine -N --warmup 10 --runs "$runs" --export-json "$net_json" \
  -n "stockade run --net none" "$bin run -- true" \
  -n "stockade run --net proxy" "$bin run --net proxy -- true" \
  ${old:+-n "previous: stockade run --net none" "$old run -- true"} \
  ${old:+-n "previous: stockade run --net proxy" "$old run --net proxy -- true"} >&2 || true
# Latency: 1000 sequential requests from one curl (it keeps its connection to the proxy). The
# timings go to a file and are read at the end: a line per request through the run's output
# relay would measure the relay, not the proxy (and bodies go to /dev/null, not to output
# files, each of which would be a mediated create inside the sandbox).
# p50 of each round; the median of five rounds, direct and proxied taking turns.
p50() { sort -n | awk '{a[NR]=$1} END {printf "%.0f", a[int((NR+1)/2)] * 1000000}'; }
lat() { # port, then the command prefix (none: curl on the host, directly)
  local p=$1 urls=""; shift
  for _ in $(seq 1000); do urls+=" http://127.0.0.1:$p/small"; done
  "$@" sh -c "curl -s $urls -w '%{stderr}%{time_total}\n' 2>/tmp/stockade-bench-lat >/dev/null; cat /tmp/stockade-bench-lat; rm -f /tmp/stockade-bench-lat" | p50
}
declare -A L=()
for _ in 1 2 3 4 5; do
  for k in "$fport" "$fkport" "$port" "$kport"; do
    L[d$k]+="$(lat "$k") "
    L[p$k]+="$(lat "$k" "$bin" run --net proxy --allow-host "127.0.0.1:$k" --) "
    [ -z "$old" ] || L[o$k]+="$(lat "$k" "$old" run --net proxy --allow-host "127.0.0.1:$k" --) "
  done
  L[s]+="$(lat "$sport") "
done
tp() { curl -s -k -o /dev/null -w '%{speed_download}' "$@"; }
declare -A T=()
for _ in 1 2 3; do
  T[d]+="$(tp "http://127.0.0.1:$port/big") "
  T[p]+="$("$bin" run --net proxy --allow-host "127.0.0.1:$port" -- curl -s -p -o /dev/null -w '%{speed_download}' "http://127.0.0.1:$port/big") "
  T[td]+="$(tp "https://127.0.0.1:$tport/big") "
  T[tp]+="$("$bin" run --net proxy --allow-host "127.0.0.1:$tport" -- curl -s -k -o /dev/null -w '%{speed_download}' "https://127.0.0.1:$tport/big") "
  if [ -n "$old" ]; then
    T[op]+="$("$old" run --net proxy --allow-host "127.0.0.1:$port" -- curl -s -p -o /dev/null -w '%{speed_download}' "http://127.0.0.1:$port/big") "
    T[otp]+="$("$old" run --net proxy --allow-host "127.0.0.1:$tport" -- curl -s -k -o /dev/null -w '%{speed_download}' "https://127.0.0.1:$tport/big") "
  fi
done
kill "$server" "$kserver" "$fserver" "$fkserver" "$tserver" "$relay" 2>/dev/null || true
{
  echo "{"
  sep=""
  for k in "${!L[@]}" ; do printf '%s"lat_%s": [%s]' "$sep" "$k" "$(echo ${L[$k]} | tr ' ' ',')"; sep=", "; done
  for k in "${!T[@]}" ; do printf '%s"tp_%s": [%s]' "$sep" "$k" "$(echo ${T[$k]} | tr ' ' ',')"; done
  printf ', "port": %s, "kport": %s, "fport": %s, "fkport": %s}\n' "$port" "$kport" "$fport" "$fkport"
} > "$ws/netnums.json"

# The sanitizer: `stockade sanitize` against a regex chain of the same rules (python's re,
# one substitution per rule: the straightforward approach), on ASCII-heavy text and on mixed
# Unicode text, both seasoned with a few of what is stripped.
san_json="$ws/sanitize.json"
python3 - "$ws" <<'PY'
import os, random, sys
ws = sys.argv[1]
random.seed(1)
spice = ["\u200b", "\x1b[31m", "\x1b[0m", "\u202e", "\U000e0041", "\x1b]0;t\x07"]
words = ["build", "test", "error:", "warning", "src/main.rs:12:5", "ok", "passed", "cargo", "=>", "0x7f"]
mixed = ["日本語の", "文本", "한국어", "نص", "हिन्दी", "Ελληνικά", "Русский", "🚀", "👍🏽", "é", "ß", "—"]
for name, vocab, size in (("ascii.txt", words, 100 << 20), ("mixed.txt", words + mixed * 3, 50 << 20)):
    with open(os.path.join(ws, name), "w") as f:
        line, n = [], 0
        while n < size:
            line = " ".join(random.choice(vocab) for _ in range(12))
            if random.random() < 0.02:
                line += random.choice(spice)
            line += "\n"
            f.write(line)
            n += len(line.encode())
PY
cat > "$ws/regex_chain.py" <<'PY'
import re, sys
rules = [
    re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]"),
    re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"),
    re.compile(r"\x1b[PX^_].*?\x1b\\", re.S),
    re.compile(r"\x1b[ -/]*[0-~]?"),
    re.compile("[\u200b-\u200f\u2060-\u2064\u206a-\u206f\ufeff\u00ad\u034f\u180b-\u180f\u3164\uffa0]"),
    re.compile("[\u061c\u202a-\u202e\u2066-\u2069]"),
    re.compile("[\U000e0000-\U000e0fff]"),
    re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]"),
    re.compile("[\ufff9-\ufffb\u2000-\u200a]"),
    re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"),
]
text = sys.stdin.buffer.read().decode("utf-8", "replace")
for r in rules:
    text = r.sub("", text)
sys.stdout.buffer.write(text.encode())
PY
hyperfine --warmup 1 --runs 5 --export-json "$san_json" \
  -n "stockade sanitize, ASCII-heavy" "$bin sanitize < $ws/ascii.txt > /dev/null 2>&1" \
  -n "regex chain (python re), ASCII-heavy" "python3 $ws/regex_chain.py < $ws/ascii.txt > /dev/null" \
  -n "stockade sanitize, mixed Unicode" "$bin sanitize < $ws/mixed.txt > /dev/null 2>&1" \
  -n "regex chain (python re), mixed Unicode" "python3 $ws/regex_chain.py < $ws/mixed.txt > /dev/null" \
  ${old:+-n "previous: stockade sanitize, ASCII-heavy" "$old sanitize < $ws/ascii.txt > /dev/null 2>&1"} \
  ${old:+-n "previous: stockade sanitize, mixed Unicode" "$old sanitize < $ws/mixed.txt > /dev/null 2>&1"} \
  >/dev/null 2>&1 || true
san_sizes="$(stat -c %s "$ws/ascii.txt") $(stat -c %s "$ws/mixed.txt")"

# Footprint and leaks: the supervisor's peak RSS, then 1000 sequential runs and 50 concurrent
# ones, with host mounts, open file handles, run cgroups, processes and temporary entries
# counted before and after each.
soak_json="$ws/soak.json"
python3 - "$bin" "$soak_json" "$old" <<'PY'
import glob, json, os, subprocess, sys, time
bin, out, old = sys.argv[1], sys.argv[2], sys.argv[3]
def peak_rss(cmd):
    # The largest maxrss of the command and its waited-for descendants (the supervisor's: the
    # init and the command are smaller), as GNU time reports it (KiB). Not python's own
    # RUSAGE_CHILDREN: python starts a child with vfork, and the kernel counts the parent's
    # resident set (python's, ~13 MiB) as that child's peak when it execs (issue 32: that was
    # the "13.5 MiB" of earlier runs; `true` measured the same).
    r = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return int(r.stderr.strip().splitlines()[-1])
def counts():
    return {
        "mounts": len(open("/proc/self/mountinfo").readlines()),
        "file handles": int(open("/proc/sys/fs/file-nr").read().split()[0]),
        "run cgroups": len(glob.glob("/sys/fs/cgroup/**/stockade-*", recursive=True)),
        "processes": len([p for p in os.listdir("/proc") if p.isdigit()]),
        "/tmp and /var/tmp entries": len(os.listdir("/tmp")) + len(os.listdir("/var/tmp")),
    }
res = {"rss": {
    "stockade run -- true": peak_rss([bin, "run", "--", "true"]),
    "stockade run --net proxy -- true": peak_rss([bin, "run", "--net", "proxy", "--", "true"]),
}}
if old:
    res["rss"]["previous: stockade run -- true"] = peak_rss([old, "run", "--", "true"])
    res["rss"]["previous: stockade run --net proxy -- true"] = peak_rss([old, "run", "--net", "proxy", "--", "true"])
before = counts()
t = time.perf_counter()
failed = sum(subprocess.run([bin, "run", "--", "true"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0 for _ in range(1000))
res["sequential"] = {"runs": 1000, "failed": failed, "seconds": time.perf_counter() - t, "before": before, "after": counts()}
before = counts()
t = time.perf_counter()
procs = [subprocess.Popen([bin, "run", "--", "sleep", "0.5"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(50)]
failed = sum(p.wait() != 0 for p in procs)
res["concurrent"] = {"runs": 50, "failed": failed, "seconds": time.perf_counter() - t, "before": before, "after": counts()}
json.dump(res, open(out, "w"))
PY

python3 - "$ws/result.json" "$out" "$unpriv_json" "$create_json" "$files" "$cfs" "$net_json" "$ws/netnums.json" "$limits_json" "$san_json" "$san_sizes" "$soak_json" "$pipe_json" "$tree_json" "$turns_json" <<'PY'
import json, os, sys, platform, datetime
res = json.load(open(sys.argv[1]))["results"]
unpriv = json.load(open(sys.argv[3]))["results"] if os.path.exists(sys.argv[3]) else []
med = {r["command"]: r["median"] * 1000 for r in res}
base = next((v for k, v in med.items() if k.startswith("bwrap")), None)
ubase = next((r["median"] * 1000 for r in unpriv if r["command"].startswith("bwrap")), None)
kernel = platform.release()
lines = [
    "# Benchmarks",
    "",
    "Start-up cost of one sandboxed `true` (fork, namespaces, mounts, Landlock, seccomp, exec, teardown),",
    "measured side by side in one run by `bash benches/startup.sh` (hyperfine, no shell, warm-up 20).",
    "The first rows run as root (the caller CI has); the last two as the unprivileged user",
    "`stockade-test`, each ratio against bwrap run by the same caller.",
    f"Machine: 2 cores, kernel {kernel}, {datetime.date.today()}. Workspace: an empty directory.",
    "",
    "| command | median (ms) | mean (ms) | σ (ms) | runs | ratio to bwrap | ÷ previous binary |",
    "|---|---:|---:|---:|---:|---:|---:|",
]
# "previous: NAME" rows (OLD=) are the previous binary's NAME, measured in the same series.
def vs_prev(rows, r):
    prev = next((x for x in rows if x["command"] == "previous: " + r["command"]), None)
    return f"{r['median'] / prev['median']:.2f}×" if prev else ""
for rows, b in ((res, base), (unpriv, ubase)):
    for r in rows:
        m = r["median"] * 1000
        ratio = f"{m / b:.2f}×" if b else "n/a"
        lines.append(f"| {r['command']} | {m:.2f} | {r['mean']*1000:.2f} | {r['stddev']*1000:.2f} | {len(r['times'])} | {ratio} | {vs_prev(rows, r)} |")
lines += [
    "",
    "Notes:",
    "- `stockade run` here is the default `workspace-write` policy: new user/mount/pid/net/ipc/uts/cgroup",
    "  namespaces, read-only host, private /tmp, /dev and /proc, credential masks, Landlock ABI 7 with",
    "  scopes, the seccomp filter, all capabilities dropped, a scrubbed environment, and the post-run sweep.",
    "- `bwrap --unshare-all` with these flags does far less: no Landlock, no seccomp, no masks, no",
    "  env scrubbing. \"bwrap, stockade's policy as far as bwrap expresses it\" adds what bwrap can",
    "  do of the default policy, built from `stockade policy show`: the command's uid and gid, no",
    "  capabilities, a new session, the hostname, private /tmp and /dev/shm, the writable",
    "  workspace, the credential masks, the scrubbed environment. It still has no Landlock, seccomp,",
    "  mediated creation, idmapped mounts or resource limits. bwrap has no resource limits at all;",
    "  the last stockade row turns them off to compare like with like.",
    "- As root, stockade also creates an idmapping user namespace and idmapped mounts, so the",
    "  command runs as an unprivileged uid (bwrap, run by root, keeps uid 0 inside).",
    "- stockade is linked statically (static-pie on glibc, `.cargo/config.toml`). The row \"linked",
    "  dynamically\" (when present) is the same sources built with `-C target-feature=-crt-static`:",
    "  the difference is what loading and relocating libc, libm and libgcc_s costs every run.",
    "- srt and runsc ran as root here; srt's time is mostly Node start-up and its socat bridges.",
    "- stockade lists the writable roots' directories before each run (`.env` files, protected",
    "  paths) and after it lists again only those whose ctime moved: a workspace with content costs",
    "  more than this empty one (see \"A workspace with content\" below).",
]
if os.path.exists(sys.argv[4]):
    create = json.load(open(sys.argv[4]))["results"]
    files = int(sys.argv[5])
    cbase = next((r["median"] * 1000 for r in create if r["command"].startswith("bwrap")), None)
    lines += [
        "",
        f"## Mediated creation: {files} files",
        "",
        f"`sh` creating {files} empty files in the workspace (one `open(O_CREAT)` each, on {sys.argv[6]}): every such call",
        "goes through the sandbox's init (see docs/design.md, mediated creation). bwrap does not",
        "mediate, so the difference per file is stockade's cost per created file (start-up included",
        "in both rows).",
        "",
        "| command | median (ms) | σ (ms) | runs | ratio to bwrap | extra per file vs bwrap (µs) | ÷ previous binary |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in create:
        m = r["median"] * 1000
        extra = f"{(m - cbase) * 1000 / files:.0f}" if cbase else "n/a"
        ratio = f"{m / cbase:.2f}×" if cbase else "n/a"
        lines.append(f"| {r['command']} | {m:.1f} | {r['stddev']*1000:.1f} | {len(r['times'])} | {ratio} | {extra} | {vs_prev(create, r)} |")
if os.path.exists(sys.argv[7]) and os.path.exists(sys.argv[8]):
    import statistics
    res_net = json.load(open(sys.argv[7]))["results"]
    nums = json.load(open(sys.argv[8]))
    lines += [
        "",
        "## Egress proxy",
        "",
        "| measure | value |",
        "|---|---:|",
    ]
    for r in res_net:
        lines.append(f"| {r['command']} -- true, median | {r['median']*1000:.2f} ms |")
    med = lambda k: statistics.median([x for x in nums.get(k, []) if x > 0] or [0])
    p, kp, fp, fkp = nums["port"], nums["kport"], nums["fport"], nums["fkport"]
    for label, k in (
        ("one-write server, HTTP/1.1 keep-alive", fkp),
        ("one-write server, HTTP/1.0 (a new connection per request)", fp),
        ("python http.server, HTTP/1.1 keep-alive", kp),
        ("python http.server, HTTP/1.0 (a new connection per request)", p),
    ):
        d, q = med(f"lat_d{k}"), med(f"lat_p{k}")
        lines.append(f"| {label}: request p50, direct | {d:.0f} µs |")
        lines.append(f"| the same through the proxy (curl inside the sandbox) | {q:.0f} µs (+{q-d:.0f} µs) |")
        if nums.get(f"lat_o{k}"):
            o = med(f"lat_o{k}")
            lines.append(f"| the same through the previous binary's proxy | {o:.0f} µs (+{o-d:.0f} µs; added latency {(q-d)/(o-d) if o != d else float('nan'):.2f}× the previous binary's) |")
        if k == fkp and med("lat_s"):
            lines.append(f"| the same through a bare socat relay (no parsing, no rules) | {med('lat_s'):.0f} µs (+{med('lat_s')-d:.0f} µs) |")
    for label, dk, pk, ok in (("1 GiB over TLS (what a CONNECT tunnel carries)", "tp_td", "tp_tp", "tp_otp"), ("1 GiB in the clear (curl -p, an allow_hosts tunnel)", "tp_d", "tp_p", "tp_op")):
        d, q = med(dk), med(pk)
        ratio = f"{q/d*100:.0f}%" if d else "n/a"
        lines.append(f"| {label}, direct (median of 3) | {d/1e6:.0f} MB/s |")
        lines.append(f"| the same through a CONNECT tunnel | {q/1e6:.0f} MB/s ({ratio} of direct) |")
        if nums.get(ok):
            o = med(ok)
            lines.append(f"| the same through the previous binary's tunnel | {o/1e6:.0f} MB/s ({o/d*100:.0f}% of direct; new ÷ previous {q/o:.2f}×) |")
    lines += [
        "",
        "Servers on the host's loopback: `benches/http_server.py` (every response in one write, as",
        "production servers send a small one), python's http.server (head and body in two writes,",
        "~300 µs of its own per request) and `openssl s_server -WWW`; curl inside the sandbox reaches",
        "them through the run's proxy (`--allow-host`), curl on the host directly. Latency is the p50",
        "of 1000 requests from one curl, the median of five rounds; the timings are written to a",
        "file and read at the end (a line per request through the run's output relay would add the",
        "relay's cost). The proxy keeps idle upstream HTTP/1.1 connections for the next admitted",
        "request to the same host. Tunnels relay with splice(2) through a 1 MiB pipe. On",
        "this 2-core machine client, server and relay share the cores, so the ratios move by",
        "±15% from one run of this script to the next.",
    ]
if os.path.exists(sys.argv[9]):
    lim = json.load(open(sys.argv[9]))["results"]
    if len(lim) in (2, 4):
        on, off = lim[0]["median"] * 1000, lim[1]["median"] * 1000
        mech = "cgroup v1 (memory, pids)" if os.geteuid() == 0 else "rlimits"
        lines += [
            "",
            "## Resource limits",
            "",
            f"The default run bounds memory and pids ({mech} as this caller) and relays output through",
            "the 16 MiB output limit; the second row turns those off. The two take turns, run by run",
            "(python's subprocess reading pipes, so both rows include its ~1 ms of spawning).",
            "",
            "| command | median (ms) | σ (ms) | runs |",
            "|---|---:|---:|---:|",
        ]
        for r in lim:
            lines.append(f"| {r['command']} | {r['median']*1000:.2f} | {r['stddev']*1000:.2f} | {len(r['times'])} |")
        lines.append(f"| cost of the limits | {on - off:+.2f} | | |")
        if len(lim) == 4:
            pon, poff = lim[2]["median"] * 1000, lim[3]["median"] * 1000
            lines.append(f"| cost of the limits, previous binary | {pon - poff:+.2f} | | |")
            lines.append(f"| default run, new ÷ previous | {on / pon:.2f}× | | |")
if os.path.exists(sys.argv[10]):
    san = {r["command"]: r["median"] for r in json.load(open(sys.argv[10]))["results"]}
    sizes = dict(zip(("ASCII-heavy", "mixed Unicode"), map(int, sys.argv[11].split())))
    lines += [
        "",
        "## Sanitizer",
        "",
        "`stockade sanitize` (stdin to stdout, the whole process) against a regex chain of the same",
        "rules in python's `re` (one substitution per rule), on generated build-log text with about",
        "2% of lines carrying an escape sequence or an invisible, Bidi or Tag character.",
        "",
        "| input | stockade sanitize | regex chain | ratio | previous binary | new ÷ previous (throughput) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for kind, size in sizes.items():
        ours, theirs = san.get(f"stockade sanitize, {kind}"), san.get(f"regex chain (python re), {kind}")
        prev = san.get(f"previous: stockade sanitize, {kind}")
        if ours and theirs:
            p_cols = f"{size / prev / 1e6:.0f} MB/s | {prev / ours:.2f}×" if prev else " | "
            lines.append(f"| {kind}, {size >> 20} MiB | {size / ours / 1e6:.0f} MB/s | {size / theirs / 1e6:.0f} MB/s | {theirs / ours:.0f}× | {p_cols} |")
if len(sys.argv) > 13 and os.path.exists(sys.argv[13]):
    pipe = {r["command"]: r for r in json.load(open(sys.argv[13]))["results"]}
    b, o = pipe.get("bwrap --unshare-all, stdout a pipe"), pipe.get("stockade run, stdout a pipe")
    if b and o:
        lines += [
            "",
            "## Output to a pipe",
            "",
            "The rows above send output to `/dev/null`, which stockade passes on without its output",
            "relay. An agent's harness reads a pipe, which goes through the relay (the output limit):",
            "",
            "| command | median (ms) | σ (ms) | ratio to bwrap |",
            "|---|---:|---:|---:|",
            f"| bwrap --unshare-all | {b['median']*1000:.2f} | {b['stddev']*1000:.2f} | 1.00× |",
            f"| stockade run (default policy) | {o['median']*1000:.2f} | {o['stddev']*1000:.2f} | {o['median']/b['median']:.2f}× |",
        ]
        po = pipe.get("previous: stockade run, stdout a pipe")
        if po:
            lines.append(f"| previous binary | {po['median']*1000:.2f} | {po['stddev']*1000:.2f} | {po['median']/b['median']:.2f}× |")
if len(sys.argv) > 15 and os.path.exists(sys.argv[15]):
    turns = json.load(open(sys.argv[15]))["results"]
    if len(turns) >= 4:
        eq = turns[1]["median"]
        lines += [
            "",
            "## The same, taking turns",
            "",
            "The series above run one command after another; on this 2-core machine each run leaves",
            "kernel work behind (network namespaces are torn down asynchronously) that slows the",
            "series after it. Here the four take turns, run by run (python's spawning, ~1 ms, is in",
            "every row alike), and each row is compared with bwrap given stockade's policy:",
            "",
            "| command | median (ms) | σ (ms) | against bwrap with stockade's policy |",
            "|---|---:|---:|---:|",
        ]
        for r in turns:
            d = (r["median"] - eq) * 1000
            lines.append(f"| {r['command']} | {r['median']*1000:.2f} | {r['stddev']*1000:.2f} | {d:+.2f} ms ({r['median'] / eq:.2f}×) |")
if len(sys.argv) > 14 and os.path.exists(sys.argv[14]):
    tr = json.load(open(sys.argv[14]))["results"]
    if len(tr) >= 2:
        b, o = tr[0], tr[1]
        lines += [
            "",
            "## A workspace with content",
            "",
            "Stockade lists every directory of the writable roots before the run (to mask `.env`",
            "files and protect hooks and editor configs wherever they are) and, after it, checks",
            "which directories changed (ctime) and lists only those. bwrap does neither. The tree:",
            "1,000 directories of 20 empty files, settled (made more than 3 s before).",
            "",
            "| command | median (ms) | σ (ms) | ratio to bwrap |",
            "|---|---:|---:|---:|",
            f"| {b['command']} | {b['median']*1000:.2f} | {b['stddev']*1000:.2f} | 1.00× |",
            f"| {o['command']} | {o['median']*1000:.2f} | {o['stddev']*1000:.2f} | {o['median']/b['median']:.2f}× |",
        ]
        for po in tr[2:]:
            lines.append(f"| {po['command']} | {po['median']*1000:.2f} | {po['stddev']*1000:.2f} | {po['median']/b['median']:.2f}× |")
if len(sys.argv) > 12 and os.path.exists(sys.argv[12]):
    soak = json.load(open(sys.argv[12]))
    lines += [
        "",
        "## Footprint and leaks",
        "",
        "Peak resident memory of the supervisor (the largest `ru_maxrss` among the processes a run",
        "leaves to its caller), as root:",
        "",
        "| command | peak RSS |",
        "|---|---:|",
    ]
    for k, v in soak["rss"].items():
        lines.append(f"| `{k}` | {v / 1024:.1f} MiB |")
    lines += [
        "",
        "1000 sequential `stockade run -- true`, then 50 concurrent `stockade run -- sleep 0.5`, as",
        "root, with what the host holds counted before and after each (file handles and processes",
        "are machine-wide, so they move a little with everything else running):",
        "",
        "| | sequential | concurrent |",
        "|---|---:|---:|",
    ]
    seq, con = soak["sequential"], soak["concurrent"]
    lines.append(f"| runs (failed) | {seq['runs']} ({seq['failed']}) | {con['runs']} ({con['failed']}) |")
    lines.append(f"| wall time | {seq['seconds']:.1f} s ({seq['seconds'] / seq['runs'] * 1000:.1f} ms a run) | {con['seconds']:.2f} s |")
    for key in seq["before"]:
        lines.append(f"| {key}, before → after | {seq['before'][key]} → {seq['after'][key]} | {con['before'][key]} → {con['after'][key]} |")
if sys.argv[2] != "-":
    open(sys.argv[2], "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
