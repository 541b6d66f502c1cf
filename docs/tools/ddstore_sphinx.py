"""Sphinx extension for the libddstore site (loaded by docs/conf.py).

It makes the build fail (under -W) when the documentation drifts from the
code:

* ``<!-- capi-reference -->`` in a page is replaced by the C API reference
  generated from include/ddstore.h (docs/tools/capi_reference.py); the page
  is rebuilt whenever the header changes.
* The environment-variable table is checked against the code
  (docs/tools/check_env_vars.py).
* Code blocks in C, C++, Fortran or Python must come from tested files:
  either ``literalinclude``d from them, or an exact copy of lines of one
  (indentation aside). Pages listed in ``ddstore_untested_snippets`` may
  carry that many exceptions.
* After the build, ``mpi4py`` must not have been imported: autodoc imported
  ``pyddstore`` and its ``PyDDStore`` without starting MPI.

It also writes placeholders for files that a later step generates (``make
bench`` writes docs/dev/results.md and docs/dev/results.png): a missing one is
written before the build and removed after it, so the pages that link to
it build either way and the source tree is left as it was.
"""

import os
import sys

from docutils import nodes
from sphinx.util import logging

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import capi_reference  # noqa: E402
import check_env_vars  # noqa: E402

logger = logging.getLogger(__name__)

MARKER = "<!-- capi-reference -->"
PLACEHOLDER_TAG = b"ddstore-docs-placeholder"
CHECKED_LANGUAGES = {"c", "cpp", "c++", "fortran", "f90", "python", "py", "python3"}


def _root(app):
    return os.path.abspath(os.path.join(app.srcdir, app.config.ddstore_root))


# -- C API reference -------------------------------------------------------

def inject_capi_reference(app, docname, source):
    if MARKER not in source[0]:
        return
    header = os.path.join(_root(app), app.config.ddstore_header)
    app.env.note_dependency(header)
    try:
        md = capi_reference.generate(header, os.path.relpath(header, _root(app)))
    except (OSError, capi_reference.HeaderError) as e:
        logger.warning("C API reference: %s: %s", header, e, type="ddstore", subtype="capi")
        md = "(The C API reference could not be generated; see the build log.)"
    source[0] = source[0].replace(MARKER, md)


# -- environment variables --------------------------------------------------

def check_environment(app):
    _, problems = check_env_vars.check(_root(app))
    for p in problems:
        logger.warning("environment variables: %s", p, type="ddstore", subtype="envvars")


# -- placeholders for generated files --------------------------------------

def write_placeholders(app):
    app._ddstore_placeholders = []
    for name, content in app.config.ddstore_placeholders.items():
        path = os.path.join(app.srcdir, name)
        if os.path.exists(path):
            continue
        data = content if isinstance(content, bytes) else content.encode()
        if PLACEHOLDER_TAG not in data:
            raise ValueError(f"placeholder for {name} must contain {PLACEHOLDER_TAG.decode()!r}")
        with open(path, "wb") as f:
            f.write(data)
        app._ddstore_placeholders.append(path)
        logger.info("docs: %s does not exist yet; using a placeholder", name)


def remove_placeholders(app, exception):
    for path in getattr(app, "_ddstore_placeholders", []):
        try:
            with open(path, "rb") as f:
                ours = PLACEHOLDER_TAG in f.read()
            if ours:
                os.remove(path)
        except OSError:
            pass


# -- code blocks come from tested files --------------------------------------

def _norm(lines):
    return [ln.strip() for ln in lines if ln.strip()]


def _tested_lines(app):
    cache = getattr(app, "_ddstore_tested", None)
    if cache is None:
        cache = []
        root = _root(app)
        for d in app.config.ddstore_tested_dirs:
            base = os.path.join(root, d)
            for dirpath, _, files in os.walk(base):
                for fn in files:
                    path = os.path.join(dirpath, fn)
                    try:
                        with open(path, encoding="utf-8") as f:
                            cache.append((path, _norm(f.read().splitlines())))
                    except (OSError, UnicodeDecodeError):
                        pass
        app._ddstore_tested = cache
    return cache


def _is_copy(block, tested):
    want = _norm(block.splitlines())
    if not want:
        return True
    for _, lines in tested:
        first = want[0]
        for i, ln in enumerate(lines):
            if ln == first and lines[i:i + len(want)] == want:
                return True
    return False


def check_code_blocks(app, doctree, docname):
    docpath = os.path.abspath(app.env.doc2path(docname))
    untested = 0
    for node in doctree.findall(nodes.literal_block):
        lang = (node.get("language") or "").lower()
        if lang not in CHECKED_LANGUAGES:
            continue
        src = node.get("source")
        if src and os.path.abspath(src) != docpath:
            continue  # literalinclude from a file
        if _is_copy(node.astext(), _tested_lines(app)):
            continue
        untested += 1
        allowed = app.config.ddstore_untested_snippets.get(docname, 0)
        if untested > allowed:
            logger.warning(
                "a %s code block that is neither included from nor a copy of a tested file "
                "(use literalinclude from capi-tests/ or python-ctypes/tests/scripts/)",
                lang, location=node, type="ddstore", subtype="snippets")


# -- autodoc ---------------------------------------------------------------

def drop_signature_paragraph(app, what, name, obj, options, lines):
    """Drops a paragraph of a class docstring that restates the call
    signature (``PyDDStore(comm_or_none=None, ..., *, ddstore_width=0)``):
    autodoc shows the signature itself, and the ``*`` is not valid RST."""
    if what not in ("class", "exception"):
        return
    short = name.rsplit(".", 1)[-1]
    for i, line in enumerate(lines):
        if line.strip().startswith(short + "("):
            j = i
            while j < len(lines) and lines[j].strip():
                j += 1
            del lines[i:j + 1 if j < len(lines) else j]
            return


# -- MPI must not start -----------------------------------------------------

def check_no_mpi(app, exception):
    if exception is None and "mpi4py" in sys.modules:
        logger.warning("the docs build imported mpi4py: `import pyddstore` (or PyDDStore) started MPI",
                       type="ddstore", subtype="mpi")


def setup(app):
    app.add_config_value("ddstore_root", "..", "env")
    app.add_config_value("ddstore_header", "include/ddstore.h", "env")
    app.add_config_value("ddstore_placeholders", {}, "env")
    app.add_config_value("ddstore_tested_dirs", [], "env")
    app.add_config_value("ddstore_untested_snippets", {}, "env")
    app.connect("builder-inited", write_placeholders)
    app.connect("builder-inited", check_environment)
    app.connect("source-read", inject_capi_reference)
    app.connect("doctree-read", lambda app, doctree: check_code_blocks(app, doctree, app.env.docname))
    app.connect("autodoc-process-docstring", drop_signature_paragraph)
    app.connect("build-finished", check_no_mpi)
    app.connect("build-finished", remove_placeholders)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
