#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""softrnic's house style rules, checked.

usage: check_style.py [--exclude REL_PATH]... ROOT

ROOT is the repository. Files looked at (paths relative to ROOT):
src/**/*.[ch] for every rule; tools/*.c, tests/**/*.[ch] and bench/*.c
for the length and format rules only. --exclude drops one file (a path
relative to ROOT) from every rule, e.g. a file someone else is editing.

Rules:

  1. Function length. A function is a signature starting at column 0 and
     an opening brace alone on its line at column 0 (kernel style, static
     inline functions in headers included); it ends at the first line
     holding only a closing brace at column 0. Its length is counted from
     the line of the opening brace to the line of the closing brace, both
     included, and must be at most 60 lines.

  2. File length: at most 1500 lines.

  3. Atomics (src/ only). Every call of an atomic operation must be
     covered by a comment that names its memory order(s) and, unless all
     of them are relaxed, its partner. Atomic operations are the C11
     atomic_{load,store,exchange,compare_exchange_*,fetch_*}[_explicit]
     functions, atomic_thread_fence and atomic_signal_fence, and the GCC
     __atomic_* and __sync_* builtins (not __atomic_*_lock_free). The
     order of a call is read from its memory_order_* / __ATOMIC_* arguments
     (a compare-exchange has two, success and failure: both must be
     named); C11 calls without _explicit and __sync_* builtins are
     seq_cst. Nested calls are separate calls.

     Which comments cover a call. The statement of a call runs from its
     first line (found by walking up over lines that do not end in ';',
     '{' or '}' and are not a label or a case: continuation lines and
     "if (...)" heads) to the line of the call's closing parenthesis.
     A comment covers the call when
       (a) it is on one of the lines of that statement (a trailing comment
           or one between its continuation lines), or
       (b) it is the comment block (adjacent comment-only lines) that ends
           on the line directly above a run of atomic statements holding
           the call: a run is a sequence of statements each holding an
           atomic call, one right after the other; a blank line, a
           comment, a brace or any other statement ends the run, so one
           comment speaks for a group of consecutive atomic statements
           and no further.
     All the comments covering a call are read together.

     What they must say. Order words are relaxed, consume, acquire,
     release, acq_rel and seq_cst (whole words, any case; memory_order_X
     and __ATOMIC_X count as X). A partner clause runs from "pairs with"
     to the next ';', to a '.' followed by a space, or to the end of the
     comment; order words inside a partner clause name the partner's
     order, not the call's. Then:
       - every order the call uses must be named outside partner clauses
         (a comment saying "release" over an __ATOMIC_ACQUIRE load fails:
         it does not name acquire);
       - if the call uses any order but relaxed, the comments must hold a
         partner clause naming at least one function defined in src/
         ("pairs with the release in srn_unlock") or an operation of an
         ops table declared in src/ (a function-pointer member such as
         tops->rewind): the layering rule (tools/check_layers.py) keeps
         the core and the engine from naming a function of a transport,
         so a partner there is named by the operation that leads to it;
       - if it uses relaxed, the text after the word "relaxed" must give a
         reason: at least one word of three letters or more ("relaxed: a
         hint").
     Nothing is excluded: the lock in util/srn_lock.h is commented like
     every other atomic.

  4. Format: clang-format --dry-run --Werror on every file looked at, with
     the .clang-format found from the file (ROOT's). If clang-format is not
     installed this rule is skipped with a note; the exit status does not
     change because of it.

Exits 1 and prints one line per violation ("path:line: rule: message");
prints a one-line summary and exits 0 otherwise.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

MAX_FUNC_LINES = 60
MAX_FILE_LINES = 1500

ATOMIC_CALL = re.compile(
    r"\b(atomic_(?:load|store|exchange|compare_exchange_(?:strong|weak)"
    r"|fetch_(?:add|sub|or|and|xor))(?:_explicit)?"
    r"|atomic_(?:thread|signal)_fence"
    r"|__atomic_\w+|__sync_\w+)\s*\(")
ORDER_TOKEN = re.compile(
    r"\b(?:memory_order_|__ATOMIC_)(relaxed|consume|acquire|release|acq_rel"
    r"|seq_cst)\b", re.IGNORECASE)
ORDER_WORD = re.compile(
    r"(?:(?<![A-Za-z0-9_])|(?<=memory_order_)|(?<=__ATOMIC_))(relaxed"
    r"|consume|acquire|release|acq_rel|seq_cst)(?![A-Za-z0-9_])",
    re.IGNORECASE)
LABEL = re.compile(r"^\s*(?:case\b.*|default|[A-Za-z_]\w*)\s*:$")
PARTNER_CLAUSE = re.compile(r"pairs with.*?(?=;|\.\s|\.$|$)", re.IGNORECASE)
IDENT = re.compile(r"[A-Za-z_]\w*")
OPS_MEMBER = re.compile(r"\(\s*\*\s*([A-Za-z_]\w*)\s*\)\s*\(")
NOT_OPERATIONS = {"__atomic_always_lock_free", "__atomic_is_lock_free"}


class Source:
    """One C file: its lines, the same with comments and literals blanked
    (positions kept), and its comments as (first line, last line, text);
    lines are numbered from 0 here."""

    def __init__(self, path, rel):
        self.path = path
        self.rel = rel
        with open(path, encoding="utf-8", errors="replace") as f:
            self.text = f.read()
        self.lines = self.text.split("\n")
        if self.lines and self.lines[-1] == "":
            self.lines.pop()
        self.code, self.comments = self._lex(self.text)
        self.code_lines = self.code.split("\n")
        self.line_start = [0]
        for i, ch in enumerate(self.text):
            if ch == "\n":
                self.line_start.append(i + 1)
        # which lines hold (part of) a comment; comment-only lines
        self.comment_on = {}
        for ci, (a, b, _) in enumerate(self.comments):
            for ln in range(a, b + 1):
                self.comment_on.setdefault(ln, []).append(ci)

    @staticmethod
    def _lex(text):
        out = list(text)
        comments = []
        i, n, line = 0, len(text), 0
        while i < n:
            c = text[i]
            if c == "\n":
                line += 1
                i += 1
            elif text.startswith("/*", i):
                j = text.find("*/", i + 2)
                j = n if j < 0 else j + 2
                body = text[i:j]
                comments.append((line, line + body.count("\n"), body))
                for k in range(i, j):
                    if out[k] != "\n":
                        out[k] = " "
                line += body.count("\n")
                i = j
            elif text.startswith("//", i):
                j = text.find("\n", i)
                j = n if j < 0 else j
                comments.append((line, line, text[i:j]))
                for k in range(i, j):
                    out[k] = " "
                i = j
            elif c in "\"'":
                j = i + 1
                while j < n and text[j] != c and text[j] != "\n":
                    j += 2 if text[j] == "\\" else 1
                j = min(j + 1, n)
                for k in range(i + 1, j - 1):
                    if out[k] != "\n":
                        out[k] = " "
                i = j
            else:
                i += 1
        return "".join(out), comments

    def line_of(self, offset):
        lo, hi = 0, len(self.line_start) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.line_start[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def code_line(self, ln):
        return self.code_lines[ln] if ln < len(self.code_lines) else ""


def comment_text(raw):
    """A comment's words, without the markers, on one line."""
    t = raw
    if t.startswith("/*"):
        t = t[2:]
    if t.endswith("*/"):
        t = t[:-2]
    if t.startswith("//"):
        t = t[2:]
    t = re.sub(r"\n\s*\*(?!/)", "\n", t)
    return " ".join(t.split())


# ---------------------------------------------------------------- functions

def functions(src):
    """(name, line of '{', line of '}') of every function of the file."""
    out = []
    lines = src.code_lines
    i = 0
    while i < len(lines):
        if lines[i].rstrip() != "{":
            i += 1
            continue
        # the signature: back to the line that starts it at column 0
        j = i - 1
        while j >= 0 and lines[j].strip() and lines[j][:1] in " \t":
            j -= 1
        sig = " ".join(l.strip() for l in lines[j:i]) if j >= 0 else ""
        start_ok = j >= 0 and lines[j][:1] not in ("#", "}", "") and \
            "(" in sig and "=" not in sig.split("(")[0]
        end = i + 1
        while end < len(lines) and lines[end].rstrip() != "}":
            end += 1
        if start_ok and end < len(lines):
            m = re.search(r"([A-Za-z_]\w*)\s*\(", sig)
            name = m.group(1) if m else "?"
            out.append((name, i, end))
            i = end + 1
        else:
            i += 1
    return out


# ------------------------------------------------------------------ atomics

def match_paren(code, open_at):
    depth = 0
    for k in range(open_at, len(code)):
        if code[k] == "(":
            depth += 1
        elif code[k] == ")":
            depth -= 1
            if depth == 0:
                return k
    return len(code) - 1


def atomic_calls(src):
    """Each atomic call: dict(name, line, stmt, end, orders)."""
    calls = []
    for m in ATOMIC_CALL.finditer(src.code):
        name = m.group(1)
        if name in NOT_OPERATIONS:
            continue
        open_at = m.end() - 1
        close_at = match_paren(src.code, open_at)
        calls.append({"name": name, "start": m.start(), "open": open_at,
                      "close": close_at})
    for c in calls:
        # order tokens of this call, not of the calls nested in it
        args = list(src.code[c["open"]:c["close"] + 1])
        for d in calls:
            if d is not c and c["open"] < d["start"] and \
                    d["close"] <= c["close"]:
                for k in range(d["start"], d["close"] + 1):
                    args[k - c["open"]] = " "
        orders = {o.lower() for o in ORDER_TOKEN.findall("".join(args))}
        if not orders and (c["name"].startswith("__sync_") or
                           (c["name"].startswith("atomic_") and
                            not c["name"].endswith("_explicit") and
                            not c["name"].endswith("_fence"))):
            orders = {"seq_cst"}
        c["orders"] = orders
        c["line"] = src.line_of(c["start"])
        c["end"] = src.line_of(c["close"])
        c["stmt"] = statement_start(src, c["line"])
    return calls


def ends_statement(code_line):
    s = code_line.rstrip()
    return s == "" or s.endswith((";", "{", "}")) or bool(LABEL.match(s)) \
        or s.lstrip().startswith("#")


def statement_start(src, ln):
    while ln > 0:
        prev = src.code_line(ln - 1)
        if not prev.strip() or ends_statement(prev):
            break
        ln -= 1
    return ln


def covering_comments(src, call, calls_by_stmt):
    """Indexes of the comments covering a call (rules 3a and 3b)."""
    found = set()
    for ln in range(call["stmt"], call["end"] + 1):
        found.update(src.comment_on.get(ln, []))
    # 3b: walk up from the statement over the run of atomic statements
    ln = call["stmt"]
    while True:
        above = ln - 1
        if above < 0:
            return found
        code = src.code_line(above).strip()
        if above in src.comment_on and not code:
            break  # a comment-only line: the comment block above the run
        if code and above in calls_by_stmt["body"]:
            # a line of the previous atomic statement of the run
            ln = calls_by_stmt["body_start"][above]
            continue
        return found
    # the adjacent comment lines ending at `above`
    ln = above
    while ln >= 0 and ln in src.comment_on and not src.code_line(ln).strip():
        found.update(src.comment_on[ln])
        ln -= 1
    return found


def statement_lines(src, calls):
    """The lines of the atomic statements (from a statement's first line to
    the line that ends it), each mapped to its statement's first line."""
    body, body_start = set(), {}
    for c in calls:
        last = c["end"]
        while last < len(src.code_lines) - 1 and \
                not ends_statement(src.code_line(last)):
            last += 1
        for ln in range(c["stmt"], last + 1):
            body.add(ln)
            body_start[ln] = min(body_start.get(ln, c["stmt"]), c["stmt"])
    return {"body": body, "body_start": body_start}


def check_atomic_comment(text, orders, known_functions):
    """The problems of a call whose comments say `text`, or []."""
    problems = []
    clauses = PARTNER_CLAUSE.findall(text)
    own = PARTNER_CLAUSE.sub(" ", text)
    named = {w.lower() for w in ORDER_WORD.findall(own)}
    missing = sorted(o for o in orders if o not in named)
    if missing:
        if named:
            problems.append("comment names %s, the code uses %s" %
                            ("/".join(sorted(named)),
                             "/".join(sorted(orders))))
        else:
            problems.append("comment does not name the order (%s)" %
                            "/".join(sorted(orders)))
    if orders - {"relaxed"}:
        if not clauses:
            problems.append("%s without 'pairs with' its partner" %
                            "/".join(sorted(orders - {"relaxed"})))
        elif not any(w in known_functions
                     for cl in clauses for w in IDENT.findall(cl)):
            problems.append("'pairs with' names no function defined in src/")
    if "relaxed" in orders and "relaxed" in named:
        reasons = [re.findall(r"[A-Za-z]{3,}", t)
                   for t in re.split(r"(?i)\brelaxed\b", text)[1:]]
        if not any(reasons):
            problems.append("relaxed without a reason")
    return problems


# ------------------------------------------------------------------- driver

def list_files(root, excluded):
    def rel(pattern):
        return sorted(os.path.relpath(p, root) for p in
                      glob.glob(os.path.join(root, pattern), recursive=True)
                      if os.path.isfile(p))
    src = rel("src/**/*.c") + rel("src/**/*.h")
    other = rel("tools/*.c") + rel("tests/**/*.c") + rel("tests/**/*.h") + \
        rel("bench/*.c")
    drop = {os.path.normpath(e) for e in excluded}
    return ([f for f in src if f not in drop],
            [f for f in other if f not in drop])


def run_clang_format(root, files, violations):
    exe = shutil.which("clang-format")
    if not exe:
        print("note: clang-format not found; the format rule is skipped")
        return 0
    for f in files:
        r = subprocess.run([exe, "--dry-run", "--Werror", f], cwd=root,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
        if r.returncode != 0:
            m = re.search(r":(\d+):\d+: (?:error|warning)", r.stderr)
            line = m.group(1) if m else "1"
            violations.append("%s:%s: format: clang-format --dry-run "
                              "--Werror reports changes" % (f, line))
    return len(files)


def main(argv):
    excluded, args = [], []
    it = iter(argv[1:])
    for a in it:
        if a == "--exclude":
            excluded.append(next(it, ""))
        elif a.startswith("--exclude="):
            excluded.append(a.split("=", 1)[1])
        else:
            args.append(a)
    if len(args) != 1 or not os.path.isdir(args[0]):
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        return 2
    root = args[0]
    src_files, other_files = list_files(root, excluded)
    sources = {f: Source(os.path.join(root, f), f)
               for f in src_files + other_files}
    violations = []
    nfuncs = 0
    known_functions = set()
    for f in src_files:
        known_functions.update(n for n, _, _ in functions(sources[f]))
        known_functions.update(OPS_MEMBER.findall(sources[f].code))

    for f in src_files + other_files:
        s = sources[f]
        if len(s.lines) > MAX_FILE_LINES:
            violations.append("%s:%d: file-length: %d lines (max %d)" %
                              (f, len(s.lines), len(s.lines),
                               MAX_FILE_LINES))
        for name, a, b in functions(s):
            nfuncs += 1
            n = b - a + 1
            if n > MAX_FUNC_LINES:
                violations.append("%s:%d: function-length: %s %d lines "
                                  "(max %d)" % (f, a + 1, name, n,
                                                MAX_FUNC_LINES))

    natomics = 0
    for f in src_files:
        s = sources[f]
        calls = atomic_calls(s)
        lines = statement_lines(s, calls)
        for c in calls:
            natomics += 1
            where = "%s:%d: atomic: %s" % (f, c["line"] + 1, c["name"])
            if not c["orders"]:
                violations.append(where + ": no memory order found in the "
                                  "call")
                continue
            idx = covering_comments(s, c, lines)
            text = " ".join(comment_text(s.comments[i][2])
                            for i in sorted(idx))
            if not text:
                violations.append(where + ": no comment names its order "
                                  "(%s)" % "/".join(sorted(c["orders"])))
                continue
            for p in check_atomic_comment(text, c["orders"],
                                          known_functions):
                violations.append(where + ": " + p)

    nfmt = run_clang_format(root, src_files + other_files, violations)
    if violations:
        for v in violations:
            print(v)
        return 1
    print("check_style: %d files, %d functions, %d atomics, %d formatted: "
          "no violation" % (len(sources), nfuncs, natomics, nfmt))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
