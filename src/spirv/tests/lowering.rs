//! Every IR feature compiles to SPIR-V that passes spirv-val (vulkan1.3).

use super::common;

use common::{compile_and_validate, kernel};
use crate::ir::presets::permissive_caps;
use serde_json::json;

fn get(n: &str) -> serde_json::Value {
    json!({"op": "get", "name": n})
}
fn lit(t: &str, v: serde_json::Value) -> serde_json::Value {
    json!({"op": "lit", "t": t, "v": v})
}
fn gid() -> serde_json::Value {
    json!({"op": "swz", "a": {"op": "builtin", "name": "global_id"}, "c": "x"})
}

/// out[i] = op(a[i], b[i]) for every binary op on every type that has it.
#[test]
fn binary_ops_all_types() {
    let caps = permissive_caps();
    let cases: &[(&str, &[&str])] = &[
        ("f32", &["add", "sub", "mul", "div", "rem", "min", "max", "pow", "atan2", "step"]),
        ("f16", &["add", "sub", "mul", "div", "rem", "min", "max", "pow"]),
        ("i32", &["add", "sub", "mul", "div", "rem", "min", "max", "band", "bor", "bxor", "shl", "shr"]),
        ("u32", &["add", "sub", "mul", "div", "rem", "min", "max", "band", "bor", "bxor", "shl", "shr"]),
    ];
    for (t, ops) in cases {
        for op in *ops {
            let body = json!([
                {"s": "let", "name": "i", "value": gid()},
                {"s": "store", "b": 2, "idx": get("i"), "value": {"op": op,
                    "a": {"op": "load", "b": 0, "idx": get("i")},
                    "b": {"op": "load", "b": 1, "idx": get("i")}}}
            ]);
            let k = kernel(
                &format!("bin_{op}_{t}"),
                json!([{"name": "a", "elem": t, "access": "read"}, {"name": "b", "elem": t, "access": "read"}, {"name": "o", "elem": t, "access": "write"}]),
                json!([]),
                body,
            );
            compile_and_validate(&k, &caps);
        }
    }
}

#[test]
fn unary_math_compare_select_cast() {
    let caps = permissive_caps();
    let x = json!({"op": "load", "b": 0, "idx": get("i")});
    let mut body = vec![json!({"s": "let", "name": "i", "value": gid()}), json!({"s": "let", "name": "x", "value": x})];
    for (n, op) in ["exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sin", "cos", "abs", "floor", "ceil", "round", "trunc", "fract", "sign", "neg"].iter().enumerate() {
        body.push(json!({"s": "let", "name": format!("u{n}"), "value": {"op": op, "a": get("x")}}));
    }
    body.push(json!({"s": "let", "name": "f", "value": {"op": "fma", "a": get("x"), "b": get("u0"), "c": get("u1")}}));
    body.push(json!({"s": "let", "name": "c", "value": {"op": "clamp", "a": get("f"), "b": lit("f32", json!(0)), "c": lit("f32", json!(1))}}));
    body.push(json!({"s": "let", "name": "m", "value": {"op": "mix", "a": get("f"), "b": get("c"), "c": lit("f32", json!(0.5))}}));
    body.push(json!({"s": "let", "name": "lt", "value": {"op": "lt", "a": get("m"), "b": get("x")}}));
    body.push(json!({"s": "let", "name": "ne", "value": {"op": "ne", "a": get("m"), "b": lit("f32", json!("nan"))}}));
    body.push(json!({"s": "let", "name": "both", "value": {"op": "xor", "a": {"op": "and", "a": get("lt"), "b": get("ne")}, "b": {"op": "not", "a": get("lt")}}}));
    body.push(json!({"s": "let", "name": "s", "value": {"op": "select", "c": get("both"), "a": get("m"), "b": lit("f32", json!("-inf"))}}));
    body.push(json!({"s": "let", "name": "h", "value": {"op": "cast", "t": "f16", "a": get("s")}}));
    body.push(json!({"s": "let", "name": "bf", "value": {"op": "cast", "t": "bf16", "a": get("s")}}));
    body.push(json!({"s": "let", "name": "k", "value": {"op": "cast", "t": "i32", "a": {"op": "cast", "t": "f32", "a": get("h")}}}));
    body.push(json!({"s": "let", "name": "ku", "value": {"op": "cast", "t": "u32", "a": get("k")}}));
    body.push(json!({"s": "let", "name": "kb", "value": {"op": "cast", "t": "bool", "a": get("ku")}}));
    body.push(json!({"s": "let", "name": "kf", "value": {"op": "cast", "t": "f32", "a": get("kb")}}));
    body.push(json!({"s": "let", "name": "bits", "value": {"op": "bitcast", "t": "u32", "a": get("kf")}}));
    body.push(json!({"s": "let", "name": "back", "value": {"op": "cast", "t": "f32", "a": get("bf")}}));
    body.push(json!({"s": "store", "b": 1, "idx": get("i"), "value": {"op": "add", "a": get("back"), "b": {"op": "bitcast", "t": "f32", "a": get("bits")}}}));
    let k = kernel("unary_mix", json!([{"name": "a", "elem": "f32", "access": "read"}, {"name": "o", "elem": "f32", "access": "write"}]), json!([]), json!(body));
    compile_and_validate(&k, &caps);
}

#[test]
fn vectors_views_push_spec_loops() {
    let caps = permissive_caps();
    let k = json!({
        "version": 1, "name": "vec_loop", "workgroup": ["WG", 1, 1],
        "spec": [{"name": "WG", "id": 0, "type": "u32", "value": 128}, {"name": "ON", "id": 1, "type": "bool", "value": true},
                 {"name": "SCALE", "id": 2, "type": "f32", "value": 0.5}],
        "bindings": [{"name": "a", "elem": "f32", "access": "read"}, {"name": "o", "elem": "f32", "access": "readwrite"}],
        "push": [{"name": "n", "type": "u32"}, {"name": "alpha", "type": "f32"}, {"name": "off", "type": "u32x2"}, {"name": "v4", "type": "f32x4"}],
        "body": [
            {"s": "let", "name": "i", "value": gid()},
            {"s": "if", "cond": {"op": "ge", "a": get("i"), "b": {"op": "push", "name": "n"}}, "then": [{"s": "return"}]},
            {"s": "var", "name": "acc", "type": "f32x4", "init": {"op": "vec", "t": "f32x4", "args": [lit("f32", json!(0))]}},
            {"s": "var", "name": "regs", "type": "f32", "len": 4},
            {"s": "for", "var": "j", "from": lit("u32", json!(0)), "to": lit("u32", json!(4)), "unroll": true, "body": [
                {"s": "set", "name": "regs", "idx": get("j"), "value": {"op": "cast", "t": "f32", "a": get("j")}},
                {"s": "set", "name": "acc", "value": {"op": "add", "a": get("acc"), "b": {"op": "mul",
                    "a": {"op": "load", "b": 0, "idx": get("i"), "vec": 4}, "b": {"op": "push", "name": "alpha"}}}}
            ]},
            {"s": "var", "name": "k", "type": "i32", "init": lit("i32", json!(10))},
            {"s": "while", "cond": {"op": "gt", "a": get("k"), "b": lit("i32", json!(0))}, "body": [
                {"s": "set", "name": "k", "value": {"op": "sub", "a": get("k"), "b": lit("i32", json!(3))}},
                {"s": "if", "cond": {"op": "eq", "a": get("k"), "b": lit("i32", json!(4))}, "then": [{"s": "continue"}]},
                {"s": "if", "cond": {"op": "spec", "name": "ON"}, "then": [{"s": "break"}], "else": [{"s": "set", "name": "k", "value": lit("i32", json!(-1))}]}
            ]},
            {"s": "loop", "body": [{"s": "break"}]},
            {"s": "let", "name": "d", "value": {"op": "dot", "a": get("acc"), "b": {"op": "push", "name": "v4"}}},
            {"s": "let", "name": "sw", "value": {"op": "swz", "a": get("acc"), "c": "wzy"}},
            {"s": "let", "name": "o2", "value": {"op": "swz", "a": {"op": "push", "name": "off"}, "c": "y"}},
            {"s": "let", "name": "lane", "value": {"op": "get", "name": "acc", "idx": lit("u32", json!(2))}},
            {"s": "store", "b": 1, "idx": get("i"), "value": {"op": "add", "a": {"op": "add", "a": get("d"), "b": {"op": "swz", "a": get("sw"), "c": "x"}},
                "b": {"op": "mul", "a": get("lane"), "b": {"op": "get", "name": "regs", "idx": {"op": "rem", "a": get("o2"), "b": lit("u32", json!(4))}}}}},
            {"s": "store", "b": 1, "idx": lit("u32", json!(0)), "value": {"op": "vec", "t": "f32x4", "args": [{"op": "spec", "name": "SCALE"}, lit("f32", json!(1)), lit("f32x2", json!([2, 3]))]}}
        ]
    });
    compile_and_validate(&k, &caps);
}

#[test]
fn shared_barriers_subgroups_atomics() {
    let caps = permissive_caps();
    let x = json!({"op": "load", "b": 0, "idx": get("i")});
    let k = json!({
        "version": 1, "name": "sg_atomics", "workgroup": [64],
        "bindings": [{"name": "a", "elem": "f32", "access": "read"}, {"name": "o", "elem": "f32", "access": "write"},
                     {"name": "cnt", "elem": "u32", "access": "readwrite"}, {"name": "fs", "elem": "f32", "access": "readwrite"},
                     {"name": "ic", "elem": "i32", "access": "readwrite"}],
        "shared": [{"name": "tile", "elem": "f32", "len": 64}, {"name": "hist", "elem": "u32", "len": 16}, {"name": "v4", "elem": "f32x4", "len": 8}],
        "body": [
            {"s": "let", "name": "i", "value": gid()},
            {"s": "let", "name": "t", "value": {"op": "builtin", "name": "local_index"}},
            {"s": "let", "name": "x", "value": x},
            {"s": "store", "sh": "tile", "idx": get("t"), "value": get("x")},
            {"s": "barrier"},
            {"s": "barrier", "scope": "workgroup", "mem": ["workgroup", "storage"]},
            {"s": "fence", "mem": ["storage"]},
            {"s": "barrier", "scope": "subgroup", "mem": ["workgroup"]},
            {"s": "let", "name": "y", "value": {"op": "load", "sh": "tile", "idx": {"op": "bxor", "a": get("t"), "b": lit("u32", json!(1))}}},
            {"s": "let", "name": "r", "value": {"op": "sg", "fn": "add", "mode": "reduce", "a": get("y")}},
            {"s": "let", "name": "inc", "value": {"op": "sg", "fn": "max", "mode": "inclusive", "a": get("y")}},
            {"s": "let", "name": "exc", "value": {"op": "sg", "fn": "min", "mode": "exclusive", "a": {"op": "cast", "t": "i32", "a": get("y")}}},
            {"s": "let", "name": "bo", "value": {"op": "sg", "fn": "and", "mode": "reduce", "a": {"op": "gt", "a": get("y"), "b": lit("f32", json!(0))}}},
            {"s": "let", "name": "sh", "value": {"op": "shuffle", "a": get("y"), "b": lit("u32", json!(3))}},
            {"s": "let", "name": "sx", "value": {"op": "shuffle_xor", "a": get("y"), "b": lit("u32", json!(1))}},
            {"s": "let", "name": "bc", "value": {"op": "broadcast", "a": get("y"), "b": lit("u32", json!(0))}},
            {"s": "let", "name": "bf", "value": {"op": "broadcast_first", "a": get("y")}},
            {"s": "let", "name": "el", "value": {"op": "elect"}},
            {"s": "let", "name": "al", "value": {"op": "sg_all", "a": get("bo")}},
            {"s": "let", "name": "an", "value": {"op": "sg_any", "a": get("el")}},
            {"s": "let", "name": "sid", "value": {"op": "add", "a": {"op": "builtin", "name": "subgroup_id"}, "b": {"op": "add",
                "a": {"op": "builtin", "name": "subgroup_size"}, "b": {"op": "add", "a": {"op": "builtin", "name": "subgroup_invocation"}, "b": {"op": "builtin", "name": "num_subgroups"}}}}},
            {"s": "if", "cond": {"op": "or", "a": get("el"), "b": {"op": "and", "a": get("al"), "b": get("an")}}, "then": [
                {"s": "eval", "value": {"op": "atomic", "fn": "add", "b": 2, "idx": lit("u32", json!(0)), "a": get("sid")}},
                {"s": "eval", "value": {"op": "atomic", "fn": "add", "b": 3, "idx": lit("u32", json!(0)), "a": get("r")}},
                {"s": "eval", "value": {"op": "atomic", "fn": "max", "b": 4, "idx": lit("u32", json!(0)), "a": get("exc")}},
                {"s": "eval", "value": {"op": "atomic", "fn": "cas", "b": 4, "idx": lit("u32", json!(1)), "a": get("exc"), "cmp": lit("i32", json!(0))}},
                {"s": "eval", "value": {"op": "atomic", "fn": "or", "sh": "hist", "idx": lit("u32", json!(1)), "a": get("sid")}},
                {"s": "eval", "value": {"op": "atomic", "fn": "exchange", "b": 3, "idx": lit("u32", json!(1)), "a": get("inc")}}
            ]},
            {"s": "store", "sh": "v4", "idx": lit("u32", json!(0)), "value": {"op": "vec", "t": "f32x4", "args": [get("sh"), get("sx"), get("bc"), get("bf")]}},
            {"s": "store", "b": 1, "idx": get("i"), "value": {"op": "swz", "a": {"op": "load", "sh": "v4", "idx": lit("u32", json!(0))}, "c": "x"}}
        ]
    });
    compile_and_validate(&k, &caps);
}

fn cm(use_: &str, elem: &str, r: u32, c: u32, scope: &str) -> serde_json::Value {
    json!({"coopmat": use_, "elem": elem, "rows": r, "cols": c, "scope": scope})
}

fn coop_kernel(name: &str, ab: &str, acc: &str, scope: &str, dims: (u32, u32, u32)) -> serde_json::Value {
    let (m, n, kk) = dims;
    let ta = cm("a", ab, m, kk, scope);
    let tb = cm("b", ab, kk, n, scope);
    let tc = cm("acc", acc, m, n, scope);
    json!({
        "version": 1, "name": name, "workgroup": [if scope == "workgroup" { 128 } else { 32 }],
        "bindings": [{"name": "a", "elem": ab, "access": "read"}, {"name": "b", "elem": ab, "access": "read"}, {"name": "c", "elem": acc, "access": "write"},
                     {"name": "c16", "elem": "f16", "access": "write"}],
        "shared": [{"name": "sa", "elem": ab, "len": m * kk}],
        "push": [{"name": "k", "type": "u32"}],
        "body": [
            {"s": "var", "name": "acc", "type": tc, "init": {"op": "cmfill", "t": tc, "a": lit(acc, json!(0))}},
            {"s": "var", "name": "accs", "type": tc, "len": 2},
            {"s": "set", "name": "accs", "idx": lit("u32", json!(1)), "value": {"op": "cmfill", "t": tc, "a": lit(acc, json!(1))}},
            {"s": "for", "var": "kk", "from": lit("u32", json!(0)), "to": {"op": "push", "name": "k"}, "step": lit("u32", json!(kk)), "body": [
                {"s": "store", "sh": "sa", "idx": {"op": "builtin", "name": "local_index"}, "value": {"op": "load", "b": 0, "idx": {"op": "builtin", "name": "local_index"}}},
                {"s": "barrier"},
                {"s": "let", "name": "ma", "value": {"op": "cmload", "t": ta, "sh": "sa", "idx": lit("u32", json!(0)), "stride": lit("u32", json!(kk)), "layout": "row"}},
                {"s": "let", "name": "mb", "value": {"op": "cmload", "t": tb, "b": 1, "idx": {"op": "mul", "a": get("kk"), "b": lit("u32", json!(n))}, "stride": lit("u32", json!(n)), "layout": "col"}},
                {"s": "set", "name": "acc", "value": {"op": "cmmuladd", "a": get("ma"), "b": get("mb"), "c": get("acc")}},
                {"s": "barrier"}
            ]},
            {"s": "set", "name": "acc", "value": {"op": "add", "a": {"op": "mul", "a": get("acc"), "b": lit(acc, json!(2))},
                "b": {"op": "get", "name": "accs", "idx": lit("u32", json!(1))}}},
            {"s": "for", "var": "e", "from": lit("u32", json!(0)), "to": {"op": "cmlen", "t": tc}, "body": [
                {"s": "set", "name": "acc", "idx": get("e"), "value": {"op": "max", "a": {"op": "get", "name": "acc", "idx": get("e")}, "b": lit(acc, json!(0))}}
            ]},
            {"s": "cmstore", "b": 2, "idx": lit("u32", json!(0)), "stride": lit("u32", json!(n)), "layout": "row", "value": {"op": "neg", "a": get("acc")}},
            {"s": "cmstore", "b": 3, "idx": lit("u32", json!(0)), "stride": lit("u32", json!(n)), "layout": "row",
                "value": {"op": "cast", "t": cm("acc", "f16", m, n, scope), "a": get("acc")}}
        ]
    })
}

#[test]
fn cooperative_matrices() {
    let caps = permissive_caps();
    compile_and_validate(&coop_kernel("coop_f16_f32", "f16", "f32", "subgroup", (16, 16, 16)), &caps);
    compile_and_validate(&coop_kernel("coop_f16_f16", "f16", "f16", "subgroup", (16, 8, 16)), &caps);
}

#[test]
fn cooperative_matrices_bf16_and_workgroup_scope() {
    let caps = permissive_caps();
    // bf16 coopmat arithmetic is limited to muladd/cast: build a kernel without the epilogue ops.
    let k = coop_kernel("coop_bf16", "bf16", "f32", "subgroup", (16, 16, 16));
    compile_and_validate(&k, &caps);
    let k = coop_kernel("coop_wg_f16", "f16", "f32", "workgroup", (32, 32, 16));
    common::compile_ok(&k, &caps);
}

#[test]
fn spirv_val_harness_rejects_garbage() {
    if common::spirv_val_path().is_none() {
        return;
    }
    assert!(common::spirv_val("garbage", &[0x0723_0203, 0x0001_0600, 0, 5, 0]).is_err());
}

#[test]
fn layout_reports_bindings_push_and_spec() {
    let k = json!({
        "version": 1, "name": "layout", "workgroup": ["X", 2],
        "spec": [{"name": "X", "id": 3, "type": "u32", "value": 32}, {"name": "S", "id": 7, "type": "f32", "value": 1.5}],
        "bindings": [{"name": "a", "elem": "f32", "access": "read"}, {"name": "b", "elem": "u32", "access": "readwrite"}, {"name": "c", "elem": "f16", "access": "write"}],
        "push": [{"name": "n", "type": "u32"}, {"name": "v", "type": "f32x4"}, {"name": "s", "type": "f32"}],
        "subgroupSize": 32,
        "body": []
    });
    let c = compile_and_validate(&k, &permissive_caps());
    use crate::caps::Access;
    assert_eq!(c.layout.bindings, vec![Access::Read, Access::ReadWrite, Access::Write]);
    // n at 0, v aligned to 16, s at 32: 36 bytes
    assert_eq!(c.layout.push_constant_bytes, 36);
    assert_eq!(c.layout.specialization, vec![(3, 32), (7, 1.5f32.to_bits())]);
    assert_eq!(c.layout.required_subgroup_size, Some(32));
    assert_eq!(c.layout.entry_point, "main");
}

#[test]
fn memo_returns_the_same_module_for_the_same_text() {
    let cache = crate::spirv::cache::KernelCache::new();
    let caps = permissive_caps();
    let k = kernel("memo", json!([{"name": "o", "elem": "f32", "access": "write"}]), json!([]),
        json!([{"s": "store", "b": 0, "idx": gid(), "value": lit("f32", json!(1))}])).to_string();
    let (h1, a) = cache.get_or_compile(&k, &caps, false).unwrap_or_else(|e| panic!("{e}"));
    let (h2, b) = cache.get_or_compile(&k, &caps, false).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(h1, h2);
    assert!(std::sync::Arc::ptr_eq(&a, &b));
    assert_eq!(cache.len(), 1);
}

/// 128-bit copies of f16 data (u32x4 views and shared arrays) feeding f16 cooperative matrices:
/// the coopmat is loaded from memory of another element type, idx/stride in those elements.
#[test]
fn reinterpreted_views_feed_cooperative_matrices() {
    let caps = permissive_caps();
    let ta = cm("a", "f16", 16, 16, "subgroup");
    let tb = cm("b", "f16", 16, 16, "subgroup");
    let tc = cm("acc", "f32", 16, 16, "subgroup");
    let t = json!({"op": "builtin", "name": "local_index"});
    let k = json!({
        "version": 1, "name": "views128", "workgroup": [32],
        "bindings": [{"name": "a", "elem": "f16", "access": "read"}, {"name": "b", "elem": "f16", "access": "read"},
                     {"name": "c", "elem": "f32", "access": "readwrite"}],
        "shared": [{"name": "sa", "elem": "u32x4", "len": 32}],
        "body": [
            {"s": "store", "sh": "sa", "idx": t, "value": {"op": "load", "b": 0, "idx": t, "vec": 4, "as": "u32"}},
            {"s": "barrier"},
            {"s": "let", "name": "ma", "value": {"op": "cmload", "t": ta, "sh": "sa", "idx": lit("u32", json!(0)), "stride": lit("u32", json!(2)), "layout": "row"}},
            {"s": "let", "name": "mb", "value": {"op": "cmload", "t": tb, "b": 1, "vec": 4, "as": "u32", "idx": lit("u32", json!(0)), "stride": lit("u32", json!(2)), "layout": "row"}},
            {"s": "let", "name": "r", "value": {"op": "cmmuladd", "a": get("ma"), "b": get("mb"), "c": {"op": "cmfill", "t": tc, "a": lit("f32", json!(0))}}},
            {"s": "cmstore", "b": 2, "vec": 4, "idx": lit("u32", json!(0)), "stride": lit("u32", json!(4)), "layout": "row", "value": get("r")},
            {"s": "store", "b": 2, "as": "u32", "idx": lit("u32", json!(300)), "value": lit("u32", json!(7))},
            {"s": "eval", "value": {"op": "atomic", "fn": "add", "b": 2, "idx": lit("u32", json!(301)), "a": lit("f32", json!(1))}}
        ]
    });
    compile_and_validate(&k, &caps);
}

/// coopmat2: workgroup-scope matrices loaded and stored through NV tensor layouts
/// (bounds-checked edge tiles).
#[test]
fn tensor_layout_loads_and_stores() {
    let caps = permissive_caps();
    let ta = cm("a", "f16", 32, 16, "workgroup");
    let tb = cm("b", "f16", 16, 32, "workgroup");
    let tc = cm("acc", "f32", 32, 32, "workgroup");
    let push = |n: &str| json!({"op": "push", "name": n});
    let tensor = |rows: &str, cols: &str, r: serde_json::Value, c: serde_json::Value, clamp: &str| {
        json!({"dims": [push(rows), push(cols)], "at": [r, c], "clamp": clamp})
    };
    let k = json!({
        "version": 1, "name": "tensor_layouts", "workgroup": [128],
        "bindings": [{"name": "a", "elem": "f16", "access": "read"}, {"name": "b", "elem": "f16", "access": "read"},
                     {"name": "c", "elem": "f32", "access": "write"}],
        "push": [{"name": "m", "type": "u32"}, {"name": "n", "type": "u32"}, {"name": "k", "type": "u32"}],
        "body": [
            {"s": "let", "name": "r0", "value": {"op": "mul", "a": {"op": "swz", "a": {"op": "builtin", "name": "workgroup_id"}, "c": "y"}, "b": lit("u32", json!(32))}},
            {"s": "let", "name": "c0", "value": {"op": "mul", "a": {"op": "swz", "a": {"op": "builtin", "name": "workgroup_id"}, "c": "x"}, "b": lit("u32", json!(32))}},
            {"s": "var", "name": "acc", "type": tc, "init": {"op": "cmfill", "t": tc, "a": lit("f32", json!(0))}},
            {"s": "for", "var": "kk", "from": lit("u32", json!(0)), "to": push("k"), "step": lit("u32", json!(16)), "body": [
                {"s": "let", "name": "ma", "value": {"op": "cmload", "t": ta, "b": 0, "idx": lit("u32", json!(0)), "stride": push("k"), "layout": "row",
                    "tensor": tensor("m", "k", get("r0"), get("kk"), "zero")}},
                {"s": "let", "name": "mb", "value": {"op": "cmload", "t": tb, "b": 1, "idx": lit("u32", json!(0)), "stride": push("n"), "layout": "row",
                    "tensor": tensor("k", "n", get("kk"), get("c0"), "edge")}},
                {"s": "set", "name": "acc", "value": {"op": "cmmuladd", "a": get("ma"), "b": get("mb"), "c": get("acc")}}
            ]},
            {"s": "cmstore", "b": 2, "idx": lit("u32", json!(0)), "stride": push("n"), "layout": "row", "value": get("acc"),
                "tensor": tensor("m", "n", get("r0"), get("c0"), "zero")}
        ]
    });
    let c = compile_and_validate(&k, &caps);
    let dis = crate::spirv::disassemble(&c.words).unwrap_or_default();
    assert!(dis.contains("OpCooperativeMatrixLoadTensorNV") && dis.contains("OpCooperativeMatrixStoreTensorNV"), "{dis}");
}
