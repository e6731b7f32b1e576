//! Cross-crate tests for ptc; the tests live in `tests/`.
