//! netfold's test kit (dev-only, never published): what the test files used to define each for
//! themselves.
//!
//! - [`Rng`]: a seeded generator, so a failing run reproduces from its seed.
//! - [`Net`]: two stacks joined by a link (the in-memory pipe, or any pair of devices), polled
//!   in virtual time, with the stepping policies the tests use.
//! - [`config`]: a stack configuration in 198.18.0.0/15 whose MAC and TCP secret derive from
//!   one byte.
//! - `tapns` (feature `netns`): the network namespace and (multi-queue) TAP fixture of the
//!   tests that run netfold against the kernel's stack.
#![deny(unsafe_code)]

mod net;
mod rng;
#[cfg(feature = "netns")]
pub mod tapns;
#[cfg(feature = "netns")]
pub mod vethns;

pub use net::{config, Net};
pub use rng::Rng;
