//! Limits on untrusted descriptions: big enough for every real kernel, small enough that a
//! hostile or broken one fails fast instead of exhausting memory or the stack.

/// Bytes of JSON text.
pub const MAX_DESC_BYTES: usize = 4 << 20;
/// Expression and statement nodes in total.
pub const MAX_NODES: u32 = 100_000;
/// Entries of any one JSON array (bodies, argument lists, literal vectors).
pub const MAX_ARRAY: usize = 65_536;
/// Nesting of statements and expressions (serde_json itself stops at 128 levels of JSON).
pub const MAX_DEPTH: u32 = 64;
/// Storage-buffer bindings.
pub const MAX_BINDINGS: usize = 64;
/// Elements of a shared array or a function-local array.
pub const MAX_ARRAY_LEN: u32 = 1 << 20;
/// Characters of a value name.
pub const MAX_NAME: usize = 64;
