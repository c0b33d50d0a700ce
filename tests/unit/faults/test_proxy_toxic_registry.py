"""The toxic registry and typed attributes, without a server: Go's names, types and rules."""

from __future__ import annotations

import dataclasses

import pytest

from zephon_chaos.faults.proxy import TOXIC_TYPES, gojson
from zephon_chaos.faults.proxy.toxics import Stage, kinds, lookup, register
from zephon_chaos.faults.proxy.toxics.attributes import go_fields
from zephon_chaos.faults.proxy.toxics.latency import LatencyToxic
from zephon_chaos.faults.proxy.toxics.slicer import SlicerToxic

GO_STRUCTS = {
    "noop": ("NoopToxic", {}),
    "latency": ("LatencyToxic", {"latency": "int64", "jitter": "int64"}),
    "bandwidth": ("BandwidthToxic", {"rate": "int64"}),
    "slow_close": ("SlowCloseToxic", {"delay": "int64"}),
    "timeout": ("TimeoutToxic", {"timeout": "int64"}),
    "reset_peer": ("ResetToxic", {"timeout": "int64"}),
    "slicer": ("SlicerToxic", {"average_size": "int", "size_variation": "int", "delay": "int"}),
    "limit_data": ("LimitDataToxic", {"bytes": "int64"}),
}


def test_the_built_in_types_are_toxiproxys_in_its_order() -> None:
    assert tuple(GO_STRUCTS) == TOXIC_TYPES
    for kind in kinds():
        struct, fields = GO_STRUCTS[kind.type_name]
        assert (kind.go_struct, go_fields(kind.attributes)) == (struct, fields)
        assert dataclasses.asdict(kind.attributes()) == dict.fromkeys(fields, 0)
        assert issubclass(kind.stage, Stage)


def test_decoding_keeps_what_the_body_leaves_out_or_nulls() -> None:
    base = LatencyToxic(latency=100, jitter=10)
    decoded = LatencyToxic.decode({"Latency": 7, "jitter": None, "other": "x"}, base)
    assert decoded == LatencyToxic(latency=7, jitter=10)
    assert LatencyToxic.decode(None, base) == base
    assert decoded.as_json() == {"latency": 7, "jitter": 10}


@pytest.mark.parametrize(
    ("cls", "value", "message"),
    [
        (LatencyToxic, {"latency": 1.5},
         "json: cannot unmarshal number 1.5 into Go struct field "
         "LatencyToxic.attributes.latency of type int64"),
        (SlicerToxic, {"delay": "1"},
         "json: cannot unmarshal string into Go struct field "
         "SlicerToxic.attributes.delay of type int"),
        (LatencyToxic, [1],
         "json: cannot unmarshal array into Go struct field .attributes of type "
         "toxics.LatencyToxic"),
    ],
)  # fmt: skip
def test_decoding_errors_are_gos(cls: type, value: object, message: str) -> None:
    with pytest.raises(gojson.GoJSONError) as caught:
        cls.decode(value, cls())
    assert str(caught.value) == message


def test_a_type_registered_twice_is_refused_and_the_first_kept() -> None:
    first = lookup("latency")
    with pytest.raises(ValueError, match="registered twice"):

        @register("latency", LatencyToxic)
        class Again(Stage[LatencyToxic]):
            pass

    assert lookup("latency") is first
