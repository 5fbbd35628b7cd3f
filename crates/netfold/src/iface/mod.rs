//! TODO: the Stack
