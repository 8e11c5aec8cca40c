"""The OpenClaw plugin's wire form hashes as OpenClaw hashes the live JavaScript value.

OpenClaw fingerprints the tool params and results its plugin hooks see with its canonical
serialiser (Spec §4.1); the plugin sends them as JSON (openclaw-plugin/src/wire.js, ``toWire``)
and the worker serialises that JSON canonically (streams.detection.canonical). For each value of
Spec §4.1's edge-case table that JavaScript can hand a plugin, the text the worker computes from
the plugin's JSON must be the text OpenClaw computes from the value itself (the table's right
column). Runs node on the plugin's own module; no broker.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from streams.detection.canonical import stable_stringify
from streams.detection.fingerprint import args_hash
from tests.worker_harness import ROOT

NODE = shutil.which("node")

# (JavaScript expression, OpenClaw's canonical text of that value: Spec §4.1 "Edge cases")
SAME = [
    ("({b: 1, a: 2})", '{"a":2,"b":1}'),
    ("({b: 1, B: 2, a: 3, A: 4})", '{"A":4,"B":2,"a":3,"b":1}'),
    ("({'10': 'x', '2': 'y', a: 'z'})", '{"10":"x","2":"y","a":"z"}'),
    ("[1.0, -0, 1e21, 1e-7, 2 ** 53 + 2]", "[1,0,1e+21,1e-7,9007199254740994]"),
    ("({n: NaN, i: Infinity, m: -Infinity})", '{"i":"Infinity","m":"-Infinity","n":"NaN"}'),
    ("({big: 12n})", '{"big":"12"}'),
    ("'a\"b\\\\c\\nd\\te'", '"a\\"b\\\\c\\nd\\te"'),
    ("'\\u0001'", '"\\u0001"'),
    ("'\\ud800'", '"\\ud800"'),
    ("'é😀\\u2028'", '"é😀\u2028"'),
    ("({f() {}, s: Symbol('s')})", '{"f":null,"s":null}'),
    ("[new Date(0), new Map([['a', 1]]), new Set([1]), /x/]", "[{},{},{},{}]"),
    ("new (class { constructor() { this.y = 2; this.x = 1; } })()", '{"x":1,"y":2}'),
    ("({b: 1, toJSON() { return 'x'; }})", '{"b":1,"toJSON":null}'),
    ("Object.assign(new Error('boom'), {stack: 'S'})", '{"message":"boom","name":"Error","stack":"S"}'),
    ("new Uint8Array([1, 2, 3])", '{"data":"AQID","type":"Uint8Array"}'),
    ("({b: Buffer.from([1, 2, 3])})", '{"b":{"data":"AQID","type":"Uint8Array"}}'),
    ("(() => { const o = {a: 1}; o.self = o; return o; })()", '{"a":1,"self":"[Circular]"}'),
    ("[new String('s'), new Number(3)]", '[{"0":"s"},{}]'),
]

# What JSON cannot carry; the plugin's README says so. OpenClaw writes the bare word undefined.
DIFFERENT = [
    ("({a: undefined, b: 1})", '{"a":undefined,"b":1}', '{"b":1}'),
    ("[1, undefined, 3]", "[1,undefined,3]", "[1,null,3]"),
]


def _wire(expressions: list[str]) -> list[object]:
    script = (
        "import { toWire } from './src/wire.js';\n"
        f"const values = [{', '.join(expressions)}];\n"
        "process.stdout.write(JSON.stringify(values.map((v) => toWire(v))));\n"
    )
    done = subprocess.run([NODE, "--input-type=module", "-e", script], cwd=ROOT / "openclaw-plugin",
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.skipif(NODE is None, reason="node is not installed (the OpenClaw plugin runs on Node)")
def test_plugin_json_serialises_canonically_as_openclaw_serialises_the_live_value():
    wired = _wire([expression for expression, _ in SAME])
    got = {expression: stable_stringify(value) for (expression, _), value in zip(SAME, wired)}
    assert got == {expression: expected for expression, expected in SAME}


@pytest.mark.skipif(NODE is None, reason="node is not installed (the OpenClaw plugin runs on Node)")
def test_undefined_inside_values_is_the_documented_difference():
    wired = _wire([expression for expression, _, _ in DIFFERENT])
    for (expression, openclaw, ours), value in zip(DIFFERENT, wired):
        assert stable_stringify(value) == ours != openclaw, expression


@pytest.mark.skipif(NODE is None, reason="node is not installed (the OpenClaw plugin runs on Node)")
def test_args_hash_of_the_plugins_tool_call_is_openclaws():
    # Spec §4.2's example: tool read, args {"path":"/workspace/notes.md"}
    [params] = _wire(["({path: '/workspace/notes.md'})"])
    assert args_hash("read", params) == "read:d358b22b4ff6f0515ebb0f5219842ac08c57d468c8f1d6d6bec0927dafb706a2"
