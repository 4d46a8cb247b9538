//! The workloads of WORKLOADS.md, each a function from its arguments to
//! the `key=value` lines it printed.

pub mod pm;
pub mod w1;
pub mod w2;
pub mod w3;
pub mod w4;
pub mod w5;
pub mod w6;
pub mod w7;
pub mod w8;
pub mod w9;
