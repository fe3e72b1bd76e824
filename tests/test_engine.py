"""banmf.engine: the driver asks its backend what it can do, and refuses before any work what
the backend cannot; the polish it asks for follows the backend's capability."""

import numpy as np
import pytest

import banmf
import banmf.distributed as bd
from banmf.engine import Driver
from banmf.exceptions import InvalidParameterError
from banmf.runtime.signals import Interruptions

# The messages banmf.distributed.BANMF has always refused these with.
REFUSED = [
    ({"polish": "exact"}, "BANMF: polish must be one of False, True, 'flip', got 'exact'"),
    ({"polish": "auto"}, "BANMF: polish must be one of False, True, 'flip', got 'auto'"),
    (
        {"extra_starts": ("nmf", "grecond")},
        "BANMF: extra_starts must be a tuple of distinct values among 'nmf', 'columns', "
        "got ('nmf', 'grecond')",
    ),
    (
        {"polish": False, "swap": True},
        "swap=True polishes after each swap, and with polish=False banmf.BANMF uses its "
        "'auto' polish there, whose exact form is not distributed: set polish=True (flips) "
        "or swap=False",
    ),
]


class Blocks:
    """A minimal backend: a "columns" start that is exact (so no random start runs) and a
    polish that records the method it is asked for. Any other step is work it must not see."""

    def __init__(self, whole_columns: bool, m: int = 4):
        self.whole_columns = whole_columns
        self.m = m
        self.asked: list[tuple] = []

    def __getattr__(self, step):
        if step.startswith("__"):
            raise AttributeError(step)
        raise AssertionError(f"the driver asked for {step} of a fit it should refuse")

    def attempt(self, work):
        return work()

    def keep(self, best) -> None:
        self.asked.append(("keep", best))

    def greedy(self, name: str, k: int):
        self.asked.append(("greedy", name))
        return None, np.eye(k, self.m, dtype=bool), 0

    def polish(self, run: dict, method: str) -> dict:
        self.asked.append(("polish", method))
        return {"H": run.H, "error": run.error, "polish_rounds": 1}


def _fit(backend, **params):
    """The driver's fit of BANMF(2, **params) (greedy starts only) over ``backend``."""
    model = banmf.BANMF(2, **{"extra_starts": ("columns",), "combine": False, **params})
    p = model._check_params(2, (3, backend.m), 6)
    return Driver(model, backend, p, Interruptions()).fit(list(p.extra_starts))


@pytest.mark.parametrize("params, message", REFUSED)
def test_a_backend_without_whole_columns_is_refused_before_any_work(params, message):
    backend = Blocks(whole_columns=False)
    with pytest.raises(InvalidParameterError) as raised:
        _fit(backend, **params)
    assert str(raised.value) == message
    assert backend.asked == []


@pytest.mark.parametrize("params, message", REFUSED)
def test_the_same_fit_runs_on_a_backend_with_whole_columns(params, message):
    backend = Blocks(whole_columns=True)
    outcome = _fit(backend, **params)
    first = [name for name in outcome.extra][0]
    assert outcome.best[0] == first and backend.asked[0] == ("greedy", first)


@pytest.mark.parametrize(
    "whole_columns, polish, asked",
    [
        (True, True, "auto"),
        (False, True, "flip"),
        (True, "exact", "exact"),
        (False, "flip", "flip"),
    ],
)
def test_polish_true_flips_bits_without_whole_columns(whole_columns, polish, asked):
    """polish=True is "auto" (the exact polish where it is cheap) on a backend with whole
    columns; without them the driver asks for flips."""
    backend = Blocks(whole_columns)
    outcome = _fit(backend, polish=polish)
    assert ("polish", asked) in backend.asked
    assert outcome.best[1].refinement == {"columns": 0, "polish": 0}


def test_a_backend_that_cannot_combine_refuses_the_combination_before_any_work():
    backend = Blocks(whole_columns=True)
    with pytest.raises(InvalidParameterError, match="combine=True needs every start's factors"):
        _fit(backend, combine=True)
    assert backend.asked == []


@pytest.mark.parametrize("params, message", REFUSED)
def test_the_dask_estimator_refuses_before_it_asks_for_a_cluster(params, message, monkeypatch):
    def cluster(self):
        raise AssertionError("the cluster was asked for")

    monkeypatch.setattr(bd.BANMF, "_client", cluster)
    with pytest.raises(InvalidParameterError) as raised:
        bd.BANMF(**params).fit(np.eye(4))
    assert str(raised.value) == message
