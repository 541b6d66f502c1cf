#!/usr/bin/env python3
"""Checks the environment-variable table of docs/environment.md against the code.

    python3 docs/tools/check_env_vars.py [--root REPO] [--verbose]

"Read by the code" means:

* Rust, under src/: every `DDSTORE_*`, `FABRIC_IFACE` or `FI_*` string literal
  in src/config.rs (the one place the library reads its settings), and, in
  any file, such a literal passed to `std::env::var`, `env::var_os` or
  `getenv` (directly or through a `const NAME: &str = "..."`). Comments and
  `#[cfg(test)]` modules do not count.
* Python, under python-ctypes/pyddstore/ (subpackages included) and in
  python-ctypes/setup.py (the package's build):
  `os.environ.get(...)`, `os.environ[...]`, `os.getenv(...)`,
  `os.environ.setdefault(...)`, `... in os.environ`, pyddstore's
  `env_switch`/`env_int`/`env_seconds(...)`, also through any name
  ending in `environ` and through module-level string constants.
* C, C++ and Fortran headers under include/: `getenv("...")`.

"Documented" means: named in backticks in the first column of a table row
of docs/environment.md (user settings) or, for the library's testing aids
(`DDSTORE_TEST_*`) and the old names it refuses, of docs/dev/testing.md. A
table preceded by the line `<!-- env-check: skip -->` is not checked (for
variables of other software, or read only by the tests).

The check fails (exit status 1) when a variable read by the code has no row,
when a row names a variable no code reads, when a variable has rows on both
pages, when a `DDSTORE_TEST_*` variable is on the user page, or when a row
has an empty default or effect column.
"""

import argparse
import ast
import os
import re
import sys

NAME = r"(?:DDSTORE_[A-Z0-9_]+|FABRIC_IFACE|FI_[A-Z0-9_]+)"
NAME_RE = re.compile(rf"^{NAME}$")
STRING_LIT = re.compile(r'"((?:\\.|[^"\\])*)"')


# ---------------------------------------------------------------------------
# Rust

def _strip_rust_comments(text):
    out_lines = []
    in_block = False
    for line in text.splitlines():
        res, i = [], 0
        while i < len(line):
            if in_block:
                j = line.find("*/", i)
                if j < 0:
                    i = len(line)
                    break
                in_block, i = False, j + 2
                continue
            if line.startswith("//", i):
                break
            if line.startswith("/*", i):
                in_block, i = True, i + 2
                continue
            if line[i] == '"':
                m = STRING_LIT.match(line, i)
                if m:
                    res.append(m.group(0))
                    i = m.end()
                    continue
            res.append(line[i])
            i += 1
        out_lines.append("".join(res))
    return "\n".join(out_lines)


def _strip_cfg_test(text):
    """Removes `#[cfg(test)]` items (a `mod tests { ... }` or one fn)."""
    while True:
        m = re.search(r"#\[cfg\(test\)\]", text)
        if not m:
            return text
        brace = text.find("{", m.end())
        semi = text.find(";", m.end())
        if brace < 0 or (0 <= semi < brace):  # `#[cfg(test)] use ...;`
            end = semi + 1 if semi >= 0 else len(text)
        else:
            depth, i = 0, brace
            while i < len(text):
                c = text[i]
                if c == '"':
                    lit = STRING_LIT.match(text, i)
                    if lit:
                        i = lit.end()
                        continue
                if c == "{":
                    depth += 1
                elif c == "}":
                    depth -= 1
                    if depth == 0:
                        break
                i += 1
            end = i + 1
        text = text[:m.start()] + text[end:]


def rust_reads(src_dir):
    found = {}
    for dirpath, _, files in os.walk(src_dir):
        for fn in sorted(files):
            if not fn.endswith(".rs"):
                continue
            path = os.path.join(dirpath, fn)
            with open(path, encoding="utf-8") as f:
                code = _strip_cfg_test(_strip_rust_comments(f.read()))
            consts = dict(re.findall(rf'const\s+(\w+)\s*:\s*&(?:\'static\s+)?str\s*=\s*"({NAME})"', code))
            rel = os.path.relpath(path, os.path.dirname(src_dir))
            if fn == "config.rs":
                for lit in STRING_LIT.findall(code):
                    if NAME_RE.match(lit):
                        found.setdefault(lit, set()).add(rel)
            for arg in re.findall(r"\b(?:env::var(?:_os)?|getenv)\s*\(\s*([^,)]+?)\s*[,)]", code):
                arg = arg.strip()
                if arg.startswith('"'):
                    name = arg.strip('"')
                else:
                    name = consts.get(arg.split("::")[-1], "")
                if NAME_RE.match(name):
                    found.setdefault(name, set()).add(rel)
    return found


# ---------------------------------------------------------------------------
# Python

# pyddstore's strict readers (pyddstore/_args.py): their first argument is
# the variable's name.
ENV_READERS = ("env_switch", "env_int", "env_seconds")


def _is_environ(node):
    if isinstance(node, ast.Attribute):
        return node.attr.endswith("environ")
    if isinstance(node, ast.Name):
        return node.id.endswith("environ")
    return False


def _python_files(pkg_dir, extra):
    for dirpath, _, files in os.walk(pkg_dir):
        for fn in sorted(files):
            if fn.endswith(".py"):
                yield os.path.join(dirpath, fn)
    for path in extra:
        if os.path.isfile(path):
            yield path


def python_reads(pkg_dir, root, extra=()):
    found = {}
    for path in _python_files(pkg_dir, extra):
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        consts = {}
        for node in tree.body:
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str)):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        consts[t.id] = node.value.value

        def value(n):
            if isinstance(n, ast.Constant) and isinstance(n.value, str):
                return n.value
            if isinstance(n, ast.Name):
                return consts.get(n.id)
            return None

        names = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                f = node.func
                if f.attr in ("get", "setdefault", "pop") and _is_environ(f.value):
                    names.append(value(node.args[0]))
                elif f.attr in ("getenv", "getenvb") and isinstance(f.value, ast.Name):
                    names.append(value(node.args[0]))
                elif f.attr in ENV_READERS:
                    names.append(value(node.args[0]))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ENV_READERS:
                if node.args:
                    names.append(value(node.args[0]))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getenv":
                if node.args:
                    names.append(value(node.args[0]))
            elif isinstance(node, ast.Subscript) and _is_environ(node.value):
                names.append(value(node.slice))
            elif isinstance(node, ast.Compare) and any(isinstance(o, (ast.In, ast.NotIn)) for o in node.ops):
                if any(_is_environ(c) for c in node.comparators):
                    names.append(value(node.left))
        rel = os.path.relpath(path, root)
        for name in names:
            if name and NAME_RE.match(name):
                found.setdefault(name, set()).add(rel)
    return found


# ---------------------------------------------------------------------------
# C / C++ / Fortran headers

def header_reads(include_dir, root):
    found = {}
    if not os.path.isdir(include_dir):
        return found
    for fn in sorted(os.listdir(include_dir)):
        path = os.path.join(include_dir, fn)
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for name in re.findall(rf'getenv\s*\(\s*"({NAME})"', text):
            found.setdefault(name, set()).add(os.path.relpath(path, root))
    return found


# ---------------------------------------------------------------------------
# The table

def documented(md_path):
    """{name: line number} for every variable row; problems found on the way."""
    rows, problems = {}, []
    with open(md_path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    skip = False
    in_table = False
    for no, line in enumerate(lines, 1):
        s = line.strip()
        if s == "<!-- env-check: skip -->":
            skip = True
            continue
        if not s.startswith("|"):
            if in_table:
                skip = False
            in_table = False
            continue
        in_table = True
        if skip:
            continue
        cells = [c.strip() for c in s.strip("|").split("|")]
        if all(re.fullmatch(r":?-+:?", c) for c in cells if c):
            continue
        names = re.findall(rf"`({NAME})`", cells[0])
        if not names:
            continue  # the header row, or a row of something else
        for name in names:
            if name in rows:
                problems.append(f"{md_path}:{no}: {name} has two rows (also line {rows[name]})")
            rows[name] = no
        if len(cells) < 3 or not all(cells[1:3]):
            problems.append(f"{md_path}:{no}: the row of {', '.join(names)} needs a default and an effect")
    return rows, problems


# Testing aids: documented on the developer page, never on the user page.
TEST_AID = re.compile(r"^DDSTORE_TEST_")


def check(root, verbose=False):
    root = os.path.abspath(root)
    md = os.path.join(root, "docs", "environment.md")
    dev_md = os.path.join(root, "docs", "dev", "testing.md")
    reads = {}
    for part in (rust_reads(os.path.join(root, "src")),
                 python_reads(os.path.join(root, "python-ctypes", "pyddstore"), root,
                              [os.path.join(root, "python-ctypes", "setup.py")]),
                 header_reads(os.path.join(root, "include"), root)):
        for k, v in part.items():
            reads.setdefault(k, set()).update(v)
    rows, problems = documented(md)
    dev_rows, dev_problems = documented(dev_md) if os.path.exists(dev_md) else ({}, [])
    problems += dev_problems
    rel_md, rel_dev = os.path.relpath(md, root), os.path.relpath(dev_md, root)
    for name in sorted(set(rows) & set(dev_rows)):
        problems.append(f"{rel_md}:{rows[name]}: {name} also has a row in {rel_dev}:{dev_rows[name]}")
    for name in sorted(n for n in rows if TEST_AID.match(n)):
        problems.append(f"{rel_md}:{rows[name]}: {name} is a testing aid: its row belongs in {rel_dev}")
    for name in sorted(set(reads) - set(rows) - set(dev_rows)):
        where = rel_dev if TEST_AID.match(name) else rel_md
        problems.append(f"{name} is read by {', '.join(sorted(reads[name]))} but has no row in {where}")
    for page, page_rows in ((rel_md, rows), (rel_dev, dev_rows)):
        for name in sorted(set(page_rows) - set(reads)):
            problems.append(f"{page}:{page_rows[name]}: {name} has a row but no code reads it "
                            f"(src/config.rs, std::env::var, python-ctypes/pyddstore os.environ/os.getenv)")
    if verbose:
        for name in sorted(reads):
            print(f"  {name:32} {', '.join(sorted(reads[name]))}")
    return sorted(reads), problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."),
                    help="repository root (default: two levels above this script)")
    ap.add_argument("--verbose", action="store_true", help="list every variable and where it is read")
    args = ap.parse_args(argv)
    names, problems = check(args.root, args.verbose)
    for p in problems:
        print(f"check_env_vars: {p}", file=sys.stderr)
    if problems:
        return 1
    print(f"check_env_vars: {len(names)} variables, each read by the code and documented in docs/environment.md "
          "or, testing aids, docs/dev/testing.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
