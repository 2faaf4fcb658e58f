//! What a journal entry may name: paths under the cgroup mounts, sysctls under `/proc/sys`,
//! the IRQ files; checked before any entry read from a file is applied.

use super::*;

/// The cgroup (v1 `cgroup` and v2 `cgroup2`) mount points of `/proc/self/mountinfo` (under
/// [`Roots::proc`], so tests can list a fake tree): the only places where journal entries
/// may name files and directories.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CgroupMounts(pub Vec<PathBuf>);

impl CgroupMounts {
    pub fn read(roots: &Roots) -> CgroupMounts {
        let text = std::fs::read_to_string(roots.proc.join("self/mountinfo")).unwrap_or_default();
        let mut v = Vec::new();
        for line in text.lines() {
            // id parent major:minor root mountpoint options ... - fstype source superoptions
            let Some((left, right)) = line.split_once(" - ") else {
                continue;
            };
            let fstype = right.split_whitespace().next().unwrap_or("");
            if fstype != "cgroup" && fstype != "cgroup2" {
                continue;
            }
            if let Some(mp) = left.split_whitespace().nth(4) {
                let mp = PathBuf::from(unescape_mountinfo(mp));
                if mp.is_absolute() && !v.contains(&mp) {
                    v.push(mp);
                }
            }
        }
        CgroupMounts(v)
    }

    /// Whether `path` is one of the mount points.
    pub fn is_mount(&self, path: &Path) -> bool {
        self.0.iter().any(|m| m == path)
    }

    /// Ok when `path` is absolute, has no `.` or `..` component and lies strictly below one of
    /// the mounts (`or_mount`: or is a mount point itself).
    pub fn check(&self, path: &Path, or_mount: bool) -> std::result::Result<(), String> {
        plain_absolute(path)?;
        let hit = self
            .0
            .iter()
            .any(|m| path.starts_with(m) && (or_mount || path != m.as_path()));
        if hit {
            Ok(())
        } else if self.0.is_empty() {
            Err(format!(
                "{} is not under a cgroup mount (none found in mountinfo)",
                path.display()
            ))
        } else {
            Err(format!(
                "{} is not under a cgroup mount ({})",
                path.display(),
                self.0
                    .iter()
                    .map(|m| m.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        }
    }
}

/// Ok when `path` lies below a cgroup mount of `roots` (see [`CgroupMounts::check`]).
pub fn check_cgroup_path(roots: &Roots, path: &Path) -> std::result::Result<(), String> {
    CgroupMounts::read(roots).check(path, false)
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn plain_absolute(path: &Path) -> std::result::Result<(), String> {
    let text = path.as_os_str().as_encoded_bytes();
    if !path.is_absolute() {
        return Err(format!("{} is not an absolute path", path.display()));
    }
    if text.split(|&c| c == b'/').any(|c| c == b".." || c == b".") {
        return Err(format!("{} has a `.` or `..` component", path.display()));
    }
    if path
        .components()
        .any(|c| !matches!(c, Component::RootDir | Component::Normal(_)))
    {
        return Err(format!("{} is not a plain path", path.display()));
    }
    Ok(())
}

/// Ok when `name` is a sysctl path relative to `/proc/sys` made of plain components
/// (`kernel/sched_rt_runtime_us`): not absolute, no empty, `.` or `..` component.
pub fn check_sysctl_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err("empty sysctl name".into());
    }
    if name.starts_with('/') {
        return Err(format!("sysctl name {name:?} is absolute"));
    }
    if name.contains('\0') {
        return Err(format!("sysctl name {name:?} holds a NUL byte"));
    }
    if let Some(c) = name
        .split('/')
        .find(|c| c.is_empty() || *c == "." || *c == "..")
    {
        return Err(format!(
            "sysctl name {name:?} has a{} component {c:?}",
            if c.is_empty() { "n empty" } else { "" }
        ));
    }
    Ok(())
}

/// Checks an entry read from a journal file before it is applied: one arm per kind of entry
/// (a new kind of entry is one more arm). Files and directories must lie under a cgroup mount
/// (`mounts`); the one file outside them schedkit writes is `<proc>/irq/default_smp_affinity`
/// (exclusive mode), whose value must be a mask. Thread and process entries are also checked
/// at undo time: they act only on a pid/tid whose start time matches.
pub fn validate(
    e: &Entry,
    roots: &Roots,
    mounts: &CgroupMounts,
) -> std::result::Result<(), String> {
    let positive = |what: &str, id: i32| {
        if id > 0 {
            Ok(())
        } else {
            Err(format!("{what} {id} is not a positive id"))
        }
    };
    match e {
        // The path is `/proc/irq/<irq>/smp_affinity` by construction (`irq` is a number);
        // the value must be a mask.
        Entry::Irq { old, .. } => CpuSet::parse_mask(old)
            .map(|_| ())
            .map_err(|m| format!("IRQ mask {old:?}: {m}")),
        Entry::Affinity { pid, tid, .. } | Entry::Sched { pid, tid, .. } => {
            positive("pid", *pid).and_then(|_| positive("tid", *tid))
        }
        Entry::Affinities { pid, tids, .. } => {
            positive("pid", *pid)?;
            tids.iter().try_for_each(|t| positive("tid", *t))
        }
        Entry::Sysctl { name, .. } => check_sysctl_name(name),
        Entry::File { path, old } if *path == roots.proc.join("irq/default_smp_affinity") => {
            CpuSet::parse_mask(old)
                .map(|_| ())
                .map_err(|m| format!("default IRQ mask {old:?}: {m}"))
        }
        Entry::File { path, .. } | Entry::Mkdir { path } => mounts.check(path, false),
        Entry::Stopped { pid, .. } => positive("pid", *pid),
        Entry::Attached { pid, .. } => positive("pid", *pid),
        // Undo kills every process below `path`: it must be a run's own `schedkit-<pid>`
        // directory directly under a cgroup mount, never a mount or anyone else's group.
        Entry::Job { path, .. } => {
            mounts.check(path, false)?;
            let named = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix("schedkit-"))
                .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
            let at_mount = path.parent().is_some_and(|parent| mounts.is_mount(parent));
            if named && at_mount {
                Ok(())
            } else {
                Err(format!(
                    "job cgroup {} is not a `schedkit-<pid>` directory directly under a cgroup mount",
                    path.display()
                ))
            }
        }
        Entry::Cgroup {
            path,
            tasks_file,
            back,
        } => {
            mounts.check(path, false)?;
            mounts.check(back, true)?;
            if tasks_file.is_empty()
                || tasks_file.contains('/')
                || tasks_file == "."
                || tasks_file == ".."
            {
                return Err(format!(
                    "tasks file {tasks_file:?} is not a plain file name"
                ));
            }
            Ok(())
        }
    }
}
