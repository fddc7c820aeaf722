"""Readers for MNIST-format (IDX) datasets, gzip-compressed or raw.

``mnist(path)`` reads the four standard files of a directory (MNIST digits, or
Fashion-MNIST, which uses the same format and names). By default it looks in Debian's
dataset-fashion-mnist location. Errors name the file and what is wrong with it.
"""

from __future__ import annotations

import gzip
import math
import os
import zlib
from typing import NamedTuple

import numpy as np

from ngraph.exceptions import DatasetError

__all__ = ["DatasetError", "load_idx", "load_split", "check_labels", "mnist", "flatten",
           "MNIST", "Split", "DEFAULT_FASHION_MNIST", "NUM_CLASSES", "DEFAULT_FORTUNES",
           "TextCorpus", "fortunes", "CharVocabulary"]

#: Where Debian's dataset-fashion-mnist package installs Fashion-MNIST.
DEFAULT_FASHION_MNIST = "/usr/share/datasets/fashion-mnist"

_IDX_TYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


#: The number of classes of MNIST and Fashion-MNIST.
NUM_CLASSES = 10


def load_idx(path: str) -> np.ndarray:
    """Reads one IDX file (gzip or raw, by content) into an array of its shape and type."""
    if not os.path.exists(path):
        raise DatasetError(f"{path}: file not found")
    try:
        with open(path, "rb") as f:
            head = f.read(2)
        opener = gzip.open if head == b"\x1f\x8b" else open
        with opener(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
        raise DatasetError(f"{path}: cannot read ({e})") from None
    if len(data) < 4:
        raise DatasetError(f"{path}: truncated: {len(data)} bytes, no IDX header")
    zero, type_code, ndim = int.from_bytes(data[:2], "big"), data[2], data[3]
    if zero != 0 or type_code not in _IDX_TYPES or ndim == 0:
        raise DatasetError(
            f"{path}: not an IDX file (magic bytes {data[:4].hex()}; expected 0000 then a type "
            "code 08/09/0b/0c/0d/0e and a rank >= 1)"
        )
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DatasetError(f"{path}: truncated header ({len(data)} of {header} bytes)")
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    dtype = _IDX_TYPES[type_code]
    expected = math.prod(shape) * dtype.itemsize  # Python ints: no overflow on huge headers
    body = len(data) - header
    if body != expected:
        what = "truncated" if body < expected else "too long"
        raise DatasetError(
            f"{path}: {what}: header says shape {shape} of {dtype.name} ({expected} bytes of "
            f"data), file has {body} after the {header}-byte header ({len(data)} bytes in all)"
        )
    return np.frombuffer(data, dtype=dtype, offset=header).reshape(shape).astype(
        dtype.newbyteorder("="), copy=False
    )


class Split(NamedTuple):
    images: np.ndarray  # (n, 28, 28) uint8
    labels: np.ndarray  # (n,) int64


class MNIST(NamedTuple):
    train: Split | None
    test: Split | None


_NAMES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def _find(directory: str, stem: str) -> str | None:
    for name in (stem + ".gz", stem, stem.replace("-idx", ".idx")):
        p = os.path.join(directory, name)
        if os.path.exists(p):
            return p
    return None


def load_split(directory: str, split: str) -> Split:
    """Reads the 'train' or 'test' images and labels of an MNIST-format directory."""
    img_stem, lbl_stem = _NAMES[split]
    img_path, lbl_path = _find(directory, img_stem), _find(directory, lbl_stem)
    if img_path is None or lbl_path is None:
        missing = img_stem if img_path is None else lbl_stem
        raise DatasetError(f"{os.path.join(directory, missing)}[.gz]: file not found")
    images, labels = load_idx(img_path), load_idx(lbl_path)
    if images.ndim != 3 or images.dtype != np.uint8:
        raise DatasetError(f"{img_path}: expected uint8 images of rank 3, got {images.dtype} "
                           f"{images.shape}")
    if labels.ndim != 1 or labels.shape[0] != images.shape[0]:
        raise DatasetError(f"{lbl_path}: {labels.shape[0] if labels.ndim else 0} labels for "
                           f"{images.shape[0]} images in {img_path}")
    check_labels(labels, lbl_path)
    return Split(images, labels.astype(np.int64))


def check_labels(labels: np.ndarray, path: str, num_classes: int = NUM_CLASSES) -> None:
    """Refuses labels that are not unsigned integers below `num_classes`, naming `path`,
    the first bad value and its index."""
    if labels.dtype.kind != "u":
        raise DatasetError(
            f"{path}: labels must be unsigned integers (IDX type 0x08), got {labels.dtype}")
    bad = np.flatnonzero(labels >= num_classes)
    if bad.size:
        raise DatasetError(
            f"{path}: label {int(labels[bad[0]])} at index {int(bad[0])} is out of range "
            f"0..{num_classes - 1} ({bad.size} such labels)")


def mnist(path: str = DEFAULT_FASHION_MNIST, splits=("train", "test")) -> MNIST:
    """Reads an MNIST-format directory. Splits whose files are absent are None when the
    other split exists (the shared 10k MNIST digits have only the test split); an
    absent directory or no split at all is an error."""
    if not os.path.isdir(path):
        raise DatasetError(f"{path}: directory not found")
    out = {}
    for split in ("train", "test"):
        if split not in splits:
            out[split] = None
            continue
        img, lbl = (_find(path, s) for s in _NAMES[split])
        out[split] = load_split(path, split) if (img or lbl) else None
    if all(v is None for v in out.values()):
        raise DatasetError(f"{path}: no MNIST-format files (expected {_NAMES['train'][0]}[.gz] "
                           f"or {_NAMES['test'][0]}[.gz])")
    return MNIST(out["train"], out["test"])


def flatten(images: np.ndarray, dtype=np.float32) -> np.ndarray:
    """(n, 28, 28) uint8 images as (n, 784) values in [0, 1]."""
    return (images.reshape(len(images), -1).astype(dtype)) / dtype(255)


# ------------------------------------------------------------------------------ text

#: Where Debian's fortunes package installs its fortune files (plain text, entries separated
#: by lines holding "%"; about 2.5 MB of English quotations, jokes, poems and definitions).
DEFAULT_FORTUNES = "/usr/share/games/fortunes"


class TextCorpus(NamedTuple):
    train: str
    validation: str
    documents: int  # entries in all


def fortunes(path: str = DEFAULT_FORTUNES, validation: float = 0.1, seed: int = 0,
             exclude: tuple = ("ascii-art", "art")) -> TextCorpus:
    """The fortune files in `path` (each file without an extension; `exclude` leaves out the
    ones of pictures made of characters) as one text corpus, split into training and held-out
    validation text by entry: the entries are shuffled with `seed` and the last `validation`
    fraction is held out, so no entry is in both. Entries are joined by blank lines."""
    if not os.path.isdir(path):
        raise DatasetError(f"{path}: no such directory (install Debian's fortunes package: "
                           "apt-get install fortunes)")
    entries = []
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if "." in name or name in exclude or not os.path.isfile(full):
            continue
        with open(full, "rb") as f:
            text = f.read().decode("utf-8", errors="replace")
        entries += [e.strip("\n") for e in text.split("\n%\n") if e.strip()]
    if len(entries) < 10:
        raise DatasetError(f"{path}: found {len(entries)} fortune entries; expected the fortune "
                           "files of Debian's fortunes package")
    if not 0 < validation < 1:
        raise DatasetError(f"validation must be a fraction in (0, 1), got {validation}")
    order = np.random.default_rng(seed).permutation(len(entries))
    cut = len(entries) - max(1, int(round(validation * len(entries))))
    join = "\n\n".join
    return TextCorpus(join(entries[i] for i in order[:cut]),
                      join(entries[i] for i in order[cut:]), len(entries))


class CharVocabulary:
    """The characters of a text, sorted, as token ids 0..n-1 (a character-level language
    model's vocabulary); characters it does not hold encode as `unknown` (the first)."""

    def __init__(self, text_or_chars) -> None:
        chars = sorted(set(text_or_chars))
        if not chars:
            raise DatasetError("a vocabulary needs at least one character")
        self.chars = "".join(chars)
        self._index = {c: i for i, c in enumerate(self.chars)}

    def __len__(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        index = self._index
        return np.fromiter((index.get(c, 0) for c in text), dtype=np.int64, count=len(text))

    def decode(self, ids) -> str:
        chars = self.chars
        return "".join(chars[int(i)] for i in np.asarray(ids).ravel())
