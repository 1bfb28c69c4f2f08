"""ITF: our encoding round-trips through the decoder, and Quint's --mbt output decodes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from wgk.conformance.cli.main import main
from wgk.conformance.traces.itf import (
    ItfError, ItfMap, ItfSet, Variant, decode, decode_value, encode_trace, encode_value, loads, plain,
    projections,
)
from wgk.conformance.oracle.replay import states
from wgk.conformance.traces.format import load_trace

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = [ROOT / "traces" / "incidents" / n for n in (
    "13-crash-at-every-phase.json", "12-target-moved-needs-repair.json",
    "acceptance-legacy-done-migration.json")] + [ROOT / "traces" / "peers" / "wg" / "v1" / "happy_land.json"]


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
def test_encode_decode_round_trips_every_state(path):
    trace = load_trace(path)
    doc = encode_trace(trace, states(trace))
    again = decode(json.loads(json.dumps(doc)))
    expected = [p for _, _, p in states(trace)]
    assert projections(again) == expected
    assert again.actions[0] == "init"
    assert again.actions[1:] == [s["request"]["kind"] if "request" in s else s["env"] for s in trace.steps]
    for st, step in zip(again.states[1:], trace.steps):
        assert plain(st["request"]) == step.get("request")


def test_encoding_uses_itf_value_forms():
    p = load_trace(SAMPLES[0])
    st = encode_trace(p, states(p))["states"][-1]
    assert st["now"] == {"#bigint": "0"}
    assert st["target"] == {"tag": "Some", "value": "c-a1"}
    assert st["tasks"]["#map"][0][0] == "a"
    task = st["tasks"]["#map"][0][1]
    assert task["plan"] == {"tag": "None", "value": {"#tup": []}}
    assert task["revision"] == {"#bigint": "12"}
    assert "#map" in task["receipts"] and "#set" in task["evidence"]
    assert encode_value([["probe-owner", "x"]], "evidence") == {"#set": [{"#tup": ["probe-owner", "x"]}]}


def test_decoder_reads_every_itf_form():
    v = decode_value({"#map": [[{"#tup": [{"#bigint": "1"}, "a"]}, {"#set": [{"#bigint": "-3"}]}]]})
    assert isinstance(v, ItfMap) and v.pairs == (((1, "a"), ItfSet((-3,))),)
    assert decode_value({"tag": "Some", "value": {"#bigint": "7"}}) == Variant("Some", 7)
    assert plain(decode_value({"tag": "None", "value": {"#tup": []}})) is None
    assert plain(decode_value({"tag": "Open", "value": {"#tup": []}})) == {"tag": "Open", "value": []}
    assert decode_value([{"#bigint": "2"}, True]) == [2, True]
    assert plain(decode_value({"#unserializable": "Set(Int)"})) == {"#unserializable": "Set(Int)"}


def test_quint_mbt_output_decodes():
    itf = loads((ROOT / "traces" / "itf" / "quint-mbt-lifecycle.itf.json").read_text())
    assert itf.meta["source"] == "lifecycle.qnt"
    assert "mbt::actionTaken" in itf.vars and "mbt::nondetPicks" in itf.vars
    assert itf.actions == ["init", "crash", "crash", "dispatch"]
    assert [plain(p) for p in itf.picks] == [{"t": None, "w": None}, {"t": 2, "w": "w1"},
                                             {"t": 2, "w": "w3"}, {"t": 1, "w": "w2"}]
    status = plain(itf.states[3]["status"])
    assert status == [[1, {"tag": "InProgress", "value": []}], [2, {"tag": "Open", "value": []}],
                      [3, {"tag": "Open", "value": []}]]
    assert plain(itf.states[0]["alive"]) == {"w1": True, "w2": True, "w3": True}


@pytest.mark.parametrize("doc,where", [
    ({"vars": []}, "/states"),
    ({"states": [{"x": {"#bigint": "zz"}}]}, "/states/0/x/#bigint"),
    ({"states": [{"x": {"#map": [[1]]}}]}, "/states/0/x/#map/0"),
])
def test_malformed_itf_names_the_position(doc, where):
    with pytest.raises(ItfError) as e:
        decode(doc)
    assert str(e.value).startswith(where)


def test_export_itf_cli(tmp_path, capsys):
    out = tmp_path / "13.itf.json"
    assert main(["export-itf", str(SAMPLES[0]), "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["states"] == len(load_trace(SAMPLES[0]).steps) + 1
    first = out.read_text()
    assert main(["export-itf", str(SAMPLES[0]), "--out", str(out)]) == 0
    assert out.read_text() == first                     # deterministic: no timestamps
    assert main(["export-itf", str(tmp_path / "none.json")]) == 2
