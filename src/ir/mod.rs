//! The kernel IR (docs/kernel-ir.md): types, the typed AST, and the decoder that parses and
//! validates a JSON description against the device's capabilities.

pub mod ast;
pub mod decode;
pub mod json;
pub mod limits;
pub mod path;
pub mod presets;
pub mod types;

pub use decode::{decode, decode_value};

/// The description format version this build reads.
pub const IR_VERSION: u32 = 1;

#[cfg(test)]
mod tests;
