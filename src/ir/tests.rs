//! Malformed-description corpus: every broken description is an InvalidKernel error naming the
//! kernel and the node path; nothing panics.

use serde_json::{json, Value};

use crate::caps::DeviceCaps;
use crate::error::ErrorCode;
use crate::ir::decode;
use crate::ir::presets::{lavapipe_like_caps, permissive_caps};

fn valid() -> Value {
    json!({
        "version": 1, "name": "softmax_f32", "workgroup": [64],
        "bindings": [{"name": "x", "elem": "f32", "access": "read"}, {"name": "y", "elem": "f32", "access": "write"},
                     {"name": "h", "elem": "f16", "access": "read"}],
        "push": [{"name": "n", "type": "u32"}],
        "shared": [{"name": "s", "elem": "f32", "len": 64}],
        "body": [
            {"s": "let", "name": "i", "value": {"op": "swz", "a": {"op": "builtin", "name": "global_id"}, "c": "x"}},
            {"s": "let", "name": "a", "value": {"op": "load", "b": 0, "idx": {"op": "get", "name": "i"}}},
            {"s": "let", "name": "hh", "value": {"op": "load", "b": 2, "idx": {"op": "get", "name": "i"}}},
            {"s": "if", "cond": {"op": "lt", "a": {"op": "get", "name": "i"}, "b": {"op": "push", "name": "n"}}, "then": [
                {"s": "store", "b": 1, "idx": {"op": "get", "name": "i"}, "value": {"op": "exp", "a": {"op": "get", "name": "a"}}}
            ]}
        ]
    })
}

fn err_of(v: &Value, caps: &DeviceCaps) -> String {
    err_of_str(&v.to_string(), caps)
}

fn err_of_str(s: &str, caps: &DeviceCaps) -> String {
    match decode(s, caps) {
        Ok(_) => panic!("expected an error for {}", &s[..s.len().min(200)]),
        Err(e) => {
            assert_eq!(e.code, ErrorCode::InvalidKernel, "{}", e.message);
            e.message
        }
    }
}

fn with(mut v: Value, pointer: &str, new: Value) -> Value {
    if let Some(slot) = v.pointer_mut(pointer) {
        *slot = new;
    }
    v
}

#[test]
fn valid_kernel_decodes() {
    decode(&valid().to_string(), &permissive_caps()).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn type_mismatch_names_the_path() {
    let v = with(valid(), "/body/3/then/0/value", json!({"op": "add", "a": {"op": "get", "name": "hh"}, "b": {"op": "get", "name": "a"}}));
    assert_eq!(err_of(&v, &permissive_caps()), "softmax_f32: body[3].then[0].value: f16 + f32");
}

#[test]
fn version_and_shape_errors() {
    let caps = permissive_caps();
    assert!(err_of(&with(valid(), "/version", json!(2)), &caps).contains("unsupported IR version 2"));
    assert!(err_of(&with(valid(), "/version", json!("1")), &caps).contains("unsupported IR version"));
    let mut v = valid();
    if let Some(o) = v.as_object_mut() {
        o.remove("version");
    }
    assert!(err_of(&v, &caps).contains("missing field 'version'"));
    assert!(err_of(&with(valid(), "/body/0/value/op", json!("frobnicate")), &caps).contains("body[0].value.op: unknown op 'frobnicate'"));
    assert!(err_of(&with(valid(), "/body/0/s", json!("goto")), &caps).contains("unknown statement 'goto'"));
    let mut v = valid();
    v["body"][0]["extra"] = json!(1);
    assert!(err_of(&v, &caps).contains("body[0]: unknown field 'extra'"));
    let mut v = valid();
    if let Some(o) = v.pointer_mut("/body/3/then/0").and_then(|s| s.as_object_mut()) {
        o.remove("idx");
    }
    assert!(err_of(&v, &caps).contains("body[3].then[0]: missing field 'idx'"));
    assert!(err_of(&json!([1, 2]), &caps).contains("must be a JSON object"));
    assert!(err_of(&with(valid(), "/name", json!("bad name!")), &caps).contains("kernel name"));
}

#[test]
fn undefined_values_forward_and_self_references() {
    let caps = permissive_caps();
    let v = with(valid(), "/body/1/value/idx/name", json!("zz"));
    assert!(err_of(&v, &caps).contains("body[1].value.idx.name: undefined value 'zz'"));
    // forward reference: body[0] uses 'a', which body[1] defines
    let v = with(valid(), "/body/0/value", json!({"op": "get", "name": "a"}));
    assert!(err_of(&v, &caps).contains("undefined value 'a'"));
    // let x = x
    let v = with(valid(), "/body/1/value", json!({"op": "get", "name": "a"}));
    assert!(err_of(&v, &caps).contains("undefined value 'a'"));
    // out of scope: a name from inside an if used after it
    let mut v = valid();
    v["body"][3]["then"] = json!([{"s": "let", "name": "inner", "value": {"op": "lit", "t": "u32", "v": 1}}]);
    if let Some(b) = v["body"].as_array_mut() {
        b.push(json!({"s": "store", "b": 1, "idx": {"op": "get", "name": "inner"}, "value": {"op": "get", "name": "a"}}));
    }
    assert!(err_of(&v, &caps).contains("body[4].idx.name: undefined value 'inner'"));
    // duplicate name
    let v = with(valid(), "/body/1/name", json!("i"));
    assert!(err_of(&v, &caps).contains("already defined"));
}

#[test]
fn bindings_access_and_limits() {
    let caps = permissive_caps();
    assert!(err_of(&with(valid(), "/body/1/value/b", json!(7)), &caps).contains("binding 7 is out of range"));
    assert!(err_of(&with(valid(), "/body/1/value/b", json!(-1)), &caps).contains("body[1].value.b"));
    assert!(err_of(&with(valid(), "/body/3/then/0/b", json!(0)), &caps).contains("declared Read"));
    assert!(err_of(&with(valid(), "/body/1/value/b", json!(1)), &caps).contains("declared Write"));
    assert!(err_of(&with(valid(), "/shared/0/len", json!(100_000)), &caps).contains("over the device limit"));
    assert!(err_of(&with(valid(), "/workgroup", json!([2048])), &caps).contains("workgroup"));
    assert!(err_of(&with(valid(), "/bindings/0/access", json!("rw")), &caps).contains("access must be"));
    let mut v = valid();
    v["body"][3]["then"] = json!([{"s": "break"}]);
    assert!(err_of(&v, &caps).contains("break outside a loop"));
}

#[test]
fn device_capabilities_are_enforced() {
    let lvp = lavapipe_like_caps();
    let cm = json!({"coopmat": "acc", "elem": "f32", "rows": 16, "cols": 16});
    let v = with(valid(), "/body/3/then/0", json!({"s": "var", "name": "acc", "type": cm}));
    assert!(err_of(&v, &lvp).contains("VK_KHR_cooperative_matrix"));
    let odd = json!({"coopmat": "acc", "elem": "f32", "rows": 16, "cols": 12});
    let v = with(valid(), "/body/3/then/0", json!({"s": "var", "name": "acc", "type": odd}));
    assert!(err_of(&v, &permissive_caps()).contains("not a cooperative-matrix shape this device lists"));
    let wg = json!({"coopmat": "acc", "elem": "f32", "rows": 32, "cols": 32, "scope": "workgroup"});
    let mut no2 = permissive_caps();
    no2.coop_mat2 = false;
    let v = with(valid(), "/body/3/then/0", json!({"s": "var", "name": "acc", "type": wg}));
    assert!(err_of(&v, &no2).contains("VK_NV_cooperative_matrix2"));
    let v = with(valid(), "/bindings/2/elem", json!("bf16"));
    assert!(err_of(&v, &lvp).contains("bf16"));
    // bf16 arithmetic is rejected even where bf16 exists
    let mut v = with(valid(), "/bindings/2/elem", json!("bf16"));
    v["body"][3]["then"][0]["value"] = json!({"op": "add", "a": {"op": "get", "name": "hh"}, "b": {"op": "get", "name": "hh"}});
    assert!(err_of(&v, &permissive_caps()).contains("bf16 has no arithmetic"));
    let mut nof16 = permissive_caps();
    nof16.f16 = false;
    assert!(err_of(&valid(), &nof16).contains("f16 needs shaderFloat16"));
}

#[test]
fn hostile_inputs_fail_fast() {
    let caps = permissive_caps();
    // deep nesting: serde_json's recursion limit or ours, never a stack overflow
    let mut e = json!({"op": "get", "name": "a"});
    for _ in 0..100 {
        e = json!({"op": "neg", "a": e});
    }
    let msg = err_of(&with(valid(), "/body/3/then/0/value", e), &caps);
    assert!(msg.contains("nested") || msg.contains("recursion"), "{msg}");
    let mut s = String::new();
    for _ in 0..100_000 {
        s.push('[');
    }
    assert!(err_of_str(&s, &caps).contains("not valid JSON"));
    // huge arrays
    let big: Vec<Value> = (0..70_000).map(|_| json!({"s": "return"})).collect();
    assert!(err_of(&with(valid(), "/body", Value::Array(big)), &caps).contains("over the limit"));
    let long = "x".repeat(5 << 20);
    assert!(err_of_str(&long, &caps).contains("byte limit"));
    // wrong JSON types everywhere
    for (p, bad) in [("/workgroup", json!("64")), ("/bindings", json!({})), ("/body/0/value/c", json!(3)), ("/push/0/type", json!("f64")),
                     ("/shared/0/elem", json!("bool")), ("/body/3/cond", json!(true)), ("/body/0/value/a/name", json!("warp_id"))] {
        err_of(&with(valid(), p, bad), &caps);
    }
    // literal out of range
    let v = with(valid(), "/body/0/value", json!({"op": "lit", "t": "u32", "v": -1}));
    assert!(err_of(&v, &caps).contains("not a valid u32 literal"));
}

#[test]
fn truncated_json_never_panics() {
    let s = valid().to_string();
    for cut in (0..s.len()).step_by(7) {
        let _ = err_of_str(&s[..cut], &permissive_caps());
    }
}

/// Random mutations of a valid description: decoding and lowering either succeed or return
/// InvalidKernel; nothing panics.
#[test]
fn random_mutations_never_panic() {
    let caps = permissive_caps();
    let base = valid();
    let mut seed = 0x9e37_79b9_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let replacements = [json!(null), json!(0), json!(-1), json!(1e30), json!("f16"), json!([]), json!({}), json!(true), json!("x"),
                        json!({"op": "get", "name": "i"}), json!(4_294_967_296u64)];
    for _ in 0..2000 {
        let mut v = base.clone();
        let mut paths = Vec::new();
        collect_paths(&v, String::new(), &mut paths);
        let p = &paths[(next() % paths.len() as u64) as usize];
        let r = replacements[(next() % replacements.len() as u64) as usize].clone();
        if let Some(slot) = v.pointer_mut(p) {
            *slot = r;
        }
        match decode(&v.to_string(), &caps) {
            Ok(k) => {
                let _ = crate::spirv::compile_kernel(&k);
            }
            Err(e) => assert_eq!(e.code, ErrorCode::InvalidKernel),
        }
    }
}

fn collect_paths(v: &Value, here: String, out: &mut Vec<String>) {
    out.push(here.clone());
    match v {
        Value::Object(o) => o.iter().for_each(|(k, x)| collect_paths(x, format!("{here}/{k}"), out)),
        Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| collect_paths(x, format!("{here}/{i}"), out)),
        _ => {}
    }
}

/// `depth` nested `if`s, each testing a two-level condition, around one store.
fn nested_ifs(depth: usize) -> Value {
    let mut body = json!([{"s": "store", "b": 1, "idx": {"op": "get", "name": "i"}, "value": {"op": "get", "name": "a"}}]);
    for k in 0..depth {
        let cond = json!({"op": "lt", "a": {"op": "get", "name": "i"}, "b": {"op": "lit", "t": "u32", "v": k + 1}});
        body = json!([{"s": "if", "cond": cond, "then": body}]);
    }
    let mut v = valid();
    let mut items = v["body"].as_array().cloned().unwrap_or_default();
    items.truncate(2);
    items.extend(body.as_array().cloned().unwrap_or_default());
    v["body"] = Value::Array(items);
    v
}

#[test]
fn the_documented_nesting_depth_decodes() {
    // 64 nested ifs (docs/kernel-ir.md), each condition an expression nested below that.
    decode(&nested_ifs(64).to_string(), &permissive_caps()).unwrap_or_else(|e| panic!("{e}"));
    let msg = err_of(&nested_ifs(65), &permissive_caps());
    assert!(msg.contains("statements nested more than 64 levels deep"), "{msg}");
    // A 64-level expression inside the deepest statement still decodes.
    let mut e = json!({"op": "get", "name": "a"});
    for _ in 0..63 {
        e = json!({"op": "neg", "a": e});
    }
    let v = with(nested_ifs(64), &format!("/body/2{}/then/0/value", "/then/0".repeat(63)), e.clone());
    decode(&v.to_string(), &permissive_caps()).unwrap_or_else(|e| panic!("{e}"));
    let v = with(nested_ifs(64), &format!("/body/2{}/then/0/value", "/then/0".repeat(63)), json!({"op": "neg", "a": e}));
    assert!(err_of(&v, &permissive_caps()).contains("expression nested more than 64 levels deep"));
}

fn unrolled(from: Value, to: Value, inner: Option<u32>) -> Value {
    let store = json!({"s": "store", "b": 1, "idx": {"op": "get", "name": "j"}, "value": {"op": "get", "name": "a"}});
    let body = match inner {
        Some(n) => json!([{"s": "for", "var": "k", "from": {"op": "lit", "t": "u32", "v": 0}, "to": {"op": "lit", "t": "u32", "v": n},
                           "unroll": true, "body": [store]}]),
        None => json!([store]),
    };
    let mut v = valid();
    v["body"][3] = json!({"s": "for", "var": "j", "from": from, "to": to, "unroll": true, "body": body});
    v
}

#[test]
fn unrolled_loops_are_bounded() {
    let caps = permissive_caps();
    let lit = |n: u32| json!({"op": "lit", "t": "u32", "v": n});
    // The reproducer: `for 0..1000000` with unroll: true.
    let msg = err_of(&unrolled(lit(0), lit(1_000_000), None), &caps);
    assert!(msg.contains("loop of 1000000 iterations cannot be unrolled"), "{msg}");
    assert!(msg.starts_with("softmax_f32: body[3].unroll:"), "{msg}");
    decode(&unrolled(lit(0), lit(4096), None).to_string(), &caps).unwrap_or_else(|e| panic!("{e}"));
    // Through arithmetic on literals, and from > to (no iterations).
    let to = json!({"op": "mul", "a": lit(1000), "b": lit(1000)});
    assert!(err_of(&unrolled(lit(0), to, None), &caps).contains("1000000 iterations"));
    decode(&unrolled(lit(10), lit(0), None).to_string(), &caps).unwrap_or_else(|e| panic!("{e}"));
    // Nested unrolled loops multiply: 4096 x 4096 copies of the body.
    let msg = err_of(&unrolled(lit(0), lit(4096), Some(4096)), &caps);
    assert!(msg.contains("once loops with unroll: true are unrolled"), "{msg}");
    decode(&unrolled(lit(0), lit(64), Some(64)).to_string(), &caps).unwrap_or_else(|e| panic!("{e}"));
    // A bound known only at run time counts once.
    decode(&unrolled(lit(0), json!({"op": "push", "name": "n"}), None).to_string(), &caps).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn spec_constant_trip_counts_are_bounded() {
    let mut v = unrolled(json!({"op": "lit", "t": "u32", "v": 0}), json!({"op": "spec", "name": "N"}), None);
    v["spec"] = json!([{"name": "N", "id": 0, "type": "u32", "value": 100000}]);
    assert!(err_of(&v, &permissive_caps()).contains("100000 iterations"));
    v["spec"] = json!([{"name": "N", "id": 0, "type": "u32", "value": 100}]);
    decode(&v.to_string(), &permissive_caps()).unwrap_or_else(|e| panic!("{e}"));
}
