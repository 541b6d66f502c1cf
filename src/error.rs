//! The library's error type. Every failure carries a kind (which becomes a
//! `dds_status` at the C boundary) and a message naming what was wrong.

use std::fmt;

/// What went wrong, independent of how the C API spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum Kind {
    InvalidArgument = 1,
    UnknownVariable = 2,
    DuplicateVariable = 3,
    OutOfRange = 4,
    Mismatch = 5,
    BadState = 6,
    Unsupported = 7,
    Mpi = 8,
    Fabric = 9,
    Gpu = 10,
    Timeout = 11,
    NoMemory = 12,
    Io = 13,
    Internal = 14,
}

impl Kind {
    /// Inverse of `as i32`, for kinds that travelled between ranks.
    pub fn from_code(code: i32) -> Kind {
        use Kind::*;
        [
            InvalidArgument,
            UnknownVariable,
            DuplicateVariable,
            OutOfRange,
            Mismatch,
            BadState,
            Unsupported,
            Mpi,
            Fabric,
            Gpu,
            Timeout,
            NoMemory,
            Io,
            Internal,
        ]
        .into_iter()
        .find(|k| *k as i32 == code)
        .unwrap_or(Internal)
    }
}

impl Kind {
    /// The kind of an error status code (`None` for `DDS_OK` or a value
    /// that is not a status).
    pub fn from_status(code: i32) -> Option<Kind> {
        (1..=Kind::Internal as i32).contains(&code).then(|| Kind::from_code(code))
    }
}

#[derive(Clone, Debug)]
pub struct Error {
    pub kind: Kind,
    pub msg: String,
}

impl Error {
    pub fn new(kind: Kind, msg: impl Into<String>) -> Error {
        Error { kind, msg: msg.into() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// `bail!(Kind, "format", args)` returns an error from the current function.
macro_rules! bail {
    ($kind:ident, $($arg:tt)*) => {
        return Err($crate::error::Error::new($crate::error::Kind::$kind, format!($($arg)*)))
    };
}
pub(crate) use bail;

/// `err!(Kind, "format", args)` builds an error value.
macro_rules! err {
    ($kind:ident, $($arg:tt)*) => {
        $crate::error::Error::new($crate::error::Kind::$kind, format!($($arg)*))
    };
}
pub(crate) use err;
