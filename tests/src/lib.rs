//! Cross-crate tests for ptc (incl. trybuild UI tests).
