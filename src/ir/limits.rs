//! Limits on untrusted descriptions: big enough for every real kernel, small enough that a
//! hostile or broken one fails fast instead of exhausting memory or the stack.

/// Bytes of JSON text.
pub const MAX_DESC_BYTES: usize = 4 << 20;
/// Expression and statement nodes in total.
pub const MAX_NODES: u32 = 100_000;
/// Entries of any one JSON array (bodies, argument lists, literal vectors).
pub const MAX_ARRAY: usize = 65_536;
/// Nesting of statements (blocks inside blocks), and separately of one expression.
pub const MAX_DEPTH: u32 = 64;
/// JSON nesting the parser accepts: two JSON levels per statement level (object, block array)
/// and up to two per expression level (object, argument array), plus the top object and body.
pub const MAX_JSON_DEPTH: usize = 4 * MAX_DEPTH as usize + 8;
/// Iterations of one `for` with `unroll: true` whose trip count is known at compile time
/// (literals and spec constants): drivers unroll it completely, so it is code size.
pub const MAX_UNROLL_TRIPS: u64 = 4096;
/// Nodes after unrolling: each node counts once per iteration of every enclosing unrolled
/// loop of known trip count. Bounds the code the driver sees (a `for 0..1000000` with
/// `unroll: true` once took lavapipe past 7 GB).
pub const MAX_UNROLLED_NODES: u64 = 1 << 20;
/// Storage-buffer bindings.
pub const MAX_BINDINGS: usize = 64;
/// Elements of a shared array or a function-local array.
pub const MAX_ARRAY_LEN: u32 = 1 << 20;
/// Characters of a value name.
pub const MAX_NAME: usize = 64;
