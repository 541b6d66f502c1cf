# Sphinx configuration for the libddstore site. Build it with docs/build.sh
# (warnings are errors there); pages are MyST Markdown.
import os
import struct
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "tools"))          # ddstore_sphinx, capi_reference
sys.path.insert(0, os.path.join(ROOT, "python-ctypes"))  # pyddstore for autodoc (source tree)


def _version():
    with open(os.path.join(ROOT, "Cargo.toml"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("version"):
                return line.split('"')[1]
    return "unknown"


project = "libddstore"
author = "the libddstore developers"
copyright = "the libddstore developers"
release = version = _version()

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx_copybutton",
    "ddstore_sphinx",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "tools", "build.sh", "requirements.txt", "README*"]

# Every link and cross-reference must resolve.
nitpicky = True
nitpick_ignore = [
    # Standard C types in signatures; they are not documented here.
    ("c:identifier", t) for t in (
        "int8_t", "int32_t", "int64_t", "uint32_t", "uint64_t", "size_t", "MPI_Comm")
] + [
    # Builtins and third-party types named in pyddstore's docstrings.
    ("py:class", "numpy.ndarray"),
]
nitpick_ignore_regex = [
    # Base classes of the exception hierarchy shown by autodoc.
    ("py:class", r"(builtins\.)?(ValueError|IndexError|RuntimeError|TypeError|OSError|"
                 r"NotImplementedError|TimeoutError|Exception)"),
]

# MyST: `#slug` links to headings (as on GitHub), ::: fences, $...$ not needed.
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# autodoc: pyddstore imports without MPI and without loading libddstore.
autodoc_member_order = "bysource"
autodoc_typehints = "none"
autodoc_default_options = {"members": True, "show-inheritance": True}

html_theme = "alabaster"
html_static_path = ["_static"]
html_title = f"libddstore {release}"
html_theme_options = {
    "description": "A distributed in-memory data store for HPC codes",
    "fixed_sidebar": True,
    "page_width": "1100px",
    "sidebar_width": "230px",
}
html_sidebars = {"**": ["about.html", "navigation.html", "searchbox.html"]}
html_show_sourcelink = False
copybutton_prompt_text = r"\$ "
copybutton_prompt_is_regexp = True

# -- checks and generated content (docs/tools/ddstore_sphinx.py) ------------

ddstore_root = ".."
ddstore_header = "include/ddstore.h"

# Code blocks must come from these (tested) places.
ddstore_tested_dirs = ["capi-tests", "python-ctypes/tests/scripts", "include", "docs/tools"]
# Pages that still carry inline examples no test runs (page -> how many).
# They belong to other pages' owners: replace each by a literalinclude from a
# tested file, then lower the count here.
ddstore_untested_snippets = {
    "python": 1,   # "Quick example" (the tested one is quickstart-python)
    "fortran": 1,  # "The raw interface" example
}

def _placeholder_png(width=480, height=48, grey=235):
    """A plain grey PNG whose text chunk carries the placeholder tag."""
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
    rows = b"".join(b"\x00" + bytes([grey]) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"tEXt", b"Comment\x00ddstore-docs-placeholder: replaced by make bench")
            + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))


# Files that `make bench` generates. Until they exist, the build writes these
# placeholders (and removes them afterwards), so pages linking to them build.
ddstore_placeholders = {
    "dev/results.md": (
        "<!-- ddstore-docs-placeholder: replaced by `make bench` -->\n"
        "# Benchmark results\n\n"
        "No results have been recorded in this tree yet. `make bench` runs the\n"
        "benchmark described in [Performance](performance.md) and writes this\n"
        "page (`docs/dev/results.md`) and its figure (`docs/dev/results.png`).\n"
    ),
    "dev/results.png": _placeholder_png(),
}
