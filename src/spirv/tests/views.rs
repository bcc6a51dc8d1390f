//! Vector views of shared memory, 128-bit views of 16-bit buffers with u32 <-> f16x2 bitcasts,
//! cooperative matrices through vector views: every module passes spirv-val, misuse is rejected.

use super::common::{compile_and_validate, compile_ok};
use crate::ir::presets::permissive_caps;
use crate::spirv::compile;
use serde_json::{json, Value};

fn get(n: &str) -> Value {
    json!({"op": "get", "name": n})
}
fn u(v: u32) -> Value {
    json!({"op": "lit", "t": "u32", "v": v})
}
fn tid() -> Value {
    json!({"op": "builtin", "name": "local_index"})
}
fn cm(use_: &str, elem: &str, scope: &str) -> Value {
    json!({"coopmat": use_, "elem": elem, "rows": 16, "cols": 16, "scope": scope})
}

/// f16 and u32 shared arrays read and written as 2- and 4-wide vectors, scalars and atomics on
/// the same arrays; 128-bit u32x4 loads of an f16 binding unpacked with u32 -> f16x2 bitcasts.
#[test]
fn shared_vector_views_and_128_bit_unpacking() {
    let caps = permissive_caps();
    let k = json!({
        "version": 1, "name": "shared_views", "workgroup": [64],
        "bindings": [{"name": "a", "elem": "f16", "access": "read"}, {"name": "o", "elem": "f16", "access": "write"},
                     {"name": "cnt", "elem": "u32", "access": "write"}],
        "shared": [{"name": "h", "elem": "f16", "len": 512}, {"name": "w", "elem": "u32", "len": 256}],
        "body": [
            {"s": "let", "name": "t", "value": tid()},
            {"s": "let", "name": "q", "value": {"op": "load", "b": 0, "idx": get("t"), "vec": 4, "as": "u32"}},
            {"s": "store", "sh": "w", "idx": get("t"), "value": get("q")},
            {"s": "let", "name": "lo", "value": {"op": "bitcast", "t": "f16x2", "a": {"op": "swz", "a": get("q"), "c": "x"}}},
            {"s": "let", "name": "hi", "value": {"op": "bitcast", "t": "f16x2", "a": {"op": "swz", "a": get("q"), "c": "y"}}},
            {"s": "store", "sh": "h", "idx": get("t"), "value": {"op": "vec", "t": "f16x4", "args": [get("lo"), get("hi")]}},
            {"s": "store", "sh": "h", "idx": {"op": "add", "a": get("t"), "b": u(128)}, "value": get("lo")},
            {"s": "store", "sh": "h", "idx": u(511), "value": {"op": "lit", "t": "f16", "v": 1}},
            {"s": "barrier"},
            {"s": "let", "name": "v4", "value": {"op": "load", "sh": "h", "idx": get("t"), "vec": 4}},
            {"s": "let", "name": "v2", "value": {"op": "load", "sh": "h", "idx": get("t"), "vec": 2}},
            {"s": "let", "name": "s", "value": {"op": "load", "sh": "h", "idx": get("t")}},
            {"s": "let", "name": "wq", "value": {"op": "load", "sh": "w", "idx": get("t"), "vec": 2}},
            {"s": "eval", "value": {"op": "atomic", "fn": "add", "sh": "w", "idx": u(3), "a": u(1)}},
            {"s": "store", "b": 1, "idx": get("t"), "value": get("v4")},
            {"s": "store", "b": 1, "idx": {"op": "add", "a": get("t"), "b": u(64)}, "value": get("v2")},
            {"s": "store", "b": 1, "idx": get("t"), "value": get("s")},
            {"s": "store", "b": 1, "idx": get("t"), "as": "u32", "value": {"op": "bitcast", "t": "u32", "a": get("v2")}},
            {"s": "store", "b": 2, "idx": get("t"), "value": get("wq")}
        ]
    });
    compile_and_validate(&k, &caps);
}

/// Cooperative matrices through a 4-wide view of a shared f16 array and through a u32x4 shared
/// array: idx and stride count vectors.
#[test]
fn cooperative_matrices_through_vector_views() {
    let caps = permissive_caps();
    let k = json!({
        "version": 1, "name": "coop_views", "workgroup": [32],
        "bindings": [{"name": "a", "elem": "f16", "access": "read"}, {"name": "c", "elem": "f32", "access": "write"}],
        "shared": [{"name": "h", "elem": "f16", "len": 256}, {"name": "q", "elem": "u32x4", "len": 32}],
        "body": [
            {"s": "store", "sh": "h", "idx": tid(), "value": {"op": "load", "b": 0, "idx": tid(), "vec": 4}},
            {"s": "store", "sh": "q", "idx": tid(), "value": {"op": "load", "b": 0, "idx": tid(), "vec": 4, "as": "u32"}},
            {"s": "barrier"},
            {"s": "let", "name": "ma", "value": {"op": "cmload", "t": cm("a", "f16", "subgroup"), "sh": "h", "vec": 4, "idx": u(0), "stride": u(4), "layout": "row"}},
            {"s": "let", "name": "mb", "value": {"op": "cmload", "t": cm("b", "f16", "subgroup"), "sh": "q", "idx": u(0), "stride": u(2), "layout": "row"}},
            {"s": "let", "name": "r", "value": {"op": "cmmuladd", "a": get("ma"), "b": get("mb"), "c": {"op": "cmfill", "t": cm("acc", "f32", "subgroup"), "a": {"op": "lit", "t": "f32", "v": 0}}}},
            {"s": "cmstore", "sh": "h", "vec": 4, "idx": u(0), "stride": u(4), "layout": "row", "value": {"op": "cast", "t": cm("acc", "f16", "subgroup"), "a": get("r")}},
            {"s": "cmstore", "b": 1, "idx": u(0), "stride": u(16), "layout": "row", "value": get("r")}
        ]
    });
    compile_and_validate(&k, &caps);
}

fn err(desc: &Value) -> String {
    match compile(&desc.to_string(), &permissive_caps()) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn misused_shared_views_are_rejected() {
    let base = |shared: Value, body: Value| json!({"version": 1, "name": "bad", "workgroup": [32], "bindings": [], "shared": shared, "body": body});
    let h = json!([{"name": "h", "elem": "f16", "len": 256}]);
    let v4 = json!({"op": "vec", "t": "f16x4", "args": [{"op": "lit", "t": "f16", "v": 1}]});
    // A coopmat through the scalar view of an array that also has 4-wide views.
    let e = err(&base(h.clone(), json!([
        {"s": "store", "sh": "h", "idx": u(0), "value": v4},
        {"s": "let", "name": "m", "value": {"op": "cmload", "t": cm("a", "f16", "subgroup"), "sh": "h", "idx": u(0), "stride": u(16), "layout": "row"}}
    ])));
    assert!(e.contains("body[1].value") && e.contains("widest view"), "{e}");
    // Length not a multiple of the view width.
    let e = err(&base(json!([{"name": "h", "elem": "f16", "len": 6}]), json!([{"s": "store", "sh": "h", "idx": u(0), "value": v4}])));
    assert!(e.contains("shared[0].len"), "{e}");
    // `as` on shared memory, vec on a vector array, a 3-wide store.
    let e = err(&base(h.clone(), json!([{"s": "let", "name": "x", "value": {"op": "load", "sh": "h", "idx": u(0), "as": "u32"}}])));
    assert!(e.contains("as applies to bindings"), "{e}");
    let e = err(&base(json!([{"name": "q", "elem": "u32x4", "len": 4}]), json!([{"s": "let", "name": "x", "value": {"op": "load", "sh": "q", "idx": u(0), "vec": 2}}])));
    assert!(e.contains("arrays of scalars"), "{e}");
    let e = err(&base(h, json!([{"s": "store", "sh": "h", "idx": u(0), "value": {"op": "vec", "t": "f16x3", "args": [{"op": "lit", "t": "f16", "v": 1}]}}])));
    assert!(e.contains("cannot store"), "{e}");
    let _ = compile_ok;
}

/// Flash-attention style P·V: a workgroup-scope f32 accumulator converted to an f16 A matrix
/// (OpFConvert, then OpCooperativeMatrixConvertNV); subgroup scope is rejected with the hint.
#[test]
fn accumulator_to_a_conversion_at_workgroup_scope() {
    let caps = permissive_caps();
    let (ta, tb, tc) = (cm("a", "f16", "workgroup"), cm("b", "f16", "workgroup"), cm("acc", "f32", "workgroup"));
    let k = json!({
        "version": 1, "name": "acc_to_a", "workgroup": [128],
        "bindings": [{"name": "a", "elem": "f16", "access": "read"}, {"name": "c", "elem": "f32", "access": "write"}],
        "body": [
            {"s": "let", "name": "ma", "value": {"op": "cmload", "t": ta, "b": 0, "idx": u(0), "stride": u(16), "layout": "row"}},
            {"s": "let", "name": "mb", "value": {"op": "cmload", "t": tb, "b": 0, "idx": u(256), "stride": u(16), "layout": "row"}},
            {"s": "let", "name": "s", "value": {"op": "cmmuladd", "a": get("ma"), "b": get("mb"), "c": {"op": "cmfill", "t": tc, "a": {"op": "lit", "t": "f32", "v": 0}}}},
            {"s": "let", "name": "p", "value": {"op": "cast", "t": ta, "a": get("s")}},
            {"s": "let", "name": "o", "value": {"op": "cmmuladd", "a": get("p"), "b": get("mb"), "c": get("s")}},
            {"s": "cmstore", "b": 1, "idx": u(0), "stride": u(16), "layout": "row", "value": get("o")}
        ]
    });
    compile_and_validate(&k, &caps);
    let sub = json!({
        "version": 1, "name": "acc_to_a_sub", "workgroup": [32], "bindings": [],
        "body": [{"s": "let", "name": "p", "value": {"op": "cast", "t": cm("a", "f16", "subgroup"),
                  "a": {"op": "cmfill", "t": cm("acc", "f32", "subgroup"), "a": {"op": "lit", "t": "f32", "v": 0}}}}]
    });
    let e = err(&sub);
    assert!(e.contains("body[0].value") && e.contains("shared memory"), "{e}");
}
