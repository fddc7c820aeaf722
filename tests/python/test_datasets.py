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


@pytest.mark.parametrize("labels,pattern", [
    (np.array([1, -1, 2], np.int8), r"labels must be unsigned integers \(IDX type 0x08\), "
                                    r"got int8"),
    (np.array([1.0, 3.7], np.float32), r"labels must be unsigned integers .* got float32"),
    (np.array([1, 2, 10, 3, 200], np.uint8), r"label 10 at index 2 is out of range 0\.\.9 "
                                             r"\(2 such labels\)"),
])
def test_bad_labels_are_refused_naming_the_file_and_value(tmp_path, labels, pattern):
    codes = {np.uint8: 0x08, np.int8: 0x09, np.float32: 0x0D}
    n = len(labels)
    write_idx(tmp_path / "t10k-images-idx3-ubyte", np.zeros((n, 28, 28), np.uint8))
    header = bytes([0, 0, codes[labels.dtype.type], 1]) + n.to_bytes(4, "big")
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(
        header + labels.astype(labels.dtype.newbyteorder(">")).tobytes())
    with pytest.raises(DatasetError, match=r"t10k-labels-idx1-ubyte: " + pattern):
        ng.datasets.mnist(str(tmp_path))


def test_huge_header_dimensions_name_the_file_dims_and_size(tmp_path):
    p = tmp_path / "huge.idx"
    header = bytes([0, 0, 0x0D, 3]) + b"".join(d.to_bytes(4, "big") for d in
                                              (2**32 - 1, 2**32 - 1, 2**32 - 1))
    p.write_bytes(header + b"\x00" * 16)
    with pytest.raises(DatasetError, match=(
            r"huge\.idx: truncated: header says shape \(4294967295, 4294967295, 4294967295\) "
            r"of float32 \(316912649\d+ bytes of data\), file has 16 after the 16-byte header "
            r"\(32 bytes in all\)")):
        load_idx(str(p))


def test_dataset_error_is_public_and_pickles():
    import pickle

    assert ng.DatasetError is DatasetError and issubclass(DatasetError, (ValueError,
                                                                        ng.NgraphError))
    e = pickle.loads(pickle.dumps(DatasetError("f.idx: bad")))
    assert type(e) is DatasetError and repr(e) == "DatasetError('f.idx: bad')"


def test_dimensions_whose_product_overflows_64_bits(tmp_path):
    """2**31 * 2**31 * 4 is 0 in int64: the old check passed a file with no data, and
    reshape raised a bare ValueError."""
    p = tmp_path / "wrap.idx"
    p.write_bytes(bytes([0, 0, 0x08, 3]) + b"".join(d.to_bytes(4, "big") for d in
                                                   (2**31, 2**31, 4)))
    with pytest.raises(DatasetError, match=r"wrap\.idx: truncated: header says shape "
                                           r"\(2147483648, 2147483648, 4\) of uint8 "
                                           r"\(18446744073709551616 bytes of data\), file has 0 "):
        load_idx(str(p))
