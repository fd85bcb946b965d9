"""npy blob storage and the min-max scaling, without a database."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from app.core import storage
from solver.scaling import MinMaxScaling


def test_dense_matrix_and_unicode_labels_round_trip_without_pickle():
    X = np.arange(12, dtype=np.float64).reshape(4, 3) / 7
    y = np.array(["benign", "malignant", "benign", "ü"])
    blobs = storage.matrix_to_blobs("X", X)
    assert list(blobs) == ["X"]
    np.testing.assert_array_equal(storage.blobs_to_matrix("X", blobs), X)
    back = storage.bytes_to_array(storage.array_to_bytes(y))
    assert back.dtype.kind == "U" and back.tolist() == y.tolist()


def test_csr_matrix_round_trips_as_four_blobs():
    X = sp.random(50, 20, density=0.1, format="csr", random_state=0)
    blobs = storage.matrix_to_blobs("X", X)
    assert sorted(blobs) == ["X.data", "X.indices", "X.indptr", "X.shape"]
    back = storage.blobs_to_matrix("X", blobs)
    assert sp.issparse(back) and back.shape == (50, 20)
    np.testing.assert_array_equal(back.toarray(), X.toarray())


def test_object_arrays_are_refused():
    with pytest.raises(TypeError):
        storage.array_to_bytes(np.array([{"a": 1}], dtype=object))


def test_minmax_maps_training_data_to_unit_interval_and_clips_new_data():
    X = np.array([[0.0, 10.0, 5.0], [2.0, 20.0, 5.0], [4.0, 15.0, 5.0]])
    s = MinMaxScaling.fit(X)
    np.testing.assert_allclose(s.transform(X), [[0, 0, 0], [0.5, 1, 0], [1, 0.5, 0]])
    # Out-of-range values clip; a constant feature keeps scale 1 (as scikit-learn's
    # MinMaxScaler), so it is 0 in training and its offset clips to [0, 1] later.
    np.testing.assert_allclose(s.transform(np.array([[-2.0, 30.0, 5.5]])), [[0, 1, 0.5]])
    again = MinMaxScaling.from_arrays(s.to_arrays())
    np.testing.assert_array_equal(again.transform(X), s.transform(X))
    # the scale is computed once and shared by every transform: it cannot be changed in place
    assert s.scale is s.scale
    with pytest.raises(ValueError, match="read-only"):
        s.scale[0] = 2.0


def test_minmax_on_sparse_keeps_sparsity_when_minimum_is_zero():
    X = sp.csr_matrix(np.array([[0.0, 2.0], [4.0, 0.0], [2.0, 1.0]]))
    s = MinMaxScaling.fit(X)
    out = s.transform(X)
    assert sp.issparse(out)
    np.testing.assert_allclose(out.toarray(), MinMaxScaling.fit(X.toarray()).transform(X.toarray()))


def test_minmax_on_sparse_with_negative_values_densifies_correctly():
    X = sp.csr_matrix(np.array([[-1.0, 2.0], [1.0, 0.0], [0.0, 1.0]]))
    out = MinMaxScaling.fit(X).transform(X)
    np.testing.assert_allclose(np.asarray(out), [[0, 1], [1, 0], [0.5, 0.5]])


def test_minmax_in_place_equals_the_copy_and_leaves_other_inputs_alone():
    rng = np.random.default_rng(1)
    s = MinMaxScaling.fit(rng.normal(size=(30, 4)))
    X = rng.normal(size=(10, 4)) * 2
    expected = s.transform(X)
    same = X.copy()
    assert s.transform(same, copy=False) is same  # scaled where it lies
    np.testing.assert_array_equal(same, expected)
    unclipped = (X - s.data_min) * s.scale
    np.testing.assert_array_equal(s.transform(X, clip=False, copy=False), unclipped)
    ints = np.arange(8).reshape(2, 4)  # not float64: a copy, the input untouched
    np.testing.assert_array_equal(s.transform(ints, copy=False), s.transform(ints.astype(float)))
    assert ints.dtype.kind == "i" and ints[1, 3] == 7
