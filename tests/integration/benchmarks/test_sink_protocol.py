"""``benchmarks.sink_protocol`` against the emulator: it measures what it says it measures."""

from __future__ import annotations

import re

import pytest

from benchmarks.sink_protocol import main

pytestmark = pytest.mark.integration


def test_it_reports_the_driver_calls_of_checked_and_fresh_batches(capsys):
    main(["--batches", "4", "--rounds", "2"])
    lines = capsys.readouterr().out.splitlines()
    found = {
        m["kind"]: (int(m["batches"]), int(m["calls"]))
        for m in (
            re.match(
                r"(?P<kind>\w+) .*: (?P<batches>\d+) batches, FE calls per batch (?P<calls>\d+)",
                line,
            )
            for line in lines
        )
        if m
    }
    # get_load_state, begin, two look-ahead states, progress rows, commit, confirm; fresh: 4.
    assert found == {"checked": (4, 7), "fresh": (4, 4)}
