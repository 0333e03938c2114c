pub mod wire;
pub mod trace;
