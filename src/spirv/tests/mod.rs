//! Lowering tests: modules pass spirv-val; malformed descriptions are rejected.

mod common;
mod lowering;
mod views;
mod loops;
