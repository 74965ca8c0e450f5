"""Exceptions and the executor-side loader travel between driver and executors."""

import inspect
import pickle
from collections.abc import Iterator

import pytest

from sinks import exceptions as sink_exceptions
from sinks.starrocks import errors as errs
from sinks.starrocks.config import StarRocksSinkConfig
from sinks.starrocks.loader import LoadPlan, PartitionLoader

pytestmark = pytest.mark.unit

OPTIONS = {
    "load-url": "fe:8030",
    "jdbc-url": "jdbc:mysql://fe:9030",
    "database-name": "shop",
    "table-name": "orders",
    "username": "u",
    "password": "pw-secret",
}


def _error_classes() -> Iterator[type[sink_exceptions.SinkError]]:
    for module in (sink_exceptions, errs):
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, sink_exceptions.SinkError):
                yield cls


@pytest.mark.parametrize("cls", sorted(set(_error_classes()), key=str))
def test_every_sink_error_survives_pickling_with_context(cls):
    err = cls("label=l table=t: boom", label="l", table="t", status="FAILED")
    clone = pickle.loads(pickle.dumps(err))
    assert type(clone) is cls
    assert str(clone) == "label=l table=t: boom"
    assert clone.context == {"label": "l", "table": "t", "status": "FAILED"}


def test_loader_pickles_with_its_plan():
    cfg = StarRocksSinkConfig.from_options(OPTIONS)
    loader = PartitionLoader(LoadPlan(cfg, {"orders": "cdc-q-1-0"}, True, 1))
    clone = pickle.loads(pickle.dumps(loader))
    assert clone.plan == loader.plan
    assert clone.plan.config.password.reveal() == "pw-secret"


def test_loader_pickles_with_cloudpickle_as_spark_does():
    from pyspark import cloudpickle

    cfg = StarRocksSinkConfig.from_options(OPTIONS)
    loader = PartitionLoader(LoadPlan(cfg, {"orders": "cdc-q-1-0"}, True, 1))
    clone = pickle.loads(cloudpickle.dumps(loader))
    assert clone.plan.labels == {"orders": "cdc-q-1-0"}


def test_typed_load_reports_survive_the_trip_and_rebuild_the_error_class():
    from sinks.starrocks.committer import load_error
    from sinks.starrocks.loader import TableReport, parse_reports

    report = TableReport("orders", rows=3, error_kind="terminal", error="too many filtered rows",
                         error_class="FilteredRowsError", error_url="http://be/e1")  # fmt: skip
    (typed,) = parse_reports([pickle.loads(pickle.dumps(report.as_dict()))])
    assert typed.failure is not None
    err = load_error(typed.failure, "l-1", "orders")
    assert isinstance(err, errs.FilteredRowsError)
    assert err.context == {"label": "l-1", "table": "orders", "error_url": "http://be/e1"}
    assert pickle.loads(pickle.dumps(typed)) == typed
