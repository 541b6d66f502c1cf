#!/usr/bin/env python3
"""Tests of the docs tools themselves (run by docs/build.sh; plain unittest).

    python3 docs/tools/test_tools.py

They check that the environment-variable check really fails on a missing or
stale row (a check that always passes would be worse than none), and that the
C reference generator refuses undocumented items and unknown lines.
"""

import os
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import capi_reference  # noqa: E402
import check_env_vars  # noqa: E402

CONFIG_RS = '''
//! Mentions DDSTORE_IN_A_COMMENT, which is not a read.
const OTHER: &str = "DDSTORE_VIA_CONST";
pub fn from_env() {
    let a = text("DDSTORE_ALPHA");   // "DDSTORE_COMMENTED" in a comment
    /* "DDSTORE_BLOCK_COMMENTED" */
}
#[cfg(test)]
mod tests {
    fn t() { parse(&[("DDSTORE_ONLY_IN_TESTS", "1")]); }
}
'''

OTHER_RS = '''
fn f() {
    let x = std::env::var("FI_SOMETHING").ok();
    let y = std::env::var_os(OTHER);
    log("DDSTORE_ONLY_IN_A_MESSAGE");
}
const OTHER: &str = "DDSTORE_VIA_CONST";
'''

PY = '''
import os
from os import environ
ENV = "DDSTORE_PY_CONST"
a = os.environ.get("DDSTORE_PY_GET", "")
b = os.getenv("DDSTORE_PY_GETENV")
c = os.environ["DDSTORE_PY_ITEM"]
d = "DDSTORE_PY_IN" in os.environ
e = _args.env_switch("DDSTORE_PY_SWITCH", True)
g = env_int("DDSTORE_PY_INT", 0, 0, 2)
def f(environ=os.environ):
    return environ.get(ENV)
msg = "set DDSTORE_PY_ONLY_TEXT"
'''

READ = ["DDSTORE_ALPHA", "DDSTORE_PY_CONST", "DDSTORE_PY_GET", "DDSTORE_PY_GETENV",
        "DDSTORE_PY_IN", "DDSTORE_PY_INT", "DDSTORE_PY_ITEM", "DDSTORE_PY_SWITCH", "DDSTORE_VIA_CONST",
        "FI_SOMETHING"]


def make_repo(tmp, rows):
    os.makedirs(os.path.join(tmp, "src", "sub"))
    os.makedirs(os.path.join(tmp, "python-ctypes", "pyddstore", "torch"))
    os.makedirs(os.path.join(tmp, "docs"))
    with open(os.path.join(tmp, "src", "config.rs"), "w") as f:
        f.write(CONFIG_RS)
    with open(os.path.join(tmp, "src", "sub", "other.rs"), "w") as f:
        f.write(OTHER_RS)
    with open(os.path.join(tmp, "python-ctypes", "pyddstore", "torch", "x.py"), "w") as f:
        f.write(PY)
    table = "\n".join(f"| `{r}` | 1 | does something |" for r in rows)
    with open(os.path.join(tmp, "docs", "environment.md"), "w") as f:
        f.write(f"# Env\n\n| variable | default | effect |\n|---|---|---|\n{table}\n\n"
                "<!-- env-check: skip -->\n| variable | default | effect |\n|---|---|---|\n"
                "| `FI_LOG_LEVEL` | warn | libfabric's, not ours |\n")


class EnvCheck(unittest.TestCase):
    def run_check(self, rows):
        with tempfile.TemporaryDirectory() as tmp:
            make_repo(tmp, rows)
            return check_env_vars.check(tmp)

    def test_finds_exactly_the_reads(self):
        names, problems = self.run_check(READ)
        self.assertEqual(names, sorted(READ))
        self.assertEqual(problems, [])

    def test_missing_row_fails(self):
        _, problems = self.run_check([r for r in READ if r != "DDSTORE_PY_ITEM"])
        self.assertEqual(len(problems), 1)
        self.assertIn("DDSTORE_PY_ITEM is read by", problems[0])

    def test_stale_row_fails(self):
        _, problems = self.run_check(READ + ["DDSTORE_ONLY_IN_TESTS"])
        self.assertEqual(len(problems), 1)
        self.assertIn("DDSTORE_ONLY_IN_TESTS has a row but no code reads it", problems[0])

    def test_testing_aids_belong_on_the_developer_page(self):
        aid = "DDSTORE_TEST_AID"
        with tempfile.TemporaryDirectory() as tmp:
            make_repo(tmp, READ)
            with open(os.path.join(tmp, "src", "config.rs"), "a") as f:
                f.write(f'fn aid() {{ text("{aid}"); }}\n')
            _, problems = check_env_vars.check(tmp)
            self.assertEqual(len(problems), 1)
            self.assertIn(f"{aid} is read by", problems[0])
            self.assertIn("docs/dev/testing.md", problems[0])
            dev = os.path.join(tmp, "docs", "dev")
            os.makedirs(dev)
            with open(os.path.join(dev, "testing.md"), "w") as f:
                f.write(f"| variable | default | effect |\n|---|---|---|\n| `{aid}` | off | a testing aid |\n")
            self.assertEqual(check_env_vars.check(tmp)[1], [])
        # On the user page instead: refused, and so is a row on both pages.
        with tempfile.TemporaryDirectory() as tmp:
            make_repo(tmp, READ + [aid])
            with open(os.path.join(tmp, "src", "config.rs"), "a") as f:
                f.write(f'fn aid() {{ text("{aid}"); }}\n')
            _, problems = check_env_vars.check(tmp)
            self.assertEqual(len(problems), 1)
            self.assertIn("is a testing aid: its row belongs in docs/dev/testing.md", problems[0])
            os.makedirs(os.path.join(tmp, "docs", "dev"))
            with open(os.path.join(tmp, "docs", "dev", "testing.md"), "w") as f:
                f.write("| variable | default | effect |\n|---|---|---|\n| `DDSTORE_ALPHA` | 1 | x |\n"
                        "| `DDSTORE_STALE` | 1 | x |\n")
            _, problems = check_env_vars.check(tmp)
            self.assertTrue(any("DDSTORE_ALPHA also has a row" in p for p in problems), problems)
            self.assertTrue(any("DDSTORE_STALE has a row but no code reads it" in p for p in problems), problems)

    # (The real repository is checked by check_env_vars.py itself, run by
    # docs/build.sh, and by the Sphinx build.)

    def test_row_needs_default_and_effect(self):
        with tempfile.TemporaryDirectory() as tmp:
            make_repo(tmp, READ)
            p = os.path.join(tmp, "docs", "environment.md")
            with open(p, "a") as f:
                f.write("\n| variable | default | effect |\n|---|---|---|\n| `DDSTORE_ALPHA` |  | x |\n")
            _, problems = check_env_vars.check(tmp)
        self.assertTrue(any("two rows" in p for p in problems))
        self.assertTrue(any("needs a default and an effect" in p for p in problems))


HEADER = textwrap.dedent('''\
    /* File comment. */
    #ifndef X_H
    #define X_H
    // A constant.
    #define X_ONE 1
    // Status.
    typedef enum x_status {
      // Fine.
      X_OK = 0,
    } x_status;
    // A handle.
    typedef struct x_h x_h;
    // Does a thing with `x_h`; see `X_OK`.
    enum x_status x_do(struct x_h *h,
                       int n);
    #endif
    ''')


class CapiReference(unittest.TestCase):
    def test_renders_every_item_with_links(self):
        intro, items = capi_reference.parse_header(HEADER)
        self.assertEqual(intro, ["File comment."])
        self.assertEqual([(i.kind, i.name) for i in items],
                         [("macro", "X_ONE"), ("enum", "x_status"), ("opaque", "x_h"), ("function", "x_do")])
        md = capi_reference.render(intro, items)
        self.assertIn("```{c:function} x_status x_do(x_h *h, int n)", md)
        self.assertIn("{c:struct}`x_h`", md)
        self.assertIn("{c:enumerator}`X_OK`", md)

    def test_undocumented_function_fails(self):
        bad = HEADER.replace("// Does a thing with `x_h`; see `X_OK`.\n", "")
        with self.assertRaisesRegex(capi_reference.HeaderError, "'x_do' has no documentation"):
            capi_reference.parse_header(bad)

    def test_undocumented_enumerator_fails(self):
        bad = HEADER.replace("  // Fine.\n", "")
        with self.assertRaisesRegex(capi_reference.HeaderError, "'X_OK' has no documentation"):
            capi_reference.parse_header(bad)

    def test_unknown_line_fails(self):
        bad = HEADER.replace("#endif", "union u { int a; };\n#endif")
        with self.assertRaises(capi_reference.HeaderError):
            capi_reference.parse_header(bad)

    def test_real_header(self):
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        md = capi_reference.generate(os.path.join(root, "include", "ddstore.h"))
        for name in ("dds_create", "dds_get_batch", "dds_create_comm", "dds_options", "DDS_ERR_TIMEOUT"):
            self.assertIn(name, md)


class SnippetCopies(unittest.TestCase):
    def setUp(self):
        try:
            import ddstore_sphinx
        except ImportError:  # Sphinx not installed: docs/build.sh installs it
            self.skipTest("sphinx is not installed")
        self.mod = ddstore_sphinx

    def test_copy_with_other_indentation_is_accepted(self):
        tested = [("f.c", self.mod._norm(["int main() {", "    int x = 1;", "    return x;", "}"]))]
        self.assertTrue(self.mod._is_copy("int x = 1;\nreturn x;\n", tested))
        self.assertFalse(self.mod._is_copy("int x = 2;\nreturn x;\n", tested))
        self.assertFalse(self.mod._is_copy("return x;\nint x = 1;\n", tested))


if __name__ == "__main__":
    unittest.main()
