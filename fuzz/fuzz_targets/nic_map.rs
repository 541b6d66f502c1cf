//! `DDSTORE_NIC_MAP` parsing never panics, and every NIC it returns came with
//! at least one CPU from the map text.
#![no_main]

use ddstore::transport::fabric::nic_map::{nic_for_affinity, parse_nic_map};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(map) = parse_nic_map(&text) {
        for (nic, cpus) in &map {
            assert!(!nic.is_empty() && !cpus.is_empty());
            // A process pinned to exactly this NIC's CPUs gets a NIC back.
            assert!(nic_for_affinity(&map, cpus).is_some());
        }
    }
});
