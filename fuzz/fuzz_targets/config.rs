//! Environment parsing never panics, and what it accepts is in range: any
//! value either parses to a valid setting or is refused with a message that
//! names the variable.
#![no_main]

use ddstore::config::Config;
use libfuzzer_sys::fuzz_target;

const VARS: [&str; 9] = [
    "DDSTORE_ALLTOALL_MAX_BYTES",
    "DDSTORE_MAX_READ_BYTES",
    "DDSTORE_READ_TIMEOUT_S",
    "DDSTORE_HANDSHAKE_TIMEOUT_S",
    "DDSTORE_PROFILE",
    "DDSTORE_FABRIC",
    "DDSTORE_GPU",
    "DDSTORE_GPU_STAGING",
    "DDSTORE_GPU_STAGING_BYTES",
];

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let var = VARS[data[0] as usize % VARS.len()];
    let value = String::from_utf8_lossy(&data[1..]).into_owned();
    match Config::from_lookup(|k| (k == var).then(|| value.clone())) {
        Ok(c) => {
            assert!(c.alltoall_max_bytes > 0 && c.max_read_bytes > 0 && c.gpu_staging_bytes > 0);
            assert!(c.read_timeout_s.is_finite() && c.read_timeout_s >= 0.0);
            assert!(c.handshake_timeout_s.is_finite() && c.handshake_timeout_s >= 0.0);
        }
        Err(e) => assert!(e.msg.contains(var), "message {:?} does not name {var}", e.msg),
    }
});
