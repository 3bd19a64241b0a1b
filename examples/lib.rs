//! Shared code for the examples (nothing yet; each example is self-contained).
