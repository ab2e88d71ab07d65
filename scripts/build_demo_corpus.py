"""Build the bundled demo corpus ``gold/corpus.jsonl`` from CPython's own documentation.

Source
------
Every passage comes from documentation that ships inside the CPython
interpreter running this script:

* ``pydoc_data.topics.topics`` -- the language reference topics used by
  ``help()`` (statements, expressions, data model, built-in types, ...);
* the docstrings of a fixed list of commonly used standard library modules
  (``MODULES`` below) and of their public classes, methods and functions.

That text is part of CPython and is distributed under the PSF License
(Python Software Foundation License Version 2); see
https://docs.python.org/3/license.html.

Output
------
One JSON object per line in BEIR corpus shape::

    {"_id": "json.dumps#0", "title": "json.dumps", "text": "...",
     "metadata": {"source": "docstring", "module": "json",
                  "python_version": "3.11.7"}}

Passage ids are stable: ``topic:<topic-name>#<n>`` for reference topics,
``<module>#<n>`` for a module docstring and ``<module>.<Name>#<n>`` (or
``<module>.<Class>.<method>#<n>``) for members, where ``<n>`` counts the
passages of one source text from 0.  Long texts are split at paragraph
boundaries into passages of roughly 80-250 words; a paragraph is only cut
when it alone is longer than about 400 words.  Docstrings shorter than 8 words
are dropped, as are private names (leading underscore) and objects that a
module merely re-exports from another public module.  Sections that the
aggregate topics ("compound", "specialnames") share with a specific topic are
kept once, in the specific topic.

The output is sorted (reference topics first, then docstrings, each by id and
passage number) and written atomically.  Running the script twice
with the same Python version on the same platform gives byte-identical output
(docstrings and the set of available functions differ between versions and
operating systems, and defaults that depend on the local installation, such as
the interpreter path, are shown as ``...``).

Usage
-----
Re-run from the repository root (the committed copy states the Python version
in every passage's ``metadata.python_version``)::

    python scripts/build_demo_corpus.py
    python scripts/build_demo_corpus.py --out /tmp/corpus.jsonl
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import platform
import re
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

# Standard library modules whose docstrings are included, in priority order
# (when one object is exported by several modules, see ``_owner_rank``).
MODULES: tuple[str, ...] = (
    "builtins",
    "abc",
    "argparse",
    "array",
    "ast",
    "asyncio",
    "base64",
    "bisect",
    "bz2",
    "calendar",
    "cmath",
    "codecs",
    "collections",
    "collections.abc",
    "concurrent.futures",
    "configparser",
    "contextlib",
    "contextvars",
    "copy",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "difflib",
    "email.message",
    "email.utils",
    "enum",
    "filecmp",
    "fnmatch",
    "fractions",
    "functools",
    "gc",
    "getpass",
    "glob",
    "graphlib",
    "gzip",
    "hashlib",
    "heapq",
    "hmac",
    "html",
    "html.parser",
    "http",
    "http.client",
    "http.server",
    "importlib",
    "importlib.metadata",
    "importlib.resources",
    "inspect",
    "io",
    "ipaddress",
    "itertools",
    "json",
    "locale",
    "logging",
    "logging.handlers",
    "lzma",
    "math",
    "mimetypes",
    "multiprocessing",
    "numbers",
    "operator",
    "os",
    "os.path",
    "pathlib",
    "pickle",
    "platform",
    "pprint",
    "queue",
    "random",
    "re",
    "sched",
    "secrets",
    "selectors",
    "shelve",
    "shlex",
    "shutil",
    "signal",
    "smtplib",
    "socket",
    "sqlite3",
    "statistics",
    "string",
    "struct",
    "subprocess",
    "sys",
    "tempfile",
    "textwrap",
    "threading",
    "time",
    "timeit",
    "tomllib",
    "traceback",
    "types",
    "typing",
    "unicodedata",
    "unittest",
    "unittest.mock",
    "urllib.parse",
    "urllib.request",
    "uuid",
    "warnings",
    "weakref",
    "xml.etree.ElementTree",
    "zipfile",
    "zlib",
    "zoneinfo",
)

# Modules that provide the implementation of a public module on some platform.
PLATFORM_IMPLEMENTATIONS = {"posix", "nt", "posixpath", "ntpath", "genericpath"}

MIN_WORDS = 8  # drop texts shorter than this
TARGET_MIN = 80  # a passage is closed once it has at least this many words ...
TARGET_MAX = 250  # ... and the next paragraph would push it past this
HARD_MAX = 400  # a single paragraph longer than this is cut at line ends
TAIL_MIN = 40  # a last passage shorter than this is merged into the previous one
MAX_SIGNATURE_CHARS = 300

HEADING_RE = re.compile(r"^([*=\-~^])\1{2,}$")
ADDRESS_RE = re.compile(r" at 0x[0-9a-fA-F]+")
WORD_RE = re.compile(r"\w")


@dataclass(frozen=True)
class Passage:
    id: str
    title: str
    text: str
    source: str
    module: str | None
    sort_key: tuple


def word_count(text: str) -> int:
    return sum(1 for tok in text.split() if WORD_RE.search(tok))


def normalise(text: str) -> str:
    """Strip trailing spaces, drop surrounding blank lines, collapse blank runs."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    text = "\n".join(lines).strip("\n")
    return re.sub(r"\n{3,}", "\n\n", text)


def split_paragraphs(text: str) -> list[str]:
    return [p for p in (normalise(p) for p in re.split(r"\n[ \t]*\n", text)) if p]


def cut_long_paragraph(paragraph: str) -> list[str]:
    """Cut an over-long paragraph at line ends into pieces of <= TARGET_MAX words."""
    pieces: list[str] = []
    current: list[str] = []
    count = 0
    for line in paragraph.split("\n"):
        n = word_count(line)
        if current and count + n > TARGET_MAX:
            pieces.append("\n".join(current))
            current, count = [], 0
        current.append(line)
        count += n
    if current:
        pieces.append("\n".join(current))
    return pieces


def chunk(text: str) -> list[str]:
    """Group paragraphs into passages of roughly TARGET_MIN..TARGET_MAX words."""
    paragraphs: list[str] = []
    for paragraph in split_paragraphs(text):
        if word_count(paragraph) > HARD_MAX:
            paragraphs.extend(cut_long_paragraph(paragraph))
        else:
            paragraphs.append(paragraph)

    passages: list[list[str]] = []
    current: list[str] = []
    count = 0
    for paragraph in paragraphs:
        n = word_count(paragraph)
        if current and count >= TARGET_MIN and count + n > TARGET_MAX:
            passages.append(current)
            current, count = [], 0
        current.append(paragraph)
        count += n
    if current:
        if passages and count < TAIL_MIN:
            passages[-1].extend(current)
        else:
            passages.append(current)
    return ["\n\n".join(p) for p in passages]


# --------------------------------------------------------------------------
# Language reference topics
# --------------------------------------------------------------------------


def clean_heading(heading: str) -> str:
    return heading.replace('"', "").replace("*", "").strip()


def topic_sections(text: str) -> list[tuple[str, str]]:
    """Split a rendered topic into (heading, body) sections."""
    lines = normalise(text).split("\n")
    sections: list[tuple[str, list[str]]] = []
    heading = ""
    body: list[str] = []
    i = 0
    while i < len(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if (
            lines[i].strip()
            and HEADING_RE.match(nxt)
            and len(nxt) == len(lines[i])
            and not lines[i].startswith(" ")
        ):
            if heading or any(s.strip() for s in body):
                sections.append((heading, body))
            heading, body = clean_heading(lines[i]), []
            i += 2
            continue
        body.append(lines[i])
        i += 1
    sections.append((heading, body))
    return [(h, normalise("\n".join(b))) for h, b in sections]


def topic_passages() -> list[Passage]:
    from pydoc_data.topics import topics

    parsed = {name: topic_sections(text) for name, text in topics.items()}
    size = {name: word_count(text) for name, text in topics.items()}

    # The same section text appears in aggregate topics ("compound",
    # "specialnames") and in the specific topic ("for", "with", ...); keep each
    # section once, in the shortest topic that contains it.
    owner: dict[tuple[str, str], str] = {}
    for name in sorted(parsed, key=lambda n: (size[n], len(n), n)):
        for section in parsed[name]:
            owner.setdefault(section, name)

    passages: list[Passage] = []
    for name in sorted(parsed):
        sections = parsed[name]
        topic_title = sections[0][0] or name
        n = 0
        for heading, body in sections:
            if owner[(heading, body)] != name or word_count(body) < MIN_WORDS:
                continue
            title = f"Language reference: {topic_title}"
            if heading and heading != topic_title:
                title += f" — {heading}"
            for text in chunk(body):
                passages.append(
                    Passage(
                        id=f"topic:{name}#{n}",
                        title=title,
                        text=text,
                        source="pydoc_data.topics",
                        module=None,
                        sort_key=(0, name, n),
                    )
                )
                n += 1
    return passages


# --------------------------------------------------------------------------
# Module docstrings
# --------------------------------------------------------------------------


def import_module(name: str):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.import_module(name)
    except Exception:  # any failure means "not available on this machine"
        return None


def is_documentable(obj) -> bool:
    return inspect.isclass(obj) or inspect.isroutine(obj)


def belongs_to(obj, public_name: str, module) -> bool:
    """True unless ``obj`` is re-exported from an unrelated public module."""
    origin = getattr(obj, "__module__", None)
    if not isinstance(origin, str):
        return False
    real = module.__name__
    package = public_name if hasattr(module, "__path__") else None
    if origin in (public_name, real) or origin in PLATFORM_IMPLEMENTATIONS:
        return True
    if package and origin.startswith(package + "."):
        return True
    # Private implementation modules such as _json, _heapq, _io or _sqlite3.
    return any(part.startswith("_") for part in origin.split("."))


def public_names(module) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = dir(module)
    return sorted({n for n in names if isinstance(n, str) and not n.startswith("_")})


class _Elided:
    """Stands in for a default value that depends on the local installation."""

    def __repr__(self) -> str:
        return "..."


def _local_strings() -> set[str]:
    values = {sys.executable, sys.prefix, sys.base_prefix, sys.exec_prefix}
    values.add(str(Path.home()))
    values.add(tempfile.gettempdir())
    return {v for v in values if v and len(v) > 1}


LOCAL_STRINGS = _local_strings()


def signature_of(obj, qualified: str) -> str:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return ""
    params = []
    for param in sig.parameters.values():
        default = param.default
        if default is not param.empty and any(local in repr(default) for local in LOCAL_STRINGS):
            param = param.replace(default=_Elided())
        params.append(param)
    text = ADDRESS_RE.sub("", str(sig.replace(parameters=params)))
    if len(text) > MAX_SIGNATURE_CHARS or "\n" in text:
        return ""
    return f"{qualified}{text}"


def docstring_of(obj) -> str:
    doc = obj.__doc__ if isinstance(getattr(obj, "__doc__", None), str) else ""
    return inspect.cleandoc(doc) if doc else ""


def _owner_rank(module_name: str, attr: str, obj) -> tuple:
    """Sort key choosing the module (and name) that documents ``obj``."""
    origin = getattr(obj, "__module__", "")
    return (
        module_name != "builtins",
        origin != module_name,
        module_name.count("."),
        len(module_name),
        module_name,
        attr != getattr(obj, "__name__", attr),  # prefer the real name to aliases
        attr,
    )


def member_texts() -> tuple[list[tuple[str, str, str, str]], list[str]]:
    """Return (base_id, title, module, text) tuples and the modules used."""
    modules = []
    for name in MODULES:
        module = import_module(name)
        if module is not None:
            modules.append((name, module))

    # Decide which module documents each exported object.
    claims: dict[int, tuple[tuple, str, str]] = {}
    keep_alive = []  # holds every object while id() is used as a key
    for mod_name, module in modules:
        for attr in public_names(module):
            try:
                obj = getattr(module, attr)
            except AttributeError:
                continue
            if not is_documentable(obj) or not belongs_to(obj, mod_name, module):
                continue
            keep_alive.append(obj)
            rank = _owner_rank(mod_name, attr, obj)
            if id(obj) not in claims or rank < claims[id(obj)][0]:
                claims[id(obj)] = (rank, mod_name, attr)
    owners = {(mod, attr) for _, mod, attr in claims.values()}
    # Module-level functions that are bound methods of a hidden instance
    # (random.randint, ...) are documented once, under the module name.
    bound = {
        id(obj.__func__)
        for obj in keep_alive
        if inspect.ismethod(obj) and not inspect.isclass(obj.__self__)
    }

    out: list[tuple[str, str, str, str]] = []
    used: list[str] = []
    for mod_name, module in modules:
        used.append(mod_name)
        doc = docstring_of(module)
        if doc:
            out.append((mod_name, f"{mod_name} module", mod_name, doc))
        for attr in public_names(module):
            if (mod_name, attr) not in owners:
                continue
            obj = getattr(module, attr)
            qualified = f"{mod_name}.{attr}"
            doc = docstring_of(obj)
            if doc:
                sig = "" if inspect.isclass(obj) else signature_of(obj, qualified)
                text = f"{sig}\n\n{doc}" if sig and sig not in doc else doc
                out.append((qualified, qualified, mod_name, text))
            if inspect.isclass(obj):
                out.extend(method_texts(obj, qualified, mod_name, bound))
    return out, used


def method_texts(cls, qualified: str, mod_name: str, skip: set[int]):
    for name in sorted(vars(cls)):
        if name.startswith("_"):
            continue
        raw = vars(cls)[name]
        if isinstance(raw, (staticmethod, classmethod)):
            func = raw.__func__
        elif isinstance(raw, property) or inspect.isroutine(raw):
            func = raw
        else:
            continue
        if id(func) in skip:
            continue
        doc = docstring_of(func)
        if not doc:
            continue
        title = f"{qualified}.{name}"
        sig = "" if isinstance(raw, property) else signature_of(func, title)
        text = f"{sig}\n\n{doc}" if sig and sig not in doc else doc
        yield (title, title, mod_name, text)


def docstring_passages() -> tuple[list[Passage], list[str]]:
    texts, used = member_texts()
    passages: list[Passage] = []
    for base_id, title, module, text in texts:
        if word_count(text) < MIN_WORDS:
            continue
        for n, piece in enumerate(chunk(text)):
            passages.append(
                Passage(
                    id=f"{base_id}#{n}",
                    title=title,
                    text=piece,
                    source="docstring",
                    module=module,
                    sort_key=(1, base_id, n),
                )
            )
    return passages, used


# --------------------------------------------------------------------------


def _file_mode() -> int:
    """Permissions of a newly created regular file under the current umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_jsonl(path: Path, passages: list[Passage], version: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _file_mode())  # mkstemp creates the file as 0600
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            for p in passages:
                record = {
                    "_id": p.id,
                    "title": p.title,
                    "text": p.text,
                    "metadata": {
                        "source": p.source,
                        "module": p.module,
                        "python_version": version,
                    },
                }
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("gold/corpus.jsonl"),
        help="output JSONL path (default: gold/corpus.jsonl)",
    )
    args = parser.parse_args(argv)

    topics = topic_passages()
    docs, used = docstring_passages()
    passages = sorted(topics + docs, key=lambda p: p.sort_key)
    ids = [p.id for p in passages]
    if len(ids) != len(set(ids)):
        raise SystemExit("duplicate passage ids")
    version = platform.python_version()
    write_jsonl(args.out, passages, version)
    skipped = len(MODULES) - len(used)
    print(
        f"wrote {len(passages)} passages to {args.out}: {len(topics)} from "
        f"pydoc_data.topics, {len(docs)} from docstrings of {len(used)} modules "
        f"({skipped} skipped), Python {version}",
        file=sys.stdout,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
