//! The one hash of the library: FNV-1a, 64 bits. Cheap and stable across
//! builds and machines, which is all it is used for: the fingerprints that
//! check that ranks name the same variable or provider, and the checksum
//! and file names of the method-2 hand-shake records (a format on disk, so
//! its value must never change); `fnv1a_wide` for the bulk data of snapshots.

/// FNV-1a-64 of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// A checksum of bulk data (snapshot chunks) at memory speed: four FNV-1a-64
/// lanes over little-endian 64-bit words (word i to lane i % 4, so the
/// multiplications of the lanes overlap), the trailing bytes into lane 0 one
/// at a time, then FNV-1a of the lanes and the length. Byte-wise FNV-1a is a
/// chain of one multiplication per byte (under 1 GB/s), slower than a disk.
/// Part of the snapshot format: its value must never change.
pub fn fnv1a_wide(bytes: &[u8]) -> u64 {
    const P: u64 = 0x0100_0000_01b3;
    let mut lane = [0xcbf2_9ce4_8422_2325u64; 4];
    let mut words = bytes.chunks_exact(32);
    for block in &mut words {
        for (i, l) in lane.iter_mut().enumerate() {
            let w = u64::from_le_bytes(block[8 * i..8 * i + 8].try_into().unwrap());
            *l = (*l ^ w).wrapping_mul(P);
        }
    }
    let rest = words.remainder();
    let mut tail = rest.chunks_exact(8);
    for (i, w) in (&mut tail).enumerate() {
        lane[i] = (lane[i] ^ u64::from_le_bytes(w.try_into().unwrap())).wrapping_mul(P);
    }
    for &b in tail.remainder() {
        lane[0] = (lane[0] ^ b as u64).wrapping_mul(P);
    }
    let mut out = [0u8; 40];
    for (i, l) in lane.iter().enumerate() {
        out[8 * i..8 * i + 8].copy_from_slice(&l.to_le_bytes());
    }
    out[32..].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
    fnv1a(&out)
}

#[cfg(test)]
mod tests {
    use super::{fnv1a, fnv1a_wide};

    #[test]
    fn wide_sees_every_byte_and_the_length() {
        // Fixed values (computed independently from the definition above):
        // the snapshot format depends on them.
        assert_eq!(fnv1a_wide(b""), 0x9f45_5a3c_21ea_74c5);
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        let base = fnv1a_wide(&data);
        assert_eq!(base, 0x39b7_d855_b781_c2b0);
        for n in [0, 1, 7, 8, 31, 32, 33, 999] {
            let mut d = data.clone();
            d[n] ^= 1;
            assert_ne!(fnv1a_wide(&d), base, "flip at {n}");
        }
        // Trailing zero bytes change the sum (the length is in it).
        assert_ne!(fnv1a_wide(&[0u8; 8]), fnv1a_wide(&[0u8; 9]));
        assert_ne!(fnv1a_wide(&data[..999]), base);
    }

    #[test]
    fn known_values() {
        // The published FNV-1a-64 test vectors.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
