"""Training data: synthetic tensors, MNIST (IDX or .npz) and ImageNet-style lists.

Every rank reads the same file and keeps a disjoint shard (``rank::size`` of
a seeded permutation), so no rank needs another rank's data. Formats:

* MNIST IDX, raw or gzipped (``train-images-idx3-ubyte[.gz]`` with its
  ``train-labels-idx1-ubyte[.gz]`` next to it; ``--data`` may name the images
  file or the directory holding both).
* ``.npz`` with arrays ``x``/``y`` (Chainer's MNIST cache), ``x_train``/``y_train``
  or ``images``/``labels``.
* A list file, one ``relative/path.jpg label`` per line, paths relative to the
  list file's directory (or ``--root``); images are resized (shorter side) and
  centre-cropped to the model's input size.
* An ImageNet-style class-folder directory (``train/<class>/<image>``): the
  classes in sorted order are labels 0, 1, ...; images as for a list file.

Images are decoded by ``--loaders`` worker processes (spawned, so they hold no
MPI state), a batch or two ahead of the one the loop takes: the decoding
overlaps training instead of sitting in the timed loop, and what is left of it
shows as data loading (the wait for the next batch).

``check_data_path`` runs before MPI starts and only touches the file system,
so a bad path fails every rank at once with the same message.
"""

from __future__ import annotations

import gzip
import os
import struct

import numpy as np

IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
NPZ_KEYS = (("x", "y"), ("x_train", "y_train"), ("images", "labels"))
MNIST_NAMES = ("train-images-idx3-ubyte", "train-images.idx3-ubyte")


class DataError(Exception):
    """A data file that is missing or not in a format this loader reads."""


def _open(path: str):
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gz else open(path, "rb")


def read_idx(path: str) -> np.ndarray:
    """Read one IDX file (raw or gzip) into an array of its declared shape."""
    with _open(path) as f:
        head = f.read(4)
        if len(head) != 4 or head[0] != 0 or head[1] != 0 or head[2] not in IDX_DTYPES:
            raise DataError(f"{path}: not an IDX file (bad magic number {head.hex()})")
        ndim = head[3]
        dims = struct.unpack(f">{ndim}I", f.read(4 * ndim))
        dtype = np.dtype(IDX_DTYPES[head[2]])
        count = int(np.prod(dims)) if dims else 1
        payload = f.read(count * dtype.itemsize)
    if len(payload) != count * dtype.itemsize:
        raise DataError(f"{path}: IDX file is truncated ({len(payload)} of {count * dtype.itemsize} bytes)")
    return np.frombuffer(payload, dtype=dtype).reshape(dims)


def _idx_pair(path: str) -> tuple[str, str]:
    """(images, labels) IDX paths for a directory or an images file."""
    if os.path.isdir(path):
        for name in MNIST_NAMES:
            for suffix in ("", ".gz"):
                cand = os.path.join(path, name + suffix)
                if os.path.exists(cand):
                    return _idx_pair(cand)
        raise DataError(f"{path}: directory holds no {MNIST_NAMES[0]}[.gz]")
    base = os.path.basename(path)
    labels_base = base.replace("images-idx3", "labels-idx1").replace("images.idx3", "labels.idx1")
    if labels_base == base:
        raise DataError(f"{path}: cannot tell the labels file of this IDX images file")
    labels = os.path.join(os.path.dirname(path), labels_base)
    if not os.path.exists(labels):
        alt = labels[:-3] if labels.endswith(".gz") else labels + ".gz"
        if os.path.exists(alt):
            labels = alt
        else:
            raise DataError(f"{path}: labels file {labels} does not exist")
    return path, labels


IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".webp")


def _is_mnist_dir(path: str) -> bool:
    return any(os.path.exists(os.path.join(path, name + sfx)) for name in MNIST_NAMES for sfx in ("", ".gz"))


def detect_format(path: str) -> str:
    """'mnist-idx', 'npz', 'folder' or 'list' for an existing data path."""
    if os.path.isdir(path):
        if not _is_mnist_dir(path) and any(e.is_dir() for e in os.scandir(path)):
            return "folder"
        return "mnist-idx"
    if path.endswith(".npz"):
        return "npz"
    with _open(path) as f:
        head = f.read(4)
    if len(head) == 4 and head[0] == 0 and head[1] == 0 and head[2] in IDX_DTYPES:
        return "mnist-idx"
    return "list"


def read_list(path: str) -> list[tuple[str, int]]:
    entries = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.rsplit(None, 1)
            if len(parts) != 2:
                raise DataError(f"{path}:{lineno}: expected 'relative/path.jpg label', got {line!r}")
            try:
                label = int(parts[1])
            except ValueError:
                raise DataError(f"{path}:{lineno}: label {parts[1]!r} is not an integer") from None
            entries.append((parts[0], label))
    if not entries:
        raise DataError(f"{path}: list file has no entries")
    return entries


def read_folder(path: str) -> tuple[list[tuple[str, int]], list[str]]:
    """(entries, classes) of a class-folder directory: every image under ``path/<class>/``,
    the class's index in sorted order as its label."""
    classes = sorted(e.name for e in os.scandir(path) if e.is_dir() and not e.name.startswith("."))
    entries = []
    for label, cls in enumerate(classes):
        for dirpath, dirnames, files in os.walk(os.path.join(path, cls)):
            dirnames.sort()
            rel = os.path.relpath(dirpath, path)
            entries += [(os.path.join(rel, f), label) for f in sorted(files)
                        if f.lower().endswith(IMAGE_SUFFIXES)]
    if not entries:
        raise DataError(f"{path}: no images ({', '.join(IMAGE_SUFFIXES)}) in its class directories "
                        f"({', '.join(classes[:5]) or 'none'})")
    return entries, classes


def check_data_path(path: str, root: str | None = None) -> None:
    """Raise DataError if ``path`` cannot be a data set; reads headers only."""
    if not os.path.exists(path):
        raise DataError(f"data path {path} does not exist")
    fmt = detect_format(path)
    if fmt == "mnist-idx":
        _idx_pair(path)
    elif fmt == "folder":
        read_folder(path)
    elif fmt == "list":
        entries = read_list(path)
        base = root or os.path.dirname(os.path.abspath(path))
        # A full scan of a 1.3M-line list costs minutes on NFS; the head catches a wrong --root.
        for rel, _ in entries[:100]:
            if not os.path.exists(os.path.join(base, rel)):
                raise DataError(f"{path}: image {os.path.join(base, rel)} does not exist (wrong --root?)")


def _to_float(x: np.ndarray) -> np.ndarray:
    if x.dtype == np.uint8:
        return x.astype(np.float32) / 255.0
    return x.astype(np.float32)


def shape_for_model(x: np.ndarray, model: str) -> np.ndarray:
    """Flatten samples for the MLP; give image models (N, C, H, W)."""
    if model == "mlp":
        return x.reshape(len(x), -1)
    if x.ndim == 3:
        return x[:, None, :, :]
    if x.ndim == 4 and x.shape[-1] in (1, 3) and x.shape[1] not in (1, 3):
        return x.transpose(0, 3, 1, 2)
    if x.ndim == 4:
        return x
    raise DataError(f"samples of shape {x.shape[1:]} are not images for model {model}")


class ArrayDataset:
    """Samples held in memory (MNIST, npz, synthetic)."""

    def __init__(self, x: np.ndarray, y: np.ndarray, fmt: str):
        if len(x) != len(y):
            raise DataError(f"{len(x)} samples but {len(y)} labels")
        if len(x) == 0:
            raise DataError("the data set is empty")
        self.x = np.ascontiguousarray(x)
        self.y = y.astype(np.int32).reshape(-1)
        self.format = fmt

    def __len__(self) -> int:
        return len(self.x)

    @property
    def sample_shape(self) -> tuple[int, ...]:
        return tuple(self.x.shape[1:])

    @property
    def max_label(self) -> int:
        return int(self.y.max())

    def get(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.x[idx], self.y[idx]


def decode_image(path: str, insize: int) -> np.ndarray:
    """One image as float32 CHW in [0, 1]: shorter side resized to ``insize``, centre-cropped."""
    from PIL import Image

    with Image.open(path) as im:
        im = im.convert("RGB")
        w, h = im.size
        scale = insize / min(w, h)
        im = im.resize((max(insize, round(w * scale)), max(insize, round(h * scale))), Image.BILINEAR)
        w, h = im.size
        left, top = (w - insize) // 2, (h - insize) // 2
        im = im.crop((left, top, left + insize, top + insize))
        arr = np.asarray(im, dtype=np.float32) / 255.0
    return arr.transpose(2, 0, 1)


def _decode(job: tuple[str, int]) -> np.ndarray:
    return decode_image(*job)


class ImageListDataset:
    """ImageNet-style list file or class-folder directory; images are decoded batch by batch."""

    def __init__(self, path: str, root: str | None, insize: int, model: str):
        if os.path.isdir(path):
            self.entries, self.classes = read_folder(path)
            self.root = path
            self.format = "folder"
        else:
            self.entries, self.classes = read_list(path), None
            self.root = root or os.path.dirname(os.path.abspath(path))
            self.format = "list"
        self.insize = insize
        self.model = model

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def sample_shape(self) -> tuple[int, ...]:
        shape = (3, self.insize, self.insize)
        return (int(np.prod(shape)),) if self.model == "mlp" else shape

    @property
    def max_label(self) -> int:
        return max(label for _, label in self.entries)

    def load_image(self, rel: str) -> np.ndarray:
        return decode_image(os.path.join(self.root, rel), self.insize)

    def jobs(self, idx: np.ndarray) -> list[tuple[str, int]]:
        return [(os.path.join(self.root, self.entries[i][0]), self.insize) for i in idx]

    def assemble(self, images: list[np.ndarray], idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        xs = np.stack(images)
        ys = np.array([self.entries[i][1] for i in idx], dtype=np.int32)
        if self.model == "mlp":
            xs = xs.reshape(len(xs), -1)
        return xs, ys

    def get(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.assemble([_decode(job) for job in self.jobs(idx)], idx)


def load_dataset(path: str, model: str, insize: int, root: str | None = None):
    """Open ``path`` in whichever supported format it is."""
    check_data_path(path, root)
    fmt = detect_format(path)
    if fmt == "mnist-idx":
        images, labels = _idx_pair(path)
        x = read_idx(images)
        y = read_idx(labels)
        return ArrayDataset(shape_for_model(_to_float(x), model), y, "mnist-idx")
    if fmt == "npz":
        with np.load(path) as z:
            for kx, ky in NPZ_KEYS:
                if kx in z and ky in z:
                    return ArrayDataset(shape_for_model(_to_float(z[kx]), model), z[ky], "npz")
            keys = sorted(z.keys())
        raise DataError(f"{path}: npz needs arrays x/y, x_train/y_train or images/labels; it has {keys}")
    return ImageListDataset(path, root, insize, model)


class SyntheticDataset:
    """One fixed random batch per rank, reused every iteration (no I/O)."""

    format = "synthetic"

    def __init__(self, sample_shape: tuple[int, ...], n_classes: int, batchsize: int, seed: int):
        rng = np.random.default_rng(seed)
        self.x = rng.standard_normal((batchsize, *sample_shape), dtype=np.float32)
        self.y = rng.integers(0, n_classes, size=batchsize).astype(np.int32)
        self.sample_shape = sample_shape

    def __len__(self) -> int:
        return len(self.x)


class Batches:
    """Endless batches from this rank's shard of a data set.

    With ``workers`` (image data only) a pool of spawned processes decodes the next
    ``PREFETCH`` batches while the current one trains.
    """

    PREFETCH = 2

    def __init__(self, dataset, batchsize: int, rank: int, size: int, seed: int, workers: int = 0,
                 holdout: int = 0):
        self.dataset = dataset
        self.batchsize = batchsize
        self.pool = None
        self.workers = 0  # decoding processes in use
        self.validation = None  # this rank's shard of the held-out samples
        if isinstance(dataset, SyntheticDataset):
            self.shard = None
            return
        perm = np.random.default_rng(seed).permutation(len(dataset))
        if holdout:
            if holdout < size or len(dataset) - holdout < size:
                raise DataError(f"--validation {holdout} of {len(dataset)} samples leaves {size} processes "
                                "without a validation or a training shard each")
            self.validation, perm = perm[:holdout][rank::size], perm[holdout:]
        self.shard = perm[rank::size]
        if len(self.shard) == 0:
            raise DataError(f"{len(dataset)} samples cannot give each of {size} processes a shard")
        self.pos = 0
        if workers > 0 and hasattr(dataset, "jobs"):
            import multiprocessing

            # spawned, not forked: a fork of an MPI process may take its connections along
            self.pool = multiprocessing.get_context("spawn").Pool(workers)
            self.workers = workers
            self.pending = []
            for _ in range(self.PREFETCH):
                self._submit()

    def _indices(self) -> np.ndarray:
        n = len(self.shard)
        idx = self.shard[np.arange(self.pos, self.pos + self.batchsize) % n]
        self.pos = (self.pos + self.batchsize) % n
        return idx

    def _submit(self) -> None:
        idx = self._indices()
        jobs = self.dataset.jobs(idx)
        chunk = max(1, len(jobs) // (4 * self.workers))
        self.pending.append((idx, self.pool.map_async(_decode, jobs, chunksize=chunk)))

    def next(self) -> tuple[np.ndarray, np.ndarray]:
        if self.shard is None:
            return self.dataset.x, self.dataset.y
        if self.pool is None:
            return self.dataset.get(self._indices())
        idx, result = self.pending.pop(0)
        self._submit()
        return self.dataset.assemble(result.get(), idx)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
            self.pool = None
