//! OpenAPI 3.0/3.1 documents: reading, `$ref` resolution, normalisation and operation compiling.

pub mod compile;
pub mod document;
mod extensions;
mod normalize;
pub mod resolve;
