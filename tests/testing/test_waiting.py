"""``wait_for``, the one poll loop of the tests and tools."""

import pytest

from kbroker.testing.waiting import WaitTimeout, wait_for


def test_returns_the_first_truthy_value():
    answers = iter([None, 0, "", "ready", "later"])
    assert wait_for(lambda: next(answers), "an answer", timeout=5, interval=0) == "ready"


@pytest.mark.parametrize("caught", [TimeoutError, AssertionError])
def test_a_timeout_names_what_it_waited_for_and_is_caught_as(caught):
    with pytest.raises(caught, match="waiting for the moon") as raised:
        wait_for(lambda: False, "the moon", timeout=0, interval=0)
    assert isinstance(raised.value, WaitTimeout)
