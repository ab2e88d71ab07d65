"""Document vectors on disk, written batch by batch as they are embedded.

    <output>/cache/embedding/<model key>/batch-<16 hex digits>.npz

The folder's name is a digest of what a vector depends on besides its text: the
model (the digest of a model folder's files, or the endpoint's URL and model name),
the corpus fields embedded, the document prefix, the `cache_key` and the store's
format. Each batch file holds `keys` (the sha256 of each embedded text, as 64 hex
digits) and `vectors` (float32, one row a text, as the model gave them). A batch is
written atomically as soon as it is embedded, so a run that is killed keeps every
batch it finished, and the next run embeds only the texts no file holds. An edited
document is a new text and the only one embedded again; a document that did not
change is found by its text wherever it moved in the corpus. All files are read in
one pass when the store is opened. A file that cannot be read whole (cut short,
damaged, of another shape, holding a vector that is not finite or all zeros) is
ignored, and its texts are embedded again. A store that has grown (more than twice
the files its corpus needs and 8 more, from runs that each embedded a few edited
documents, or more than twice the vectors the corpus uses) is written again with only
the vectors in use.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from llm_eval.textio import open_regular, require_file, write_atomic

Matrix = npt.NDArray[np.float32]

FORMAT = 1
"""Part of the folder's key: bump when the files' layout changes."""
_PATTERN = "batch-*.npz"
_SPARE_FILES = 8
"""Small batch files a store may gather (runs that embedded a few edited documents)
before it is written again whole."""


def text_key(text: str) -> bytes:
    """The key of one embedded text: its sha256, as 64 hex digits."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest().encode("ascii")


@dataclass(slots=True)
class VectorStore:
    """The vectors of one model's texts, read from and added to `folder`."""

    folder: Path
    matrices: list[Matrix] = field(default_factory=list)
    rows: dict[bytes, tuple[int, int]] = field(default_factory=dict)
    """key -> (which matrix, which row)."""
    ignored: int = 0
    """Batch files that could not be read whole."""
    paths: list[Path] = field(default_factory=list)
    """The batch files found when the store was opened (read or ignored), and those
    added since."""

    @classmethod
    def open(cls, folder: Path) -> VectorStore:
        """Every sound batch file in `folder` (none when there is no folder)."""
        store = cls(folder)
        store.paths = sorted(folder.glob(_PATTERN))
        found = [_read_batch(path) for path in store.paths]
        batches = [batch for batch in found if batch is not None]
        store.ignored = len(found) - len(batches)
        sizes: dict[int, int] = {}
        for _, vectors in batches:
            sizes[vectors.shape[1]] = sizes.get(vectors.shape[1], 0) + len(vectors)
        # Files of one model share its dimension; any other is a damaged file.
        kept = max(sizes, key=lambda size: sizes[size], default=0)
        for keys, vectors in batches:
            if vectors.shape[1] == kept:
                store._add(keys, vectors)
            else:
                store.ignored += 1
        return store

    @property
    def dimension(self) -> int | None:
        """The vectors' dimension; None while the store is empty."""
        return self.matrices[0].shape[1] if self.matrices else None

    def __contains__(self, key: bytes) -> bool:
        return key in self.rows

    def vector(self, key: bytes) -> Matrix:
        """The stored vector of a text's key (KeyError when there is none)."""
        which, row = self.rows[key]
        return self.matrices[which][row]

    def add(self, keys: Sequence[bytes], vectors: Matrix) -> None:
        """Keep a batch, and write it to its own file (a full disk is no error: the store
        only saves time)."""
        rows = np.asarray(vectors, dtype=np.float32)
        self._add(list(keys), rows)
        path = self._write(keys, rows)
        if path is not None and path not in self.paths:
            self.paths.append(path)

    def _write(self, keys: Sequence[bytes], vectors: Matrix) -> Path | None:
        """Write a batch file (named by its keys); its path, None when the disk refused."""
        buffer = io.BytesIO()
        np.savez(buffer, keys=np.array(keys, dtype="S64"), vectors=vectors)
        path = self.folder / f"batch-{hashlib.sha256(b''.join(keys)).hexdigest()[:16]}.npz"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_atomic(path, buffer.getvalue())
        except OSError:
            return None
        return path

    def compact(self, keys: Sequence[bytes], rows: int) -> bool:
        """When the store has grown (many small files from runs that embedded a few
        texts, or more vectors than `keys`, the texts in use, want), write the vectors
        of `keys` again in files of `rows` and remove every other file it knows of; True
        when it did. Every vector of `keys` must be in the store. A process reading the
        store meanwhile may miss a file, and embeds its texts again: never an error."""
        wanted = list(dict.fromkeys(keys))
        files = -(-len(wanted) // rows)
        if len(self.paths) <= 2 * files + _SPARE_FILES and len(self.rows) <= 2 * len(wanted):
            return False
        written = set()
        for start in range(0, len(wanted), rows):
            chunk = wanted[start : start + rows]
            path = self._write(chunk, np.stack([self.vector(k) for k in chunk]))
            if path is None:
                return False  # a full disk: the files it has stay
            written.add(path)
        for path in self.paths:
            if path not in written:
                with contextlib.suppress(OSError):
                    path.unlink()
        return True

    def _add(self, keys: list[bytes], vectors: Matrix) -> None:
        which = len(self.matrices)
        self.matrices.append(vectors)
        self.rows.update((key, (which, row)) for row, key in enumerate(keys))


def _read_batch(path: Path) -> tuple[list[bytes], Matrix] | None:
    """A batch file's keys and vectors; None when it is not whole and sound (a FIFO, a
    socket or a device in its place is an InputError naming it, never waited on)."""
    require_file(path)
    try:
        with open_regular(path) as handle, np.load(handle, allow_pickle=False) as batch:
            keys = batch["keys"]
            vectors = batch["vectors"]
    except Exception:  # a cut or damaged file makes numpy and zipfile raise assorted errors
        return None
    sound = (
        keys.ndim == 1
        and keys.dtype == np.dtype("S64")
        and vectors.ndim == 2
        and vectors.dtype == np.float32
        and len(keys) == len(vectors)
        and vectors.shape[1] > 0
        and bool(np.isfinite(vectors).all())
        and bool(vectors.any(axis=1).all())
    )
    return (keys.tolist(), vectors) if sound else None
