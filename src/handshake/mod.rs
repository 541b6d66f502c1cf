//! Method 2 hand-shake files: how a core job tells separate extra jobs where
//! its variables live, and how extras tell the core they are done.
//!
//! Pure file and format code (no MPI, no libfabric), unit-tested: `record`
//! holds the record format, `dir` the directory (trust checks, atomic
//! writes, done files, polling).
//!
//! ## Record file (one per variable)
//!
//! `<dir>/<safe>.<hash>.ddsrec`, where `<safe>` is the variable name with
//! every byte outside `[A-Za-z0-9_-]` replaced by `_` (truncated to 120
//! bytes) and `<hash>` is the FNV-1a-64 of the exact name in 16 hex digits,
//! so `a.b`, `a/b` and `a_b` get different files. The record also stores the
//! exact name, and a reader checks it.
//!
//! All integers little-endian. The envelope (magic, version, length,
//! trailing checksum) is the same for every format version, so a reader can
//! tell "another version" from "corrupt":
//!
//! | field | bytes |
//! |---|---|
//! | magic `"DDSHAKE\n"` | 8 |
//! | format version (`FORMAT_VERSION`) | u32 |
//! | state: 1 published, 2 withdrawn (the core freed it) | u32 |
//! | total file length, checksum included | u64 |
//! | session id of the core store | u64 |
//! | time written, ns since the Unix epoch | u64 |
//! | n_core (ranks of the core store) | u32 |
//! | libfabric address format (`fi_info.addr_format`) | u32 |
//! | elements per row | i64 |
//! | item size | i32, then 4 reserved bytes |
//! | variable name, provider name, domain name | each u16 length + bytes |
//! | per core rank, in rank order: address length (u16) + address bytes, MR key (u64), remote base (u64), row count (i64) | |
//! | FNV-1a-64 of every byte before it | u64 |
//!
//! Files are written to `<final>.tmp.<pid>`, fsynced, renamed over the final
//! name, and the directory is fsynced. Files are 0600; a directory we create
//! is 0700. A reader refuses a file that another user owns, that group or
//! others may write, or that is a symbolic link; both sides refuse a
//! directory that another user owns or that other users may write.
//! Nothing here formats a key or a base address into a message (they grant
//! read access to the core's memory), and `RankRecord`'s `Debug` hides them.
//!
//! ## Done files
//!
//! An extra member announces it has finished reading the variables of a core
//! store (identified by its session id) with
//! `<dir>/ddsdone.<session hex>.<host>.<pid>.<n>`; the core counts them.
//!
//! ## Blob files
//!
//! An opaque byte string under a name (`blob`), published by any member and
//! awaited by any other: `<dir>/<safe>.<hash>.ddsblob`, written and read
//! with the same checks as records.

mod blob;
mod dir;
mod record;
mod remote;

pub use blob::{blob_file_name, check_size, parse_blob, serialize_blob, Blob, BLOB_MAX_BYTES};
pub use dir::{
    check_dir, count_done, ensure_dir, poll, read_checked, resolve_dir, write_atomic, write_done, DONE_PREFIX,
};
pub use record::{
    now_ns, parse, record_file_name, serialize, Expect, ProviderCheck, RankRecord, Record, FORMAT_VERSION, MAGIC,
    RECORD_SUFFIX, STATE_PUBLISHED, STATE_WITHDRAWN,
};
pub use remote::Published;
