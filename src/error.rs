//! The library's error type. Every failure carries a kind (which becomes a
//! `dds_status` at the C boundary) and a message naming what was wrong.

use std::fmt;

/// The one list of failure kinds: the Rust name, the code, and the name of
/// the C constant. Every other list is made from it: `Kind` and its
/// conversions here, and at the C boundary `status_of` and
/// `dds_status_string` (src/capi), whose compile-time checks tie it to the
/// `dds_status` enum that cbindgen writes into ddstore.h (cbindgen reads
/// source, not macro output, so that enum stays written out, with its docs).
/// `$then` is called with the whole table.
macro_rules! status_table {
    ($then:ident) => {
        $then! {
            InvalidArgument = 1 => DDS_ERR_INVALID_ARGUMENT,
            UnknownVariable = 2 => DDS_ERR_UNKNOWN_VARIABLE,
            DuplicateVariable = 3 => DDS_ERR_DUPLICATE_VARIABLE,
            OutOfRange = 4 => DDS_ERR_INDEX_OUT_OF_RANGE,
            Mismatch = 5 => DDS_ERR_MISMATCH,
            BadState = 6 => DDS_ERR_BAD_STATE,
            Unsupported = 7 => DDS_ERR_UNSUPPORTED,
            Mpi = 8 => DDS_ERR_MPI,
            Fabric = 9 => DDS_ERR_FABRIC,
            Gpu = 10 => DDS_ERR_GPU,
            Timeout = 11 => DDS_ERR_TIMEOUT,
            NoMemory = 12 => DDS_ERR_NO_MEMORY,
            Io = 13 => DDS_ERR_IO,
            Internal = 14 => DDS_ERR_INTERNAL,
        }
    };
}
pub(crate) use status_table;

macro_rules! define_kind {
    ($($kind:ident = $code:literal => $cname:ident,)*) => {
        /// What went wrong, independent of how the C API spells it.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(i32)]
        pub enum Kind {
            $($kind = $code,)*
        }

        impl Kind {
            /// Every kind, in code order.
            pub const ALL: &'static [Kind] = &[$(Kind::$kind,)*];

            /// The C constant's name, NUL-terminated, e.g. "DDS_ERR_MISMATCH\0".
            pub fn c_name(self) -> &'static str {
                match self {
                    $(Kind::$kind => concat!(stringify!($cname), "\0"),)*
                }
            }
        }
    };
}
status_table!(define_kind);

impl Kind {
    /// Inverse of `as i32`, for kinds that travelled between ranks; a code
    /// that is no kind becomes `Internal`.
    pub fn from_code(code: i32) -> Kind {
        Kind::from_status(code).unwrap_or(Kind::Internal)
    }

    /// The kind of an error status code (`None` for `DDS_OK` or a value
    /// that is not a status).
    pub fn from_status(code: i32) -> Option<Kind> {
        Kind::ALL.iter().copied().find(|k| *k as i32 == code)
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
