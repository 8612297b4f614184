//! The audit bundle format in one place, for every stage that writes or reads bundles: reading
//! a bundle back (a directory or a packed `.oeb`), deriving its normalized events from its raw
//! channels, packing and unpacking with their limits and checks, verifying that a bundle is
//! what it claims, and the runner signature over it. Atomic file writing and signing-key files
//! live here too, since bundles are written and signed with them.

pub mod derive;
pub mod files;
pub mod keys;
pub mod pack;
pub mod read;
pub mod show;
pub mod signature;
pub mod verify;

pub use read::{Bundle, Files, parse_scenario};
