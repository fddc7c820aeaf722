"""The IDX / MNIST reader: real files, and errors that name the file and what is wrong."""

import gzip
import pathlib

import ngraph as ng
import numpy as np
import pytest
from ngraph.datasets import DatasetError, load_idx

SHARED_MNIST = pathlib.Path(__file__).resolve().parents[3] / "shared" / "data" / "mnist"


def write_idx(path, array, compress=False):
    codes = {np.uint8: 0x08, np.int32: 0x0C, np.float32: 0x0D}
    header = bytes([0, 0, codes[array.dtype.type], array.ndim])
    header += b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    body = array.astype(array.dtype.newbyteorder(">")).tobytes()
    opener = gzip.open if compress else open
    with opener(path, "wb") as f:
        f.write(header + body)


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.float32])
def test_round_trip(tmp_path, compress, dtype):
    a = (np.arange(24).reshape(2, 3, 4) * 3).astype(dtype)
    p = tmp_path / "a.idx"
    write_idx(p, a, compress)
    b = load_idx(str(p))
    assert b.dtype == np.dtype(dtype) and b.shape == a.shape
    np.testing.assert_array_equal(a, b)


def test_missing_file_names_it(tmp_path):
    with pytest.raises(DatasetError, match=r"nope\.idx: file not found"):
        load_idx(str(tmp_path / "nope.idx"))


def test_truncated_file(tmp_path):
    p = tmp_path / "t.idx"
    write_idx(p, np.zeros((10, 4), np.uint8))
    p.write_bytes(p.read_bytes()[:-5])
    with pytest.raises(DatasetError, match=r"t\.idx: truncated: header says shape \(10, 4\)"):
        load_idx(str(p))


def test_not_idx(tmp_path):
    p = tmp_path / "x.idx"
    p.write_bytes(b"hello world, not an idx file")
    with pytest.raises(DatasetError, match=r"x\.idx: not an IDX file"):
        load_idx(str(p))


def test_corrupt_gzip(tmp_path):
    p = tmp_path / "c.idx.gz"
    write_idx(p, np.zeros((100, 100), np.uint8), compress=True)
    data = bytearray(p.read_bytes())
    data[len(data) // 2 :] = b"\x00" * (len(data) - len(data) // 2)
    p.write_bytes(bytes(data))
    with pytest.raises(DatasetError, match=r"c\.idx\.gz: "):
        load_idx(str(p))


def test_mnist_directory_errors(tmp_path):
    with pytest.raises(DatasetError, match="directory not found"):
        ng.datasets.mnist(str(tmp_path / "absent"))
    with pytest.raises(DatasetError, match="no MNIST-format files"):
        ng.datasets.mnist(str(tmp_path))
    # Labels that do not match the images.
    write_idx(tmp_path / "t10k-images-idx3-ubyte", np.zeros((5, 28, 28), np.uint8))
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", np.zeros(4, np.uint8))
    with pytest.raises(DatasetError, match="4 labels for 5 images"):
        ng.datasets.mnist(str(tmp_path))


@pytest.mark.skipif(not SHARED_MNIST.exists(), reason=f"{SHARED_MNIST} is not present")
def test_shared_mnist_digits():
    data = ng.datasets.mnist(str(SHARED_MNIST))
    assert data.train is None
    images, labels = data.test
    assert images.shape == (10000, 28, 28) and images.dtype == np.uint8
    assert labels.shape == (10000,) and set(np.unique(labels)) == set(range(10))
    assert list(labels[:5]) == [7, 2, 1, 0, 4]  # the well-known first test digits
    x = ng.datasets.flatten(images[:3])
    assert x.shape == (3, 784) and x.dtype == np.float32 and 0 <= x.min() and x.max() <= 1
