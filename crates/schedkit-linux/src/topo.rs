//! The machine's topology, read from sysfs (seed 000, "Definition of system topology": the
//! paper scans `/sys/devices/system/cpu/cpuN`; we read the same files and more).
//!
//! Sources, all under `Roots::sys`:
//! - `devices/system/cpu/online`: the online CPUs (offline ones have no topology);
//! - `devices/system/cpu/cpuN/topology/{physical_package_id,core_id,thread_siblings_list}`:
//!   package, core and SMT siblings;
//! - `devices/system/cpu/cpuN/cache/indexK/{level,type,size,shared_cpu_list,
//!   coherency_line_size}`: caches, deduplicated by (level, type, shared CPUs);
//! - `devices/system/node/nodeK/cpulist`: NUMA nodes (absent on kernels without NUMA: one
//!   node with every CPU is assumed and reported as such).

use crate::affinity::CpuSet;
use crate::{read_trim, Error, Result, Roots};
use serde::Serialize;
use std::path::Path;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cpu {
    pub cpu: usize,
    pub package: usize,
    /// Core id as the kernel numbers it (unique within a package).
    pub core: usize,
    /// SMT siblings, this CPU included.
    pub siblings: CpuSet,
    pub node: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cache {
    pub level: u32,
    /// `Data`, `Instruction` or `Unified`.
    pub kind: String,
    pub size_bytes: u64,
    pub line_bytes: Option<u64>,
    pub shared_cpus: CpuSet,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Node {
    pub node: usize,
    pub cpus: CpuSet,
}

/// The topology of the online CPUs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Topology {
    pub online: CpuSet,
    pub cpus: Vec<Cpu>,
    pub packages: usize,
    /// Physical cores (distinct (package, core) pairs).
    pub cores: usize,
    pub caches: Vec<Cache>,
    pub nodes: Vec<Node>,
    /// Whether NUMA information came from sysfs (false: one node was assumed).
    pub numa_from_sysfs: bool,
}

fn num(path: &Path) -> Result<u64> {
    let t = read_trim(path).map_err(|e| Error::io(format!("read {}", path.display()), e))?;
    t.parse::<u64>()
        .map_err(|_| Error::Input(format!("{}: not a number: \"{t}\"", path.display())))
}

fn list(path: &Path) -> Result<CpuSet> {
    let t = read_trim(path).map_err(|e| Error::io(format!("read {}", path.display()), e))?;
    CpuSet::parse_list(&t).map_err(|m| Error::Input(format!("{}: {m}", path.display())))
}

/// Parses cache sizes as sysfs writes them: `32K`, `3072K`, `8M`.
fn size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (n, mult) = match t.chars().last()? {
        'K' => (&t[..t.len() - 1], 1024),
        'M' => (&t[..t.len() - 1], 1024 * 1024),
        'G' => (&t[..t.len() - 1], 1024 * 1024 * 1024),
        _ => (t, 1),
    };
    n.parse::<u64>().ok().map(|v| v * mult)
}

impl Topology {
    /// Reads the topology under `roots`.
    pub fn read(roots: &Roots) -> Result<Topology> {
        let cpu_dir = roots.sys.join("devices/system/cpu");
        let online = list(&cpu_dir.join("online"))?;
        if online.is_empty() {
            return Err(Error::Input(format!(
                "{}: no online CPU",
                cpu_dir.join("online").display()
            )));
        }
        // NUMA nodes.
        let node_dir = roots.sys.join("devices/system/node");
        let mut nodes = Vec::new();
        if let Ok(rd) = std::fs::read_dir(&node_dir) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().to_string();
                if let Some(n) = name.strip_prefix("node").and_then(|n| n.parse().ok()) {
                    let cpus = list(&e.path().join("cpulist"))?;
                    nodes.push(Node { node: n, cpus });
                }
            }
        }
        nodes.sort_by_key(|n| n.node);
        let numa_from_sysfs = !nodes.is_empty();
        if nodes.is_empty() {
            nodes.push(Node {
                node: 0,
                cpus: online.clone(),
            });
        }
        let mut cpus = Vec::new();
        let mut caches: Vec<Cache> = Vec::new();
        for c in online.iter() {
            let d = cpu_dir.join(format!("cpu{c}"));
            let t = d.join("topology");
            let package = num(&t.join("physical_package_id"))? as usize;
            let core = num(&t.join("core_id"))? as usize;
            let siblings = list(&t.join("thread_siblings_list"))
                .or_else(|_| list(&t.join("core_cpus_list")))
                .unwrap_or_else(|_| CpuSet::single(c));
            let node = nodes
                .iter()
                .find(|n| n.cpus.contains(c))
                .map_or(0, |n| n.node);
            cpus.push(Cpu {
                cpu: c,
                package,
                core,
                siblings,
                node,
            });
            if let Ok(rd) = std::fs::read_dir(d.join("cache")) {
                let mut idx: Vec<_> = rd
                    .flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with("index"))
                    .map(|e| e.path())
                    .collect();
                idx.sort();
                for i in idx {
                    let level = num(&i.join("level"))? as u32;
                    let kind = read_trim(&i.join("type")).unwrap_or_default();
                    let Some(size_bytes) = read_trim(&i.join("size")).ok().and_then(|s| size(&s))
                    else {
                        continue;
                    };
                    let shared_cpus =
                        list(&i.join("shared_cpu_list")).unwrap_or_else(|_| CpuSet::single(c));
                    let line_bytes = num(&i.join("coherency_line_size")).ok();
                    let cache = Cache {
                        level,
                        kind,
                        size_bytes,
                        line_bytes,
                        shared_cpus,
                    };
                    if !caches.iter().any(|x| {
                        x.level == cache.level
                            && x.kind == cache.kind
                            && x.shared_cpus == cache.shared_cpus
                    }) {
                        caches.push(cache);
                    }
                }
            }
        }
        caches.sort_by(|a, b| {
            (a.level, &a.kind, a.shared_cpus.first()).cmp(&(
                b.level,
                &b.kind,
                b.shared_cpus.first(),
            ))
        });
        let mut pk: Vec<usize> = cpus.iter().map(|c| c.package).collect();
        pk.sort_unstable();
        pk.dedup();
        let mut cores: Vec<(usize, usize)> = cpus.iter().map(|c| (c.package, c.core)).collect();
        cores.sort_unstable();
        cores.dedup();
        Ok(Topology {
            online,
            packages: pk.len(),
            cores: cores.len(),
            cpus,
            caches,
            nodes,
            numa_from_sysfs,
        })
    }

    /// The host's topology.
    pub fn host() -> Result<Topology> {
        Topology::read(&Roots::host())
    }

    /// Logical CPUs online.
    pub fn n_cpus(&self) -> usize {
        self.online.len()
    }

    /// Last-level cache size seen by `cpu` (bytes).
    pub fn llc_bytes(&self, cpu: usize) -> Option<u64> {
        self.caches
            .iter()
            .filter(|c| c.shared_cpus.contains(cpu) && c.kind != "Instruction")
            .max_by_key(|c| c.level)
            .map(|c| c.size_bytes)
    }

    /// The system cores for exclusive mode: `requested` if given (checked against the
    /// online CPUs), else CPU 0 and its SMT siblings (so a job never shares a physical core
    /// with the system).
    pub fn system_cpus(&self, requested: Option<&CpuSet>) -> Result<CpuSet> {
        match requested {
            Some(r) => {
                let bad = r.difference(&self.online);
                if !bad.is_empty() {
                    return Err(Error::Input(format!(
                        "CPU {bad} does not exist or is offline (online CPUs: {})",
                        self.online
                    )));
                }
                if r.is_empty() {
                    return Err(Error::Input(
                        "--system-cores must name at least one CPU".into(),
                    ));
                }
                if r.len() >= self.online.len() {
                    return Err(Error::Input(format!(
                        "--system-cores {r} leaves no CPU for the job (online CPUs: {})",
                        self.online
                    )));
                }
                Ok(r.clone())
            }
            None => {
                let first = self.online.first().unwrap_or(0);
                let sib = self
                    .cpus
                    .iter()
                    .find(|c| c.cpu == first)
                    .map(|c| c.siblings.intersection(&self.online))
                    .unwrap_or_else(|| CpuSet::single(first));
                if sib.len() >= self.online.len() {
                    // One physical core with SMT: give the system one hardware thread only.
                    Ok(CpuSet::single(first))
                } else {
                    Ok(sib)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(size("32K"), Some(32768));
        assert_eq!(size("3M"), Some(3 << 20));
        assert_eq!(size("512"), Some(512));
        assert_eq!(size("x"), None);
    }
}
