//! `for` with `unroll` reaches the driver as the Unroll / DontUnroll loop control, so generators
//! can describe a k-loop once instead of unrolling it in TypeScript (docs/kernel-ir.md).

use super::common::compile_and_validate;
use crate::ir::presets::permissive_caps;
use serde_json::json;

#[test]
fn unroll_hints_become_loop_controls() {
    let lit = |v: u32| json!({"op": "lit", "t": "u32", "v": v});
    let body = |unroll: serde_json::Value| json!([
        {"s": "var", "name": "acc", "type": "f32", "len": 4},
        {"s": "for", "var": "j", "from": lit(0), "to": {"op": "spec", "name": "N"}, "unroll": unroll, "body": [
            {"s": "set", "name": "acc", "idx": {"op": "band", "a": {"op": "get", "name": "j"}, "b": lit(3)},
             "value": {"op": "load", "b": 0, "idx": {"op": "get", "name": "j"}}}
        ]},
        {"s": "store", "b": 0, "idx": lit(0), "value": {"op": "get", "name": "acc", "idx": lit(1)}}
    ]);
    for (unroll, want) in [(json!(true), "Unroll"), (json!(false), "DontUnroll")] {
        let k = json!({
            "version": 1, "name": "unroll", "workgroup": [64],
            "spec": [{"name": "N", "id": 0, "type": "u32", "value": 8}],
            "bindings": [{"name": "a", "elem": "f32", "access": "readwrite"}], "body": body(unroll)
        });
        let m = compile_and_validate(&k, &permissive_caps());
        let dis = crate::spirv::disassemble(&m.words).unwrap_or_default();
        let merge = dis.lines().find(|l| l.contains("OpLoopMerge")).unwrap_or_default().to_string();
        assert!(merge.trim_end().ends_with(want), "{merge}");
    }
}
