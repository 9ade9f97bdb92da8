#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""softrnic's layering rule, checked (docs/architecture.md, "Layers").

usage: check_layers.py SRC_DIR [BUILD_DIR]

Layers, lowest first; a file may use (#include, or call a function defined
in) its own folder and the layers below it, never a layer above:

    proto  <  util  <  core  <  engine  <  transport/<name>  <  verbs, rpc
                                                               <  rdmacm

(rpc, softrnic's ONC-RPC layer, sits beside verbs: the two are siblings.
rdmacm, softrnic's librdmacm, sits above verbs and uses only its public
API: besides proto and util, it may call only the verbs ABI's functions
(ibv_*) of the layers below, and include nothing of them.)

Transports are siblings: transport/a never uses transport/b, and no file
outside transport/<name>/ names that transport (its symbols, its headers,
or the word itself). Checked:

  1. the #include graph of SRC_DIR: every edge points down or sideways
     within a folder, and there is no cycle between files or folders;
  2. with BUILD_DIR, the call graph read from the objects with nm (which
     file calls a function which file defines): the same rules;
  3. the transport names.

Exits 1 and prints each violation; prints a one-line summary otherwise.
"""
import os
import re
import subprocess
import sys

ORDER = ["proto", "util", "core", "engine", "transport", "verbs", "rdmacm"]
# Folders at the rank of a folder of ORDER (siblings of it).
BESIDE = {"rpc": "verbs"}
# Words that are also plain English in this code base (shared memory is
# what the core's objects live in, whatever the transport).
GENERIC_WORDS = {"shm"}
# Folders where a transport's name is also a network protocol's (ONC-RPC's
# netids "tcp" and "udp"): the bare word is allowed there, the transport's
# symbols and headers are not.
PROTOCOL_WORD_FOLDERS = {"rpc/", "rdmacm/"}
# Layers that may use, of the layers below them, only these folders and
# otherwise only the public verbs ABI (functions named with these prefixes).
PUBLIC_API_ONLY = {"rdmacm": ({"proto", "util"}, ("ibv_", "_ibv_"))}


def layer_of(rel):
    """(rank, folder) of a path relative to SRC_DIR."""
    parts = rel.split("/")
    top = parts[0]
    if top in BESIDE:
        return ORDER.index(BESIDE[top]), top
    if top not in ORDER:
        return None, None
    folder = "/".join(parts[:2]) if top == "transport" and len(parts) > 2 \
        else top
    return ORDER.index(top), folder


def allowed(src, dst, sym=None):
    """May a file of src (a path) use one of dst (by including it, or by
    calling its function sym)? None or the reason why not."""
    rs, fs = layer_of(src)
    rd, fd = layer_of(dst)
    if rs is None or rd is None:
        return None
    if fs == fd:
        return None
    top = fs.split("/")[0]
    if top in PUBLIC_API_ONLY and fd.split("/")[0] not in \
            PUBLIC_API_ONLY[top][0]:
        if sym is None or not sym.startswith(PUBLIC_API_ONLY[top][1]):
            return f"{fs} uses only the public verbs API of {fd}"
    if rd > rs:
        return f"{fs} is below {fd}"
    if rd == rs:
        return f"{fs} and {fd} are siblings"
    return None


def find_cycles(graph):
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(100000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def folder_graph(graph):
    g = {}
    for a, bs in graph.items():
        fa = layer_of(a)[1] or os.path.dirname(a)
        for b in bs:
            fb = layer_of(b)[1] or os.path.dirname(b)
            if fa != fb:
                g.setdefault(fa, set()).add(fb)
    return g


def sources(src):
    for root, _, files in os.walk(src):
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                p = os.path.join(root, f)
                yield os.path.relpath(p, src), p


def include_graph(src):
    g, errors = {}, []
    inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    for rel, path in sources(src):
        text = open(path, encoding="utf-8").read()
        for target in inc.findall(text):
            if not os.path.exists(os.path.join(src, target)):
                errors.append(f"{rel}: includes \"{target}\": not a path "
                              "from src/ (write the folder)")
                continue
            g.setdefault(rel, set()).add(target)
            why = allowed(rel, target)
            if why:
                errors.append(f"{rel}: includes {target} ({why})")
    return g, errors


def call_graph(src, build):
    """file -> files whose functions it calls, from the objects' symbols."""
    objs = {}
    for root, _, files in os.walk(build):
        if "/tests/" in root + "/" or "/bench/" in root + "/":
            continue
        for f in files:
            if not f.endswith(".c.o"):
                continue
            path = os.path.join(root, f)
            m = re.search(r"\.dir/(.*)\.o$", os.path.relpath(path, build))
            if m and os.path.exists(os.path.join(src, m.group(1))):
                objs[m.group(1)] = path
    defs, uses = {}, {}
    for name, path in objs.items():
        out = subprocess.run(["nm", "--defined-only", "-g", path],
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            p = line.split()
            if len(p) == 3:
                defs.setdefault(p[2], set()).add(name)
        out = subprocess.run(["nm", "-u", path], capture_output=True,
                             text=True).stdout
        uses[name] = {l.split()[-1] for l in out.splitlines() if l.strip()}
    g, errors = {}, []
    for name, syms in uses.items():
        for s in sorted(syms):
            for d in sorted(defs.get(s, ())):
                if d == name:
                    continue
                g.setdefault(name, set()).add(d)
                why = allowed(name, d, s)
                if why:
                    errors.append(f"{name}: calls {s} in {d} ({why})")
    return g, errors, len(objs)


def transport_names(src):
    tdir = os.path.join(src, "transport")
    names = sorted(d for d in os.listdir(tdir)
                   if os.path.isdir(os.path.join(tdir, d)))
    errors = []
    for name in names:
        pats = [rf"\bsrn_{name}_(?!proto\b)\w+", rf"\b{name}_transport\b",
                rf"transport/{name}/"]
        word = None
        if name not in GENERIC_WORDS:
            word = re.compile(rf"(?i)\b{name}\b")
        for rel, path in sources(src):
            if rel.startswith(f"transport/{name}/"):
                continue
            rx = [re.compile(p) for p in pats]
            if word and not rel.startswith(tuple(PROTOCOL_WORD_FOLDERS)):
                rx.append(word)
            for no, line in enumerate(open(path, encoding="utf-8"), 1):
                for r in rx:
                    m = r.search(line)
                    if m:
                        errors.append(f"{rel}:{no}: names transport "
                                      f"{name} ('{m.group(0)}')")
                        break
    return names, errors


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    src = sys.argv[1]
    build = sys.argv[2] if len(sys.argv) > 2 else None
    errors = []
    inc, e = include_graph(src)
    errors += e
    for c in find_cycles(inc):
        errors.append("include cycle between files: " + ", ".join(c))
    for c in find_cycles(folder_graph(inc)):
        errors.append("include cycle between folders: " + ", ".join(c))
    nobj = 0
    if build:
        calls, e, nobj = call_graph(src, build)
        errors += e
        for c in find_cycles(calls):
            errors.append("call cycle between files: " + ", ".join(c))
        for c in find_cycles(folder_graph(calls)):
            errors.append("call cycle between folders: " + ", ".join(c))
        if nobj == 0:
            errors.append(f"{build}: no object of {src} found")
    names, e = transport_names(src)
    errors += e
    for line in errors:
        print(line)
    if errors:
        print(f"check_layers: {len(errors)} violation(s)")
        return 1
    print(f"check_layers: {sum(1 for _ in sources(src))} files, {nobj} "
          f"objects, transports {', '.join(names)}: layers hold, no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
