//! A lean JSON tree for descriptions. `serde_json::Value` spends most of a large kernel's
//! decode time building and dropping BTreeMaps and key Strings; this tree keeps objects as small
//! vectors and interns every field name and keyword of the format as `&'static str`, so only
//! user names allocate. serde_json still does the parsing (and its recursion limit still holds).

use std::fmt;
use std::ops::Deref;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// A string: a format keyword (no allocation) or an arbitrary user string.
#[derive(Debug, Clone, PartialEq)]
pub enum Str {
    Static(&'static str),
    Owned(Box<str>),
}

impl Str {
    fn new(s: &str) -> Str {
        match intern(s) {
            Some(k) => Str::Static(k),
            None => Str::Owned(s.into()),
        }
    }
    pub fn as_str(&self) -> &str {
        match self {
            Str::Static(s) => s,
            Str::Owned(s) => s,
        }
    }
}

impl Deref for Str {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

/// Every field name and keyword of docs/kernel-ir.md (a `match` compiles to a fast decision tree).
fn intern(s: &str) -> Option<&'static str> {
    Some(match s {
        "op" => "op", "s" => "s", "a" => "a", "b" => "b", "c" => "c", "t" => "t", "v" => "v",
        "name" => "name", "idx" => "idx", "value" => "value", "sh" => "sh", "vec" => "vec", "as" => "as",
        "type" => "type", "init" => "init", "len" => "len", "cond" => "cond", "then" => "then", "else" => "else",
        "var" => "var", "from" => "from", "to" => "to", "step" => "step", "unroll" => "unroll", "body" => "body",
        "scope" => "scope", "mem" => "mem", "stride" => "stride", "layout" => "layout", "args" => "args",
        "fn" => "fn", "mode" => "mode", "cmp" => "cmp", "sat" => "sat", "tensor" => "tensor", "dims" => "dims",
        "at" => "at", "clamp" => "clamp", "coopmat" => "coopmat", "elem" => "elem", "rows" => "rows",
        "cols" => "cols", "version" => "version", "workgroup" => "workgroup", "bindings" => "bindings",
        "push" => "push", "spec" => "spec", "shared" => "shared", "subgroupSize" => "subgroupSize",
        "access" => "access", "id" => "id",
        "lit" => "lit", "get" => "get", "builtin" => "builtin", "load" => "load", "store" => "store",
        "swz" => "swz", "add" => "add", "sub" => "sub", "mul" => "mul", "div" => "div", "rem" => "rem",
        "lt" => "lt", "le" => "le", "gt" => "gt", "ge" => "ge", "eq" => "eq", "ne" => "ne",
        "and" => "and", "or" => "or", "xor" => "xor", "not" => "not", "neg" => "neg",
        "band" => "band", "bor" => "bor", "bxor" => "bxor", "bnot" => "bnot", "shl" => "shl", "shr" => "shr",
        "min" => "min", "max" => "max", "fma" => "fma", "mix" => "mix", "select" => "select", "cast" => "cast",
        "bitcast" => "bitcast", "exp" => "exp", "exp2" => "exp2", "log" => "log", "log2" => "log2",
        "sqrt" => "sqrt", "rsqrt" => "rsqrt", "tanh" => "tanh", "abs" => "abs", "floor" => "floor",
        "ceil" => "ceil", "pow" => "pow", "sg" => "sg", "shuffle" => "shuffle", "shuffle_xor" => "shuffle_xor",
        "broadcast" => "broadcast", "elect" => "elect", "atomic" => "atomic", "cmfill" => "cmfill",
        "cmload" => "cmload", "cmstore" => "cmstore", "cmmuladd" => "cmmuladd", "cmlen" => "cmlen",
        "let" => "let", "set" => "set", "if" => "if", "for" => "for", "while" => "while", "loop" => "loop",
        "break" => "break", "continue" => "continue", "return" => "return", "barrier" => "barrier",
        "fence" => "fence", "eval" => "eval",
        "f32" => "f32", "f16" => "f16", "bf16" => "bf16", "i32" => "i32", "u32" => "u32", "bool" => "bool",
        "f32x2" => "f32x2", "f32x4" => "f32x4", "u32x2" => "u32x2", "u32x3" => "u32x3", "u32x4" => "u32x4",
        "i32x2" => "i32x2", "i32x4" => "i32x4", "f16x2" => "f16x2", "f16x4" => "f16x4",
        "read" => "read", "write" => "write", "readwrite" => "readwrite", "row" => "row", "col" => "col",
        "subgroup" => "subgroup", "acc" => "acc", "reduce" => "reduce", "inclusive" => "inclusive",
        "exclusive" => "exclusive", "global_id" => "global_id", "local_id" => "local_id",
        "workgroup_id" => "workgroup_id", "local_index" => "local_index", "subgroup_id" => "subgroup_id",
        "subgroup_invocation" => "subgroup_invocation", "subgroup_size" => "subgroup_size",
        "x" => "x", "y" => "y", "z" => "z", "w" => "w", "zero" => "zero", "edge" => "edge", "storage" => "storage",
        _ => return None,
    })
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    U(u64),
    I(i64),
    F(f64),
}

impl Number {
    pub fn as_u64(self) -> Option<u64> {
        match self {
            Number::U(u) => Some(u),
            Number::I(i) => u64::try_from(i).ok(),
            Number::F(_) => None,
        }
    }
    pub fn as_i64(self) -> Option<i64> {
        match self {
            Number::U(u) => i64::try_from(u).ok(),
            Number::I(i) => Some(i),
            Number::F(_) => None,
        }
    }
    pub fn as_f64(self) -> Option<f64> {
        Some(match self {
            Number::U(u) => u as f64,
            Number::I(i) => i as f64,
            Number::F(f) => f,
        })
    }
}

/// An object: entries in document order (descriptions have a handful of fields per object).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Map {
    entries: Vec<(Str, Value)>,
}

impl Map {
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
    }
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
    pub fn keys(&self) -> impl Iterator<Item = &Str> {
        self.entries.iter().map(|(k, _)| k)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Number(Number),
    String(Str),
    Array(Vec<Value>),
    Object(Map),
}

impl Value {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s.as_str()),
            _ => None,
        }
    }
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Number(n) => n.as_u64(),
            _ => None,
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }
    pub fn as_array(&self) -> Option<&Vec<Value>> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
    pub fn as_object(&self) -> Option<&Map> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }
}

/// Compact JSON text, for error messages.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Number(Number::U(u)) => write!(f, "{u}"),
            Value::Number(Number::I(i)) => write!(f, "{i}"),
            Value::Number(Number::F(x)) => write!(f, "{x}"),
            Value::String(s) => write!(f, "{:?}", s.as_str()),
            Value::Array(a) => {
                f.write_str("[")?;
                for (i, v) in a.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str("]")
            }
            Value::Object(o) => {
                f.write_str("{")?;
                for (i, (k, v)) in o.entries.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{:?}:{v}", k.as_str())?;
                }
                f.write_str("}")
            }
        }
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(Number::U(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(Number::I(v)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Number(Number::F(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(Str::new(v)))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(v) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = Vec::with_capacity(4);
        while let Some(k) = map.next_key::<KeyStr>()? {
            let v = map.next_value()?;
            entries.push((k.0, v));
        }
        Ok(Value::Object(Map { entries }))
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

struct KeyStr(Str);

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = KeyStr;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E>(self, v: &str) -> Result<KeyStr, E> {
        Ok(KeyStr(Str::new(v)))
    }
}

impl<'de> Deserialize<'de> for KeyStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<KeyStr, D::Error> {
        d.deserialize_str(KeyVisitor)
    }
}

/// The deepest nesting of arrays and objects in `text`, stopping early once it passes `limit`
/// (strings are skipped, so brackets inside names do not count). serde_json's own limit (128
/// levels) is below what `limits::MAX_DEPTH` statements plus as deep an expression need, so
/// descriptions are measured here and parsed with serde_json's limit off.
pub fn nesting_depth(text: &str, limit: usize) -> usize {
    let mut depth = 0usize;
    let mut deepest = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in text.as_bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
                if deepest > limit {
                    return deepest;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Parses a description with serde_json's recursion limit off, after `nesting_depth` has
/// bounded how deep the parser (and the decoder after it) can recurse.
pub fn parse_bounded(text: &str, max_json_depth: usize) -> Result<Value, String> {
    let depth = nesting_depth(text, max_json_depth);
    if depth > max_json_depth {
        return Err(format!("JSON nested more than {max_json_depth} levels deep"));
    }
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    let value = Value::deserialize(&mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(value)
}
