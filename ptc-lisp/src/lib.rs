//! The PTC-Lisp language runtime.
