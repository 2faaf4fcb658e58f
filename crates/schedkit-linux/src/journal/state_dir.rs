//! The state directory: where journals live, and the checks that make one trustworthy
//! (owned by the effective user, not writable by group or others).

use super::*;

/// The default state directory (see the module docs).
pub fn state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("SCHEDKIT_STATE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if uid == 0 {
        return PathBuf::from("/run/schedkit");
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("schedkit");
    }
    PathBuf::from(format!("/tmp/schedkit-{uid}"))
}

pub(super) fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// Checks that `dir` is fit to hold journals: a directory (or a symlink of ours to one) owned
/// by the effective user and not writable by group or others. A directory of ours that is
/// merely readable by others (0755, as older versions made it) is narrowed to 0700.
pub fn check_state_dir(dir: &Path) -> Result<()> {
    let refuse = |what: String| {
        Error::Input(format!(
            "state directory {}: {what}; refusing to use it (remove it or set SCHEDKIT_STATE_DIR)",
            dir.display()
        ))
    };
    let me = euid();
    let l = std::fs::symlink_metadata(dir)
        .map_err(|e| Error::io(format!("state directory {}", dir.display()), e))?;
    if l.file_type().is_symlink() && l.uid() != me {
        return Err(refuse(format!(
            "is a symlink owned by uid {}, not uid {me}",
            l.uid()
        )));
    }
    let m = std::fs::metadata(dir)
        .map_err(|e| Error::io(format!("state directory {}", dir.display()), e))?;
    if !m.is_dir() {
        return Err(refuse("is not a directory".into()));
    }
    if m.uid() != me {
        return Err(refuse(format!(
            "is owned by uid {}, not by uid {me} (this process)",
            m.uid()
        )));
    }
    let mode = m.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(refuse(format!(
            "is writable by {} (mode {mode:04o})",
            if mode & 0o020 != 0 && mode & 0o002 != 0 {
                "group and others"
            } else if mode & 0o020 != 0 {
                "its group"
            } else {
                "others"
            }
        )));
    }
    if mode & 0o077 != 0 {
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    }
    Ok(())
}

/// Creates `dir` (mode 0700) if missing, then [`check_state_dir`].
pub fn prepare_state_dir(dir: &Path) -> Result<()> {
    if std::fs::symlink_metadata(dir).is_err() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| Error::io(format!("create state dir {}", dir.display()), e))?;
    }
    check_state_dir(dir)
}
