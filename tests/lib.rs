//! Integration tests live in `tests/tests/*.rs`; this library is empty.
