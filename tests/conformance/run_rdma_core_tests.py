#!/usr/bin/python3
"""rdma-core 44's own Python test suite, unmodified, against softrnic0.

Debian's python3-pyverbs ships the suite under /usr/share/doc/rdma-core/tests
(most files gzipped). This runner copies it to a temporary directory,
unpacks it, and runs it with softrnic's libibverbs.so.1 first on the
library path. It changes one thing, outside the suite's files: the base
class looks the device's IP address up in sysfs
(/sys/class/infiniband/<dev>/device/net/), which a user-space device does
not have, so the runner gives it the address of the device's GID and the
MAC of the interface that holds it.

As root, when the machine has no 2 MiB huge pages, it reserves 64 for the
run (the suite's huge-page tests need them) and gives them back after.

It prints every test's outcome, the skip reasons counted, and a summary
line, and fails (exit 1) on any FAIL or ERROR, or when fewer than
--min-pass tests pass (so a feature that stops working cannot turn into a
silent skip). Exit 77: python3-pyverbs or the suite is not installed.

  run_rdma_core_tests.py [--min-pass N] [--exclude MOD ...] [MODULE ...]
"""
import argparse
import collections
import gzip
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SYS_PYTHON = "/usr/bin/python3"
SUITE = "/usr/share/doc/rdma-core/tests"
HERE = os.path.dirname(os.path.abspath(__file__))
LIB_DIR = os.path.realpath(os.environ.get("SOFTRNIC_LIB_DIR") or
                           os.path.join(HERE, "..", "..", "build", "lib"))
DEV = "softrnic0"


def ensure_library_path():
    """Re-exec under /usr/bin/python3 with LIB_DIR first on the path:
    extension modules bind libibverbs.so.1 when they are loaded."""
    first = os.environ.get("LD_LIBRARY_PATH", "").split(":")[0]
    python = SYS_PYTHON if os.path.exists(SYS_PYTHON) else sys.executable
    if os.path.realpath(first or "/nonexistent") == LIB_DIR and \
            os.path.realpath(sys.executable) == os.path.realpath(python):
        return
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = LIB_DIR + (":" + env["LD_LIBRARY_PATH"]
                                        if env.get("LD_LIBRARY_PATH") else "")
    os.execve(python, [python, os.path.abspath(__file__)] + sys.argv[1:], env)


def unpack_suite(dst):
    """Copies the suite into dst/tests, gunzipping the .py.gz files."""
    out = os.path.join(dst, "tests")
    os.makedirs(out)
    for name in os.listdir(SUITE):
        src = os.path.join(SUITE, name)
        if name.endswith(".py.gz"):
            with gzip.open(src, "rb") as f, \
                    open(os.path.join(out, name[:-3]), "wb") as g:
                shutil.copyfileobj(f, g)
        elif name.endswith(".py"):
            shutil.copy(src, out)
    return out


def iface_of(ip):
    """The interface holding ip and its MAC, from `ip -j addr`."""
    addrs = json.loads(subprocess.check_output(["ip", "-j", "addr", "show"]))
    for link in addrs:
        for a in link.get("addr_info", []):
            if a.get("local") == ip:
                return link["ifname"], link.get("address", "00:00:00:00:00:00")
    return None, None


def gid_ip(ctx, port, idx):
    """The IPv4 or IPv6 address a RoCE v2 GID stands for, or None."""
    raw = bytes.fromhex(ctx.query_gid(port, idx).gid.replace(":", ""))
    addr = ipaddress.IPv6Address(raw)
    if addr.ipv4_mapped:
        return str(addr.ipv4_mapped)
    return None if addr.is_unspecified else str(addr)


def patch_base(base, d):
    """The device's address comes from its GID, not from sysfs."""
    def get_ip_mac(self, dev, port, idx):
        ip = gid_ip(d.Context(name=dev), port, idx or 0)
        mac = iface_of(ip)[1] if ip else None
        self.args.append([dev, port, idx, ip, mac])
    base.RDMATestCase._get_ip_mac = get_ip_mac


HUGEPAGES = "/proc/sys/vm/nr_hugepages"


def reserve_hugepages():
    """64 huge pages for the run, if we may and there are none: returns
    the count to restore, or None."""
    try:
        with open(HUGEPAGES) as f:
            old = int(f.read())
        if old or os.geteuid() != 0:
            return None
        with open(HUGEPAGES, "w") as f:
            f.write("64")
        print("reserved 64 huge pages for the run")
        return old
    except (OSError, ValueError):
        return None


def restore_hugepages(old):
    if old is not None:
        with open(HUGEPAGES, "w") as f:
            f.write(str(old))


def mark_known_bugs(suite, known):
    """Each test named in known is skipped with its reason."""
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            mark_known_bugs(t, known)
            continue
        why = known.get(t.id().split(".")[-1])
        if why:
            setattr(t, t._testMethodName,
                    unittest.skip("softrnic known bug: " + why)(
                        getattr(t, t._testMethodName)))


def skip_reasons(result):
    return collections.Counter(reason for _, reason in result.skipped)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-pass", type=int, default=0)
    ap.add_argument("--exclude", nargs="*", default=[])
    ap.add_argument("--known-bug", action="append", default=[],
                    metavar="TEST=WHY",
                    help="skip one test method, printing why (a bug of "
                    "softrnic's that is written down, not hidden)")
    ap.add_argument("modules", nargs="*")
    opts = ap.parse_args()
    try:
        import pyverbs.device as d
    except ImportError:
        print("SKIP: python3-pyverbs is not installed")
        return 77
    if not os.path.isdir(SUITE):
        print("SKIP: %s is missing" % SUITE)
        return 77
    tmp = tempfile.mkdtemp(prefix="srn-rdma-core-tests-")
    huge = reserve_hugepages()
    try:
        return run(opts, tmp, d)
    finally:
        restore_hugepages(huge)
        shutil.rmtree(tmp, ignore_errors=True)


def run(opts, tmp, d):
    suite_dir = unpack_suite(tmp)
    sys.path[:0] = [tmp, suite_dir]  # the suite imports both ways
    os.chdir(tmp)
    import args_parser  # the suite's own argument parser
    sys.argv = [sys.argv[0], "--dev", DEV]
    args_parser.parser.parse_args()
    import tests
    import tests.base as base
    patch_base(base, d)
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    known = dict(k.split("=", 1) for k in opts.known_bug)
    for mod in tests.__test_modules__:
        name = mod.__name__.split(".")[-1]
        if name in opts.exclude or (opts.modules and
                                    name not in opts.modules):
            continue
        suite.addTests(loader.loadTestsFromModule(mod))
    mark_known_bugs(suite, known)
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
    for reason, n in skip_reasons(result).most_common():
        print("skip %4d  %s" % (n, reason))
    passed = result.testsRun - len(result.skipped) - len(result.failures) - \
        len(result.errors) - len(result.expectedFailures)
    print("rdma-core tests on %s (%s): ran %d, passed %d, skipped %d, "
          "failed %d, errors %d (minimum to pass: %d)" %
          (DEV, os.environ.get("SOFTRNIC_TRANSPORT", "auto"), result.testsRun,
           passed, len(result.skipped), len(result.failures),
           len(result.errors), opts.min_pass))
    if result.failures or result.errors or passed < opts.min_pass:
        return 1
    return 0


if __name__ == "__main__":
    ensure_library_path()
    sys.exit(main())
