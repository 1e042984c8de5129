pub mod proto;
pub mod text;
