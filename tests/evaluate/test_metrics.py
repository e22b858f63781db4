import itertools
import math

import numpy as np
import pytest

from sandgym.evaluate.metrics import (
    bootstrap_ci,
    consistency,
    normalized_gain,
    paired_test,
    pass_at_k,
    pass_hat_k,
    sign_flip_p_value,
)


def _pass_at_k_combinatorial(n: int, c: int, k: int) -> float:
    """Reference: the share of k-subsets of the n samples that contain at least one correct sample."""
    samples = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


def _pass_hat_k_combinatorial(n: int, c: int, k: int) -> float:
    samples = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(all(samples[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_pass_at_k_matches_combinatorial_definition(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(_pass_at_k_combinatorial(n, c, k), abs=1e-12)
            assert pass_hat_k(n, c, k) == pytest.approx(_pass_hat_k_combinatorial(n, c, k), abs=1e-12)


def test_pass_at_k_stable_for_large_n():
    # math.comb would overflow floats here; the product form stays finite and matches exact rationals.
    n, c, k = 2000, 3, 100
    exact = 1 - math.comb(n - c, k) / math.comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(exact, rel=1e-9)


def test_pass_at_k_rejects_bad_arguments():
    with pytest.raises(ValueError, match="n=3, c=4"):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_hat_k(3, 1, 4)


def test_consistency():
    assert consistency([True, True]) and consistency([False, False, False])
    assert not consistency([True, False])


def test_bootstrap_interval_covers_truth_at_nominal_rate():
    # 200 simulated evaluations of 40 tasks x 4 samples with a known success probability.
    rng = np.random.default_rng(1)
    truth, covered, trials = 0.3, 0, 200
    for t in range(trials):
        p_task = rng.beta(3, 7, size=40)  # mean 0.3, heterogeneous tasks
        clusters = [rng.random(4) < p for p in p_task]
        ci = bootstrap_ci([c.astype(float) for c in clusters], n_boot=400, seed=t)
        covered += ci.low <= truth <= ci.high
    rate = covered / trials
    assert 0.88 <= rate <= 0.99, rate


def test_bootstrap_point_and_order():
    ci = bootstrap_ci([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    assert ci.value == pytest.approx(0.5)
    assert ci.low <= ci.value <= ci.high


def test_paired_test_detects_consistent_gain_and_not_noise():
    base = {f"t{i}": [0.0, 0.0] for i in range(20)}
    better = {f"t{i}": [1.0, 0.0] for i in range(20)}
    res = paired_test(better, base)
    assert res.n_pairs == 20
    assert res.diff.value == pytest.approx(0.5)
    assert res.diff.low > 0 and res.p_value < 0.01
    same = paired_test(base, base)
    assert same.p_value == 1.0 and same.diff.value == 0.0


def test_sign_flip_exact_small_sample():
    # Two positive differences: of 4 sign patterns, 2 reach |mean| >= observed -> p = 0.5.
    assert sign_flip_p_value(np.array([1.0, 1.0])) == pytest.approx(0.5)


def test_normalized_gain():
    assert normalized_gain(0.6, 0.2) == pytest.approx(0.5)
    assert math.isnan(normalized_gain(1.0, 1.0))
