//! The one hash of the library: FNV-1a, 64 bits. Cheap and stable across
//! builds and machines, which is all it is used for: the fingerprints that
//! check that ranks name the same variable or provider, and the checksum
//! and file names of the method-2 hand-shake records (a format on disk, so
//! its value must never change).

/// FNV-1a-64 of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::fnv1a;

    #[test]
    fn known_values() {
        // The published FNV-1a-64 test vectors.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
