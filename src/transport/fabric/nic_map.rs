//! `DDSTORE_NIC_MAP` (or `dds_options.nic_map`): `nic=cpus;nic=cpus`, CPUs
//! as single numbers or `lo-hi` ranges separated by commas; the NIC whose
//! CPUs overlap this process's affinity acts as `FABRIC_IFACE` (select.rs
//! has the rules; pure functions, unit-tested and fuzzed).

/// Parses a CPU list: `0-3,8,10-11`.
pub fn parse_cpus(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("'{part}' is not a CPU number or lo-hi range");
        if let Some((lo, hi)) = part.split_once('-') {
            let lo: usize = lo.trim().parse().map_err(|_| bad())?;
            let hi: usize = hi.trim().parse().map_err(|_| bad())?;
            if hi < lo || hi - lo > 1 << 16 {
                return Err(bad());
            }
            out.extend(lo..=hi);
        } else {
            out.push(part.parse().map_err(|_| bad())?);
        }
    }
    Ok(out)
}

/// Parses `DDSTORE_NIC_MAP`: `nic=cpus;nic=cpus`.
pub fn parse_nic_map(s: &str) -> Result<Vec<(String, Vec<usize>)>, String> {
    parse_nic_map_from(s, "DDSTORE_NIC_MAP")
}

/// Parses a NIC map that came from `source` (`DDSTORE_NIC_MAP` or
/// `options.nic_map`), which every error message names with the bad entry.
pub fn parse_nic_map_from(s: &str, source: &str) -> Result<Vec<(String, Vec<usize>)>, String> {
    let mut out = Vec::new();
    for entry in s.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((nic, cpus)) = entry.split_once('=') else {
            return Err(format!("{source} entry '{entry}' is not nic=cpus"));
        };
        let nic = nic.trim();
        if nic.is_empty() {
            return Err(format!("{source} entry '{entry}' has no NIC name"));
        }
        let cpus = parse_cpus(cpus).map_err(|e| format!("{source} entry '{entry}': {e}"))?;
        if cpus.is_empty() {
            return Err(format!("{source} entry '{entry}' lists no CPUs"));
        }
        out.push((nic.to_string(), cpus));
    }
    Ok(out)
}

/// The NIC of `map` nearest to a process bound to `affinity`: the
/// alphabetically first NIC sharing a CPU with it.
pub fn nic_for_affinity(map: &[(String, Vec<usize>)], affinity: &[usize]) -> Option<String> {
    let mut hits: Vec<&String> =
        map.iter().filter(|(_, cpus)| cpus.iter().any(|c| affinity.contains(c))).map(|(n, _)| n).collect();
    hits.sort();
    hits.first().map(|s| s.to_string())
}

/// CPUs this process may run on.
pub fn affinity() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nic_map() {
        let m = parse_nic_map("hsn0=0-3,8;hsn1=4-7, 9 ;").unwrap();
        assert_eq!(m, vec![("hsn0".to_string(), vec![0, 1, 2, 3, 8]), ("hsn1".to_string(), vec![4, 5, 6, 7, 9])]);
        assert_eq!(nic_for_affinity(&m, &[5]), Some("hsn1".to_string()));
        assert_eq!(nic_for_affinity(&m, &[3, 4]), Some("hsn0".to_string()));
        assert_eq!(nic_for_affinity(&m, &[42]), None);
        assert!(parse_nic_map("hsn0").is_err());
        assert!(parse_nic_map("=1").is_err());
        assert!(parse_nic_map("hsn0=3-1").is_err());
        assert!(parse_nic_map("hsn0=a").is_err());
        // Found by the nic_map fuzz target: an entry without CPUs matches nothing.
        assert!(parse_nic_map("hsn0=").unwrap_err().contains("lists no CPUs"));
        assert!(parse_nic_map("hsn0=0;hsn1= , ").is_err());
        // Every entry is checked, empty ones skipped; the message names the source.
        let e = parse_nic_map_from("garbage;;=", "options.nic_map").unwrap_err();
        assert!(e.contains("options.nic_map entry 'garbage'"), "{e}");
        assert!(parse_nic_map("hsn0=1;;=").unwrap_err().contains("DDSTORE_NIC_MAP entry '=' has no NIC name"));
        assert!(!affinity().is_empty());
    }
}
