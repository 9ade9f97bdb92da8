#!/usr/bin/python3
"""A chaos run (docs/security.md): for --seconds, pairs of chaos_worker
programs move data over softrnic while this script kills (-9), stops
(SIGSTOP for 0.3-3 s) and cuts them off (the bridge between the two
namespaces goes down for 0.5-4 s). Half the pairs run on one host (the
shared-memory transport), half between the namespaces (TCP); each pair
uses 1 to 128 QPs. New pairs replace the ones that end.

Afterwards every pair's record (tests/faults/chaos_worker.c) is checked:
  - every WR completed at most once, and exactly once when the client was
    not killed; nothing completed that was not posted; no post refused;
  - no client saw 30 s without a completion (a hang), and every process
    ended within 60 s of the chaos stopping;
  - every WRITE that completed with success has its bytes in the
    server's memory (when the server lived to dump it), every successful
    SEND was received, and no SEND was received twice;
  - no control socket is left in either namespace.
Exit 0 when all hold, 1 otherwise, 77 without root/namespaces.
"""
import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

SLOT = 256
NS_A, NS_B = "srnchaos%da" % os.getpid(), "srnchaos%db" % os.getpid()
NS_S = "srnchaos%ds" % os.getpid()
ADDR = {NS_A: "198.51.100.1", NS_B: "198.51.100.2"}


def sh(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def hosts_up():
    sh("ip", "netns", "add", NS_S)
    sh("ip", "-n", NS_S, "link", "add", "br0", "type", "bridge")
    sh("ip", "-n", NS_S, "link", "set", "br0", "up")
    for n, ns in enumerate((NS_A, NS_B), 1):
        sh("ip", "netns", "add", ns)
        v, w = "vc%d%d" % (os.getpid() % 10000, n), "wc%d%d" % (
            os.getpid() % 10000, n)
        sh("ip", "link", "add", v, "type", "veth", "peer", "name", w)
        sh("ip", "link", "set", v, "netns", ns)
        sh("ip", "link", "set", w, "netns", NS_S)
        sh("ip", "-n", NS_S, "link", "set", w, "master", "br0", "up")
        sh("ip", "-n", ns, "addr", "add", ADDR[ns] + "/24", "dev", v)
        sh("ip", "-n", ns, "link", "set", v, "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")


def hosts_down():
    for ns in (NS_A, NS_B, NS_S):
        pids = sh("ip", "netns", "pids", ns, check=False).stdout.split()
        for p in pids:
            try:
                os.kill(int(p), signal.SIGKILL)
            except OSError:
                pass
        sh("ip", "netns", "del", ns, check=False)


def bridge(up):
    sh("ip", "-n", NS_S, "link", "set", "br0", "up" if up else "down")


class Pair:
    def __init__(self, n, tcp, worker, lib, d):
        self.n, self.tcp = n, tcp
        self.nqp = random.choice((1, 2, 4, 32, 128))
        self.nwr = random.randint(2000, 6000)
        self.port = 20000 + n
        p = os.path.join(d, "p%d" % n)
        self.dump, self.slog, self.clog = p + ".dump", p + ".s", p + ".c"
        cns = NS_B if tcp else NS_A

        def run(ns, args):
            env = dict(os.environ, LD_LIBRARY_PATH=lib, SOFTRNIC_IP=ADDR[ns])
            return subprocess.Popen(["ip", "netns", "exec", ns, worker] +
                                    args, env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
        self.srv = run(NS_A, ["server", str(self.port), self.dump,
                              self.slog])
        time.sleep(0.05)
        self.cli = run(cns, ["client", ADDR[NS_A], str(self.port),
                             str(self.nqp), str(self.nwr), "2000",
                             self.clog])
        self.killed = set()  # "srv", "cli"
        self.ended_at = None

    def procs(self):
        return (("srv", self.srv), ("cli", self.cli))

    def alive(self):
        return any(p.poll() is None for _, p in self.procs())


def pattern(i):
    return bytes((i * 131 + j * 7 + 1) & 0xFF for j in range(SLOT))


def read_log(path):
    try:
        with open(path) as f:
            return [l.split() for l in f if l.strip()]
    except FileNotFoundError:
        return []


def check_client(p, v, st):
    posted, comp = set(), {}
    for f in read_log(p.clog):
        if f[0] == "P":
            posted.add(int(f[1]))
        elif f[0] == "C":
            comp.setdefault(int(f[1]), []).append(int(f[2]))
        elif f[0] == "E":
            v.append("pair %d: post of WR %s refused" % (p.n, f[1]))
        elif f[0] == "HANG":
            v.append("pair %d: no completion for 30 s (%s posted, %s done)"
                     % (p.n, f[1], f[2]))
    for i, s in comp.items():
        if len(s) > 1:
            v.append("pair %d: WR %d completed %d times" % (p.n, i, len(s)))
        if i not in posted:
            v.append("pair %d: WR %d completed, never posted" % (p.n, i))
    if "cli" not in p.killed and p.cli.returncode == 0:
        lost = posted - set(comp)
        if lost:
            v.append("pair %d: %d WRs never completed (e.g. %d)" %
                     (p.n, len(lost), min(lost)))
    st["posted"] += len(posted)
    st["ok"] += sum(1 for s in comp.values() if s[0] == 0)
    st["err"] += sum(1 for s in comp.values() if s[0] != 0)
    return comp


def check_server(p, comp, v, st):
    recv = {}
    for f in read_log(p.slog):
        if f[0] == "R" and f[2] == "0":
            recv[int(f[1])] = recv.get(int(f[1]), 0) + 1
    for i, n in recv.items():
        if n > 1:
            v.append("pair %d: SEND %d received %d times" % (p.n, i, n))
        if i % 8 != 7:
            v.append("pair %d: received SEND %d, not a SEND" % (p.n, i))
    if not os.path.exists(p.dump):
        return
    with open(p.dump, "rb") as f:
        mem = f.read()
    for i, s in comp.items():
        if s[0] != 0:
            continue
        if i % 8 == 7:
            if i not in recv:
                v.append("pair %d: SEND %d succeeded, never received" %
                         (p.n, i))
            continue
        st["bytes"] += 1
        if mem[i * SLOT:(i + 1) * SLOT] != pattern(i):
            v.append("pair %d: WRITE %d succeeded, its bytes are not there"
                     % (p.n, i))


def chaos(pairs, st, stopped, now):
    live = [(p, who, proc) for p in pairs for who, proc in p.procs()
            if proc.poll() is None]
    r = random.random()
    if live and r < 0.25:
        p, who, proc = random.choice(live)
        proc.kill()
        p.killed.add(who)
        st["kills"] += 1
    elif live and r < 0.45:
        p, who, proc = random.choice(live)
        proc.send_signal(signal.SIGSTOP)
        stopped.append((now + random.uniform(0.3, 3), proc))
        st["stops"] += 1
    elif r < 0.55 and not st.get("cut_until"):
        bridge(False)
        st["cut_until"] = now + random.uniform(0.5, 4)
        st["flaps"] += 1


def wake(stopped, st, now, all_=False):
    for t, proc in list(stopped):
        if all_ or t <= now:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
            stopped.remove((t, proc))
    if st.get("cut_until") and (all_ or st["cut_until"] <= now):
        bridge(True)
        st["cut_until"] = None


def run(opts, lib, d):
    st = dict(posted=0, ok=0, err=0, bytes=0, kills=0, stops=0, flaps=0,
              pairs=0)
    pairs, stopped, n = [], [], 0
    t_end = time.monotonic() + opts.seconds
    while time.monotonic() < t_end:
        now = time.monotonic()
        while sum(1 for p in pairs if p.alive()) < opts.pairs:
            pairs.append(Pair(n, n % 2 == 1, opts.worker, lib, d))
            n += 1
        wake(stopped, st, now)
        chaos(pairs, st, stopped, now)
        time.sleep(random.uniform(0.3, 1.0))
    wake(stopped, st, 0, all_=True)
    return pairs, st


def finish(pairs, v):
    deadline = time.monotonic() + 60
    for p in pairs:
        for who, proc in p.procs():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log = read_log(p.slog if who == "srv" else p.clog)
                v.append("pair %d (%s, %d QPs): %s still running 60 s after "
                         "the chaos; its log ends with %s" %
                         (p.n, "tcp" if p.tcp else "shm", p.nqp, who,
                          " ".join(log[-1]) if log else "nothing"))
                proc.kill()
                proc.wait()
    for ns in (NS_A, NS_B):
        left = sh("ip", "netns", "exec", ns, "ss", "-x", "-a",
                  check=False).stdout
        if "softrnic" in left:
            v.append("control sockets left in %s" % ns)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--worker", required=True)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    opts = ap.parse_args()
    lib = os.environ.get("SOFTRNIC_LIB_DIR") or os.path.join(
        os.path.dirname(opts.worker), "..", "lib")
    if os.geteuid() != 0:
        print("skip: needs root for network namespaces")
        return 77
    random.seed(opts.seed)
    print("chaos: seed %d, %g s, %d pairs at a time" %
          (opts.seed, opts.seconds, opts.pairs))
    try:
        hosts_up()
    except subprocess.CalledProcessError as e:
        hosts_down()
        print("skip: cannot create namespaces: %s" % e.stderr.strip())
        return 77
    try:
        with tempfile.TemporaryDirectory(prefix="srn-chaos-") as d:
            return verify(opts, lib, d)
    finally:
        hosts_down()


def verify(opts, lib, d):
    v = []
    pairs, st = run(opts, lib, d)
    finish(pairs, v)
    st["pairs"] = len(pairs)
    clean = 0
    for p in pairs:
        comp = check_client(p, v, st)
        check_server(p, comp, v, st)
        clean += not p.killed and p.cli.returncode == 0
    print("chaos: %(pairs)d pairs, %(kills)d kills, %(stops)d stops, "
          "%(flaps)d link cuts; %(posted)d WRs posted, %(ok)d completed "
          "with success, %(err)d with an error; %(bytes)d WRITEs' bytes "
          "checked" % st)
    print("chaos: %d pairs ran to the end untouched by a kill" % clean)
    for line in v[:40]:
        print("FAIL " + line)
    if not v and (st["bytes"] == 0 or st["pairs"] < 4):
        v.append("too little happened to check")
        print("FAIL too little happened to check")
    print("chaos: %s" % ("all checks passed" if not v else
                         "%d violations" % len(v)))
    return 1 if v else 0


if __name__ == "__main__":
    sys.exit(main())
