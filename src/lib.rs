//! libddstore: a distributed in-memory data store for HPC training and
//! simulation codes, shipped as a C-ABI shared library.
//!
//! Every MPI rank holds a shard of each named variable (a 2-D table of
//! fixed-width rows); any rank reads any row by its global index.
//!
//! Data flows one way:
//!
//! - [`capi`]: the only `extern "C"` items; handles, C strings, status codes,
//!   and a panic boundary around every entry point;
//! - [`store`]: a store's communicator, its registry of variables, dispatch,
//!   and the agreement that makes collective calls fail on all ranks
//!   together; it checks a request and hands it to the variable's transport;
//! - [`var`]: one registered variable (shape, checks, its transport);
//!   [`handshake`]: the method-2 record format (pure: no MPI, no libfabric);
//! - [`transport`]: moving rows between ranks (method 0: MPI windows and
//!   the collective exchange; methods 1 and 2: libfabric; node-local shared
//!   memory), behind one facade (`Transport`, `Network`): the store never
//!   names a concrete transport;
//! - [`layout`], [`shard`]: row ownership and shard memory;
//! - [`mpi`]: small wrappers over mpi-sys; [`gpu`]: device memory
//!   (classification, staging);
//! - leaves: [`config`] (environment variables), [`error`] (the status list),
//!   [`profile`] (counters), [`copy`] (the row copy), [`hash`] (FNV-1a),
//!   [`trust`] (whether a file may be trusted: owner, mode, no link).
//!
//! The layers are written once, in src/layering.rs, whose test fails when a
//! module uses one above it or names a concrete transport from above. docs/dev/architecture.md has the map, a read's path
//! and the one-source lists.

// Only `capi` is the library's interface (the C ABI). The modules marked
// `#[doc(hidden)] pub` are reachable only for the fuzz targets (fuzz/),
// the benches (benches/) and tests/remote_access.rs; the rest is private.
#[allow(non_camel_case_types, clippy::missing_safety_doc)]
pub mod capi;
#[doc(hidden)]
pub mod config;
#[doc(hidden)]
pub mod copy;
#[doc(hidden)]
pub mod error;
pub(crate) mod gpu;
#[doc(hidden)]
pub mod handshake;
#[doc(hidden)]
pub mod hash;
#[doc(hidden)]
pub mod layout;
pub(crate) mod mpi;
pub(crate) mod profile;
pub(crate) mod shard;
pub(crate) mod store;
#[doc(hidden)]
pub mod transport;
pub(crate) mod trust;
pub(crate) mod var;

// The layer table and the test that checks every `crate::` use against it.
#[cfg(test)]
mod layering;
