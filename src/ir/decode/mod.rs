//! JSON → typed, validated AST in one pass. The description is first parsed to a lean JSON tree
//! (`ir::json`; serde's derive cannot say *where* in the tree a field is missing); this module then
//! walks it with a `Path`, so every error names its node.

mod coop;
mod expr;
mod header;
mod ops;
mod stmt;
mod unroll;

use std::collections::HashMap;

use crate::ir::json::{Map, Value};

use crate::caps::DeviceCaps;
use crate::error::{HeliosError, HeliosResult};

use super::ast::{Kernel, Slot, SlotInfo, SlotKind, Uses};
use super::limits;
use super::path::Path;
use super::types::Type;

pub(crate) type Obj = Map;

/// Decoding state: the declarations seen so far and the names visible at this point.
pub(crate) struct Decoder<'c> {
    caps: &'c DeviceCaps,
    name: String,
    pub(crate) kernel: Kernel,
    binding_names: HashMap<String, u32>,
    push_names: HashMap<String, u32>,
    spec_names: HashMap<String, u32>,
    shared_names: HashMap<String, u32>,
    visible: HashMap<String, Slot>,
    /// Slots declared in each open block; their names leave `visible` when it closes.
    scopes: Vec<Vec<Slot>>,
    loop_depth: u32,
    nodes: u32,
    /// Nodes weighted by the trip counts of the unrolled loops around them.
    unrolled_nodes: u64,
    /// Product of the known trip counts of the enclosing `unroll: true` loops.
    unroll_factor: u64,
    /// Statement nesting (blocks inside blocks) and the nesting inside the current expression,
    /// limited separately so that `MAX_DEPTH` nested `if`s may still test any condition.
    stmt_depth: u32,
    expr_depth: u32,
}

/// Parses and validates a description against `caps`.
pub fn decode(json: &str, caps: &DeviceCaps) -> HeliosResult<Kernel> {
    if json.len() > limits::MAX_DESC_BYTES {
        return Err(HeliosError::invalid_kernel(format!(
            "kernel description is {} bytes, over the {} byte limit",
            json.len(),
            limits::MAX_DESC_BYTES
        )));
    }
    let value = crate::ir::json::parse_bounded(json, limits::MAX_JSON_DEPTH)
        .map_err(|e| HeliosError::invalid_kernel(format!("kernel description is not valid JSON: {e}")))?;
    decode_value(&value, caps)
}

/// Validates an already-parsed description (napi hands objects over as `Value`).
pub fn decode_value(value: &Value, caps: &DeviceCaps) -> HeliosResult<Kernel> {
    let root = Path::ROOT;
    let top = value
        .as_object()
        .ok_or_else(|| HeliosError::invalid_kernel("kernel description must be a JSON object"))?;
    let name = match top.get("name").and_then(Value::as_str) {
        Some(n) if header::valid_kernel_name(n) => n.to_string(),
        Some(n) => {
            return Err(HeliosError::invalid_kernel(format!(
                "kernel name {:?} must match [A-Za-z_][A-Za-z0-9_]* (at most 128 characters)",
                truncate(n, 80)
            )))
        }
        None => return Err(HeliosError::invalid_kernel("kernel description: missing field 'name'")),
    };
    let mut d = Decoder::new(caps, name);
    d.check_fields(top, &root, header::TOP_FIELDS)?;
    match top.get("version") {
        Some(Value::Number(n)) if n.as_u64() == Some(u64::from(super::IR_VERSION)) => {}
        Some(v) => {
            return Err(d.err(
                &root.key("version"),
                format!("unsupported IR version {}, this build reads version {}", truncate(&v.to_string(), 20), super::IR_VERSION),
            ))
        }
        None => return Err(d.err(&root, "missing field 'version'")),
    }
    d.decode_header(top, &root)?;
    let body = d.req_array(top, "body", &root)?;
    let body_path = root.key("body");
    d.kernel.body = d.block(body, &body_path)?;
    d.finish_checks(&root)?;
    Ok(d.kernel)
}

pub(crate) fn truncate(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_string();
    }
    let mut end = n;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

impl<'c> Decoder<'c> {
    fn new(caps: &'c DeviceCaps, name: String) -> Self {
        let kernel = Kernel {
            name: name.clone(),
            workgroup: [super::ast::WorkgroupDim::Fixed(1); 3],
            bindings: Vec::new(),
            push: Vec::new(),
            spec: Vec::new(),
            shared: Vec::new(),
            subgroup_size: None,
            slots: Vec::new(),
            body: Vec::new(),
            uses: Uses::default(),
        };
        Decoder {
            caps,
            name,
            kernel,
            binding_names: HashMap::new(),
            push_names: HashMap::new(),
            spec_names: HashMap::new(),
            shared_names: HashMap::new(),
            visible: HashMap::new(),
            scopes: Vec::new(),
            loop_depth: 0,
            nodes: 0,
            unrolled_nodes: 0,
            unroll_factor: 1,
            stmt_depth: 0,
            expr_depth: 0,
        }
    }

    pub(crate) fn err(&self, path: &Path, msg: impl std::fmt::Display) -> HeliosError {
        HeliosError::invalid_kernel(format!("{}: {}: {}", self.name, path, msg))
    }

    /// Counts a node against the size limits (descriptions are untrusted input).
    pub(crate) fn count_node(&mut self, path: &Path) -> HeliosResult<()> {
        self.nodes += 1;
        if self.nodes > limits::MAX_NODES {
            return Err(self.err(path, format!("more than {} nodes", limits::MAX_NODES)));
        }
        self.unrolled_nodes = self.unrolled_nodes.saturating_add(self.unroll_factor);
        if self.unrolled_nodes > limits::MAX_UNROLLED_NODES {
            return Err(self.err(
                path,
                format!(
                    "more than {} nodes once loops with unroll: true are unrolled; unroll fewer or shorter loops",
                    limits::MAX_UNROLLED_NODES
                ),
            ));
        }
        Ok(())
    }

    /// Enters one statement level; `leave_stmt` must follow on success. The body's own
    /// statements are level 1, so `MAX_DEPTH` nested `if`s can hold statements.
    pub(crate) fn enter_stmt(&mut self, path: &Path) -> HeliosResult<()> {
        self.stmt_depth += 1;
        if self.stmt_depth > limits::MAX_DEPTH + 1 {
            return Err(self.err(path, format!("statements nested more than {} levels deep", limits::MAX_DEPTH)));
        }
        self.count_node(path)
    }

    pub(crate) fn leave_stmt(&mut self) {
        self.stmt_depth -= 1;
    }

    /// Enters one expression level; `leave_expr` must follow on success.
    pub(crate) fn enter_expr(&mut self, path: &Path) -> HeliosResult<()> {
        self.expr_depth += 1;
        if self.expr_depth > limits::MAX_DEPTH {
            return Err(self.err(path, format!("expression nested more than {} levels deep", limits::MAX_DEPTH)));
        }
        self.count_node(path)
    }

    pub(crate) fn leave_expr(&mut self) {
        self.expr_depth -= 1;
    }

    pub(crate) fn obj<'v>(&self, v: &'v Value, path: &Path) -> HeliosResult<&'v Obj> {
        v.as_object().ok_or_else(|| self.err(path, format!("expected an object, got {}", kind_of(v))))
    }

    pub(crate) fn check_fields(&self, o: &Obj, path: &Path, allowed: &[&str]) -> HeliosResult<()> {
        for k in o.keys() {
            if !allowed.contains(&k.as_str()) {
                return Err(self.err(path, format!("unknown field '{}'", truncate(k, 40))));
            }
        }
        Ok(())
    }

    pub(crate) fn req<'v>(&self, o: &'v Obj, key: &'static str, path: &Path) -> HeliosResult<&'v Value> {
        o.get(key).ok_or_else(|| self.err(path, format!("missing field '{key}'")))
    }

    pub(crate) fn req_str<'v>(&self, o: &'v Obj, key: &'static str, path: &Path) -> HeliosResult<&'v str> {
        let v = self.req(o, key, path)?;
        v.as_str().ok_or_else(|| self.err(&path.key(key), format!("expected a string, got {}", kind_of(v))))
    }

    pub(crate) fn req_array<'v>(&self, o: &'v Obj, key: &'static str, path: &Path) -> HeliosResult<&'v Vec<Value>> {
        let v = self.req(o, key, path)?;
        self.array(v, &path.key(key))
    }

    pub(crate) fn array<'v>(&self, v: &'v Value, path: &Path) -> HeliosResult<&'v Vec<Value>> {
        let a = v.as_array().ok_or_else(|| self.err(path, format!("expected an array, got {}", kind_of(v))))?;
        if a.len() > limits::MAX_ARRAY {
            return Err(self.err(path, format!("array of {} entries, over the limit of {}", a.len(), limits::MAX_ARRAY)));
        }
        Ok(a)
    }

    pub(crate) fn u32_of(&self, v: &Value, path: &Path) -> HeliosResult<u32> {
        v.as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| self.err(path, format!("expected an unsigned 32-bit integer, got {}", truncate(&v.to_string(), 40))))
    }

    pub(crate) fn bool_of(&self, v: &Value, path: &Path) -> HeliosResult<bool> {
        v.as_bool().ok_or_else(|| self.err(path, format!("expected true or false, got {}", kind_of(v))))
    }

    // ---- names and scopes

    pub(crate) fn open_scope(&mut self) {
        self.scopes.push(Vec::new());
    }

    pub(crate) fn close_scope(&mut self) {
        if let Some(slots) = self.scopes.pop() {
            for slot in slots {
                self.visible.remove(self.kernel.slots[slot as usize].name.as_str());
            }
        }
    }

    /// Declares a value name in the current block; names may not shadow visible ones (that is
    /// almost always a builder bug, and it keeps lowering's slot table flat).
    pub(crate) fn declare(&mut self, name: &str, kind: SlotKind, ty: Type, len: Option<u32>, path: &Path) -> HeliosResult<Slot> {
        if name.is_empty() || name.len() > limits::MAX_NAME {
            return Err(self.err(path, format!("name must be 1..={} characters", limits::MAX_NAME)));
        }
        if self.visible.contains_key(name) {
            return Err(self.err(path, format!("'{name}' is already defined in this scope")));
        }
        let slot = self.kernel.slots.len() as Slot;
        self.kernel.slots.push(SlotInfo { name: name.to_string(), kind, ty, len });
        self.visible.insert(name.to_string(), slot);
        if let Some(scope) = self.scopes.last_mut() {
            scope.push(slot);
        }
        Ok(slot)
    }

    pub(crate) fn lookup(&self, name: &str, path: &Path) -> HeliosResult<Slot> {
        self.visible
            .get(name)
            .copied()
            .ok_or_else(|| self.err(path, format!("undefined value '{}'", truncate(name, 40))))
    }
}

pub(crate) fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
