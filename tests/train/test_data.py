"""train/data.py on small files written in the real formats.

MNIST IDX (raw and gzip, as yann.lecun.com ships them), Chainer-style .npz, and
an ImageNet-style list file of real JPEGs written with Pillow.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from train import data


def write_idx(path: Path, array: np.ndarray, gz: bool) -> Path:
    """IDX: two zero bytes, 0x08 (unsigned byte), ndim, big-endian uint32 dims, data."""
    payload = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    payload += array.astype(np.uint8).tobytes()
    if gz:
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(payload))
    else:
        path.write_bytes(payload)
    return path


@pytest.fixture
def digits():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(12, 28, 28), dtype=np.uint8)
    return images, rng.integers(0, 10, size=12).astype(np.uint8)


@pytest.mark.parametrize("gz", [False, True], ids=["raw", "gzip"])
def test_mnist_idx_images_and_labels(tmp_path, digits, gz):
    images, labels = digits
    img = write_idx(tmp_path / "train-images-idx3-ubyte", images, gz)
    write_idx(tmp_path / "train-labels-idx1-ubyte", labels, gz)
    for path in (img, tmp_path):  # the images file, or the directory holding both
        ds = data.load_dataset(str(path), "mlp", 224)
        assert ds.format == "mnist-idx"
        assert ds.sample_shape == (784,)
        x, y = ds.get(np.arange(12))
        assert x.dtype == np.float32
        np.testing.assert_allclose(x, images.reshape(12, 784) / 255.0, rtol=1e-6)
        np.testing.assert_array_equal(y, labels)


def test_mnist_idx_gives_images_to_resnet(tmp_path, digits):
    images, labels = digits
    write_idx(tmp_path / "train-images-idx3-ubyte", images, True)
    write_idx(tmp_path / "train-labels-idx1-ubyte", labels, True)
    ds = data.load_dataset(str(tmp_path), "resnet50", 224)
    assert ds.sample_shape == (1, 28, 28)


def test_mnist_without_labels_file_is_a_clear_error(tmp_path, digits):
    img = write_idx(tmp_path / "train-images-idx3-ubyte", digits[0], False)
    with pytest.raises(data.DataError, match=r"labels file .*train-labels-idx1-ubyte does not exist"):
        data.check_data_path(str(img))


def test_truncated_idx_is_a_clear_error(tmp_path, digits):
    img = write_idx(tmp_path / "train-images-idx3-ubyte", digits[0], False)
    write_idx(tmp_path / "train-labels-idx1-ubyte", digits[1], False)
    img.write_bytes(img.read_bytes()[:1000])
    data.check_data_path(str(img))  # the header is fine; the payload is not
    with pytest.raises(data.DataError, match="truncated"):
        data.load_dataset(str(img), "mlp", 224)


@pytest.mark.parametrize("keys", [("x", "y"), ("x_train", "y_train"), ("images", "labels")])
def test_npz(tmp_path, digits, keys):
    images, labels = digits
    path = tmp_path / "mnist.npz"
    np.savez(path, **{keys[0]: images, keys[1]: labels})
    ds = data.load_dataset(str(path), "mlp", 224)
    assert ds.format == "npz"
    x, y = ds.get(np.array([3, 5]))
    np.testing.assert_allclose(x, images[[3, 5]].reshape(2, 784) / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(y, labels[[3, 5]])


def test_npz_with_other_keys_names_them(tmp_path):
    path = tmp_path / "odd.npz"
    np.savez(path, a=np.zeros((2, 4)), b=np.zeros(2))
    with pytest.raises(data.DataError, match=r"it has \['a', 'b'\]"):
        data.load_dataset(str(path), "mlp", 224)


COLOURS = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255)}


@pytest.fixture
def image_list(tmp_path):
    """A list file with JPEGs of different sizes and aspect ratios in a sub-directory."""
    (tmp_path / "imgs" / "n01").mkdir(parents=True)
    lines = []
    for i, (name, rgb) in enumerate(COLOURS.items()):
        rel = f"imgs/n01/{name}.jpg"
        Image.new("RGB", (40 + 20 * i, 30 + 7 * i), rgb).save(tmp_path / rel, "JPEG", quality=95)
        lines.append(f"{rel} {i}")
    Image.new("L", (33, 33), 128).save(tmp_path / "imgs" / "grey.jpg", "JPEG")  # greyscale -> RGB
    lines.append("imgs/grey.jpg 3")
    listfile = tmp_path / "train.txt"
    listfile.write_text("\n".join(lines) + "\n")
    return listfile


def test_image_list_is_cropped_to_insize(image_list):
    ds = data.load_dataset(str(image_list), "resnet50", 16)
    assert ds.format == "list"
    assert ds.sample_shape == (3, 16, 16)
    x, y = ds.get(np.arange(4))
    assert x.shape == (4, 3, 16, 16) and x.dtype == np.float32
    np.testing.assert_array_equal(y, [0, 1, 2, 3])
    for i, rgb in enumerate(COLOURS.values()):
        np.testing.assert_allclose(x[i].mean(axis=(1, 2)), np.array(rgb) / 255.0, atol=0.05)
    np.testing.assert_allclose(x[3], 128 / 255.0, atol=0.05)


def test_image_list_flattened_for_mlp(image_list):
    ds = data.load_dataset(str(image_list), "mlp", 8)
    assert ds.sample_shape == (192,)
    assert ds.get(np.array([0]))[0].shape == (1, 192)


def test_image_list_with_missing_image_names_it(image_list, tmp_path):
    (tmp_path / "imgs" / "n01" / "green.jpg").unlink()
    with pytest.raises(data.DataError, match=r"imgs/n01/green\.jpg does not exist"):
        data.check_data_path(str(image_list))


def test_image_list_with_a_bad_line_names_the_line(tmp_path):
    listfile = tmp_path / "bad.txt"
    listfile.write_text("a.jpg 0\nb.jpg cat\n")
    with pytest.raises(data.DataError, match=r"bad\.txt:2: label 'cat' is not an integer"):
        data.read_list(str(listfile))


def test_missing_path():
    with pytest.raises(data.DataError, match="data path /no/such/mnist does not exist"):
        data.check_data_path("/no/such/mnist")


def test_shards_are_disjoint_and_cover_the_data(tmp_path, digits):
    images, _ = digits
    ds = data.ArrayDataset(images.reshape(12, -1).astype(np.float32), np.arange(12), "npz")
    shards = [set(data.Batches(ds, 2, rank, 3, seed=1).shard.tolist()) for rank in range(3)]
    assert set.union(*shards) == set(range(12))
    assert sum(len(s) for s in shards) == 12


def test_batches_wrap_around_a_small_shard():
    ds = data.ArrayDataset(np.arange(10, dtype=np.float32).reshape(5, 2), np.arange(5), "npz")
    b = data.Batches(ds, 4, 0, 1, seed=0)
    seen = np.concatenate([b.next()[1] for _ in range(5)])
    assert len(seen) == 20
    assert np.bincount(seen, minlength=5).tolist() == [4] * 5  # every sample equally often


@pytest.fixture
def class_folders(tmp_path):
    """ImageNet's layout: one directory per class, the images inside (and a stray non-image)."""
    root = tmp_path / "train"
    for name, rgb in COLOURS.items():
        (root / name).mkdir(parents=True)
        for k in range(2):
            Image.new("RGB", (30 + 5 * k, 24), rgb).save(root / name / f"{name}{k}.JPEG", "JPEG", quality=95)
    (root / "red" / "README.txt").write_text("not an image")
    return root


def test_class_folders_are_labelled_in_sorted_order(class_folders):
    assert data.detect_format(str(class_folders)) == "folder"
    ds = data.load_dataset(str(class_folders), "resnet50", 12)
    assert (ds.format, ds.classes, len(ds)) == ("folder", ["blue", "green", "red"], 6)
    x, y = ds.get(np.arange(6))
    assert x.shape == (6, 3, 12, 12)
    np.testing.assert_array_equal(y, [0, 0, 1, 1, 2, 2])
    for i, colour in enumerate(["blue", "blue", "green", "green", "red", "red"]):
        np.testing.assert_allclose(x[i].mean(axis=(1, 2)), np.array(COLOURS[colour]) / 255.0, atol=0.05)


def test_class_folders_without_images_are_refused(tmp_path):
    (tmp_path / "empty" / "cat").mkdir(parents=True)
    with pytest.raises(data.DataError, match=r"no images .* in its class directories \(cat\)"):
        data.check_data_path(str(tmp_path / "empty"))


def test_worker_processes_decode_the_same_batches_ahead(class_folders):
    ds = data.load_dataset(str(class_folders), "mlp", 8)
    inline = data.Batches(ds, 4, 0, 1, seed=3)
    ahead = data.Batches(ds, 4, 0, 1, seed=3, workers=2)
    try:
        assert ahead.workers == 2 and len(ahead.pending) == data.Batches.PREFETCH
        for _ in range(4):  # past the shard's end: the order wraps alike
            (x0, y0), (x1, y1) = inline.next(), ahead.next()
            np.testing.assert_array_equal(y0, y1)
            np.testing.assert_array_equal(x0, x1)
    finally:
        ahead.close()
    assert ahead.pool is None
