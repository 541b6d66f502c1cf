//! Method-2 record parsing never panics and never accepts what it should
//! not: any bytes either parse to a record that serialises back to exactly
//! those bytes, or are refused with DDS_ERR_IO/MISMATCH/UNSUPPORTED/FABRIC
//! naming the file. The checksum would stop almost every mutation at the
//! envelope, so the input is also parsed with its length and checksum
//! repaired, which lets the fuzzer reach the fields behind them.
#![no_main]

use ddstore::handshake::{parse, serialize, Expect, ProviderCheck, Record};
use ddstore::transport::fabric::select;
use ddstore::hash::fnv1a;
use ddstore::error::Kind;
use libfuzzer_sys::fuzz_target;

const WHAT: &str = "fuzz.ddsrec";

fn check(bytes: &[u8], want: &Expect) {
    match parse(bytes, WHAT, want) {
        Ok(rec) => round_trip(bytes, &rec, want),
        Err(e) => {
            assert!(
                matches!(e.kind, Kind::Io | Kind::Mismatch | Kind::Unsupported | Kind::Fabric),
                "unexpected status {:?}: {}",
                e.kind,
                e.msg
            );
            assert!(e.msg.contains(WHAT), "message does not name the file: {}", e.msg);
        }
    }
}

/// An accepted record is exactly what the encoder writes for it, and it
/// meets what the extra asked for.
fn round_trip(bytes: &[u8], rec: &Record, want: &Expect) {
    let again = serialize(rec).expect("a parsed record serialises");
    assert_eq!(again, bytes, "parse then serialise changed the bytes");
    assert_eq!(&parse(&again, WHAT, want).expect("re-parse"), rec);
    assert_eq!(rec.name, want.name);
    if rec.state == 1 {
        assert_eq!(rec.ranks.len(), want.n_core);
        assert!(rec.row_elems > 0 && [1, 2, 4, 8].contains(&rec.item_size));
        assert!(rec.ranks.iter().all(|r| r.rows >= 0));
    }
}

/// Rewrites the length field and the trailing checksum to match the bytes.
fn repair(bytes: &[u8]) -> Option<Vec<u8>> {
    if bytes.len() < 32 {
        return None;
    }
    let mut b = bytes.to_vec();
    let n = b.len();
    b[16..24].copy_from_slice(&(n as u64).to_le_bytes());
    let sum = fnv1a(&b[..n - 8]);
    b[n - 8..].copy_from_slice(&sum.to_le_bytes());
    Some(b)
}

fuzz_target!(|data: &[u8]| {
    // First byte: what the extra expects (name from the seed corpus or
    // another, n_core 1..=4, provider given or not).
    let Some((&sel, rest)) = data.split_first() else { return };
    let want = Expect {
        name: if sel & 0x80 == 0 { "x".into() } else { "data/y.z".into() },
        n_core: 1 + (sel & 3) as usize,
        // The rule method 2 applies (the transport's), as store/split.rs passes it.
        provider: (sel & 4 != 0).then(|| ProviderCheck {
            name: select::normalize_provider("tcp"),
            matches: select::provider_matches,
        }),
        row: (sel & 8 != 0).then_some((3, 8)),
    };
    check(rest, &want);
    if let Some(fixed) = repair(rest) {
        check(&fixed, &want);
    }
});
