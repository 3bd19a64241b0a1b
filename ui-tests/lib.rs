//! The cases live in `ui/`; the runner is `tests/ui.rs`.
